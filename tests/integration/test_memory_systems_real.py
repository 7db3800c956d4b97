"""The mem0 and LangGraph adapters on the real packages, offline, through the audit engine,
with SmolLM2-135M served by llama.cpp on loopback (the agent, mem0's ``infer=True``
extractor and the LangGraph summarization node all call it).

Leakage rates from a 135M model mean little; what is asserted is what the packages'
deletions leave in their stores, as measured (docs/memory-systems.md has the default-model table).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from traceless.audit import SystemAuditConfig, plant_canaries, run_system_audit
from traceless.cli._systems import print_result
from traceless.models import CachingBackend, ModelBackend, load_backend, load_embedder
from traceless.systems import SystemRuntime

pytestmark = [pytest.mark.heavy(290), pytest.mark.integration]
SPEC = "llamacpp:smollm2-135m-instruct"


@pytest.fixture(scope="module")
def served() -> Iterator[ModelBackend]:
    pytest.importorskip("xllamacpp")
    be = CachingBackend(load_backend(SPEC, timeout=900))
    yield be
    be.close()


def _audit(served: ModelBackend, out: Path, system: str, **system_config: object) -> object:
    pytest.importorskip({"mem0": "mem0", "langgraph": "langgraph.checkpoint.sqlite"}[system])
    cfg = SystemAuditConfig(system=system, system_config=system_config, model=SPEC, profiles=1, max_new_tokens=24)
    return run_system_audit(cfg, SystemRuntime(served, load_embedder(), SPEC), out)


def test_mem0_delete_leaves_the_canary_in_history(served: ModelBackend, tmp_path: Path) -> None:
    res = _audit(served, tmp_path / "a", "mem0", infer=False)
    c, files = res.copies, res.files  # type: ignore[attr-defined]
    assert c["before"]["vector_store"] >= 1 and c["before"]["history"] == 1  # the ADD row
    for op in ("delete", "delete_all"):
        assert c[op]["vector_store"] == 0
        assert c[op]["history"] == 2  # the ADD row and the DELETE row's old_memory
        assert set(files[op]) == {"history.db"}
    assert all(n == 0 for n in c["reset"].values()) and files["reset"] == {}
    rows = [json.loads(x) for x in (tmp_path / "a" / "results.jsonl").read_text().splitlines()]
    assert rows and all(r["reply"].strip() for r in rows)
    text = (tmp_path / "a" / "results.jsonl").read_text()
    assert "[CANARY]" in text and not any(p.canary in text for p in plant_canaries(SystemAuditConfig(profiles=1)))
    assert not (tmp_path / "a" / "work").exists()  # the plaintext memory is gone after the audit


def test_mem0_infer_true_sends_its_extraction_through_the_served_model(tmp_path: Path) -> None:
    # mem0's extraction prompt is ~8.7k tokens: beyond SmolLM2's 8k window, so this one runs
    # on the default model, started with the context the adapter declares (16k). The reply is
    # capped at 16 tokens (llm_max_tokens): the 0.5B model's extraction at mem0's 512 tokens
    # was unparsable JSON anyway (mem0 then keeps the messages only), and decoding it took
    # ~150 of the test's ~280 s. What is tested: mem0's infer path ran through the served
    # model (the messages store, written only on that path, holds the session) and every
    # deletion's residue is counted.
    pytest.importorskip("mem0")
    from traceless import audit
    from traceless.systems import Mem0Config, Mem0System

    assert Mem0System.context_tokens(Mem0Config(infer=True)) == 16384
    # one user with one session: every mem0 add with infer=true is one ~8.7k-token extraction
    # call (mem0 2.2); the synthetic user's second session would double it and test nothing more
    import numpy as np

    from traceless.datasets import synthetic_users
    from traceless.memory import write_sessions_jsonl

    data = tmp_path / "one-session.jsonl"
    write_sessions_jsonl(synthetic_users(1, np.random.default_rng(0))[0][:1], data)
    spec = "llamacpp:qwen2.5-coder-0.5b-instruct"
    res = audit("mem0", model=spec, embedder="all-MiniLM-L6-v2", out=tmp_path / "b",
                system_config={"infer": True, "llm_max_tokens": 16}, data=str(data), profiles=1, max_new_tokens=24, operations=("delete_all", "reset"))
    c = res.copies
    assert set(c["before"]) == {"vector_store", "entity_store", "history", "messages"}
    assert c["before"]["messages"] >= 1  # the infer path ran: mem0 saves the messages at its end
    assert all(n == 0 for n in c["reset"].values())  # reset clears every store, whatever was extracted
    assert c["delete_all"]["vector_store"] == 0


def test_langgraph_deletions_and_report(served: ModelBackend, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lg"
    res = _audit(served, out, "langgraph")
    print_result(res, SPEC)  # type: ignore[arg-type]
    s = json.loads((out / "summary.json").read_text())
    c = s["copies"]
    assert c["before"]["store"] == 1 and c["before"]["checkpoints"] > 0
    assert c["store.delete"]["store"] == 0 and c["store.delete"]["checkpoints"] == c["before"]["checkpoints"]
    assert c["delete_thread"]["checkpoints"] == 0 and c["delete_thread"]["writes"] == 0
    assert c["delete_thread"]["store"] == 1
    assert all(n == 0 for n in c["store.delete+delete_thread"].values())
    printed = capsys.readouterr().out
    assert "store" in printed
    assert not any(p.canary in printed for p in plant_canaries(SystemAuditConfig(profiles=1)))
    from traceless.report import render_report

    md = render_report(out).read_text()
    assert "| store.delete |" in md and (out / "report" / "heatmap.png").stat().st_size > 0
