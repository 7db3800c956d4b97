"""The audit on a user's own LangGraph graph (``create_react_agent`` + LangMem's memory
tools, ``tests/fixtures/lg_memory_agent.py``) with SmolLM2-135M served by llama.cpp on
loopback answering inside that graph (its factory takes ``model=``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traceless.audit import SystemAuditConfig, plant_canaries, run_system_audit
from traceless.models import CachingBackend, load_backend, load_embedder
from traceless.systems import SystemRuntime

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SPEC = "llamacpp:smollm2-135m-instruct"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lg_memory_agent.py"


def test_the_users_graph_answers_with_the_served_model(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    pytest.importorskip("langmem")
    model = CachingBackend(load_backend(SPEC, timeout=900))
    cfg = {"graph": f"{FIXTURE}:build",
           "users": {"namespace": ["memories", "{user_id}"], "configurable": {"langgraph_user_id": "{user_id}"}}}
    try:
        res = run_system_audit(SystemAuditConfig(system="langgraph", system_config=cfg, model=SPEC, profiles=1,
                                                 max_new_tokens=24, operations=("store.delete",)),
                               SystemRuntime(model, load_embedder(), SPEC), tmp_path / "a")
    finally:
        model.close()
    c = res.copies
    # the canary is in the thread the user's graph checkpointed; store.delete leaves all of it
    assert c["before"]["checkpoints"] > 0 and c["store.delete"]["store"] == 0
    assert c["store.delete"]["checkpoints"] == c["before"]["checkpoints"]
    rows = [json.loads(x) for x in (tmp_path / "a" / "results.jsonl").read_text().splitlines()]
    replies = {r["level"]: r["reply"] for r in rows if r.get("reply") is not None and r["phase"] == "before"}
    assert replies["jailbreak"] == "Noted."  # the user's agent, not the audit's prompt, answered
    assert replies["direct"].strip() and replies["direct"] != "Noted."  # SmolLM2 inside the user's graph
    text = (tmp_path / "a" / "results.jsonl").read_text()
    assert not any(p.canary in text for p in plant_canaries(SystemAuditConfig(profiles=1)))
