"""`traceless audit` end to end on a real embedded model (smollm2: fast, weak recall).

Leakage numbers from smollm2 mean little; this proves the pipeline runs on real
generations and that the mechanical guarantees hold on them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traceless.audit import SystemAuditConfig, run_system_audit
from traceless.models import CachingBackend, load_backend, load_embedder
from traceless.systems import SystemRuntime

pytestmark = [pytest.mark.heavy(110), pytest.mark.integration]


def test_audit_on_smollm2(tmp_path: Path) -> None:
    model = CachingBackend(load_backend("smollm2-135m-instruct"))
    cfg = SystemAuditConfig(
        system="traceless",
        system_config={"S": 1, "modes": ["noop", "full_purge", "lineage_closure"]},
        model="smollm2-135m-instruct",
        profiles=1,  # the pipeline and its guarantees on real generations (2 took 63 s of CI)
        max_new_tokens=24,
    )
    res = run_system_audit(cfg, SystemRuntime(model, load_embedder(), cfg.model), tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == res.rows > 0
    assert all(r["reply"].strip() for r in rows)  # real text came back
    assert all(r["completion_tokens"] > 0 for r in rows)
    for mode in ("full_purge", "lineage_closure"):
        assert res.table[mode]["FRS_worst"] == 0.0
    # the summaries were written by the real model (S=1 key facts)
    assert res.table["noop"].keys() >= {"AER_direct", "FRS_raw", "FRS_summary"}


def test_default_audit_runs_on_llamacpp_reproducibly_with_the_engine_in_every_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API's default path: a catalog name is served by a real llama.cpp server; every row
    names that engine; and a second run gives the same rows, reply for reply (with slots or
    the prompt cache on, llama.cpp's greedy replies depend on batch and cache state)."""
    pytest.importorskip("xllamacpp")
    from traceless import audit

    # one thread: a 2-thread server's per-token sync collapses when anything else takes a core
    monkeypatch.setenv("TRACELESS_NUM_THREADS", "1")
    runs = []
    for out in (tmp_path / "a", tmp_path / "b"):
        res = audit("traceless", model="smollm2-135m-instruct", embedder="hashing", out=out,
                    system_config={"S": 1, "modes": ["noop", "full_purge"]}, profiles=1, max_new_tokens=16)
        rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
        assert len(rows) == res.rows > 0 and all(r["completion_tokens"] > 0 for r in rows)
        runs.append((res, rows))
    (res, rows), (res2, rows2) = runs
    engines = {json.dumps(r["model"]["engine"], sort_keys=True) for r in rows}
    assert len(engines) == 1
    eng = rows[0]["model"]["engine"]
    assert eng["name"] == "llama.cpp" and eng["parallel"] == 1 and eng["cache_prompt"] is False
    assert rows[0]["config"]["study"]["model"] == "llamacpp:smollm2-135m-instruct"
    assert res.table["full_purge"]["FRS_worst"] == 0.0
    assert [(r["phase"], r["profile"], r["view"], r["level"], r["reply"]) for r in rows] == \
        [(r["phase"], r["profile"], r["view"], r["level"], r["reply"]) for r in rows2]
    assert res.table == res2.table and res.copies == res2.copies
