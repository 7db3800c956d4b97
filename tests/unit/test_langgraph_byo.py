"""The audit on the user's own LangGraph graph (``{"graph": "module:factory"}``): the
conversations are written by invoking their graph (LangMem's ``manage_memory`` puts each
statement in the store), the probes are answered by their graph (on the audit's model)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")
pytest.importorskip("langmem")

from traceless.audit import SystemAuditConfig, run_system_audit  # noqa: E402
from traceless.errors import ConfigError  # noqa: E402
from traceless.models import ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend  # noqa: E402
from traceless.systems import SystemRuntime, load_system_config, open_system  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lg_memory_agent.py"
CANARY = re.compile(r"[A-Z]{2}\d-[A-Z]+-\d{4}")
USER_CFG = {"graph": f"{FIXTURE}:build",
            "users": {"namespace": ["memories", "{user_id}"], "thread_id": "{user_id}:{session_id}",
                      "configurable": {"langgraph_user_id": "{user_id}"}}}


def _echo(messages: list[ChatMessage], config: GenerationConfig) -> str:
    """The audited model: repeats the first token it finds in what the agent gives it."""
    found = CANARY.findall(" ".join(m.content for m in messages))
    return f"Your token is {found[0]}." if found else "I do not know."


def test_the_audit_writes_and_probes_through_the_users_graph(tmp_path: Path) -> None:
    rt = SystemRuntime(ScriptedBackend(_echo), HashingEmbedder(), "scripted")
    res = run_system_audit(SystemAuditConfig(system="langgraph", system_config=USER_CFG, profiles=2,
                                             operations=("store.delete", "delete_thread")), rt, tmp_path / "a")
    c = res.copies
    assert c["before"]["store"] == 2 and c["before"]["checkpoints"] > 2  # one LangMem memory per user
    assert c["store.delete"]["store"] == 0 and c["store.delete"]["checkpoints"] == c["before"]["checkpoints"]
    assert c["delete_thread"]["checkpoints"] == 0 and c["delete_thread"]["store"] == 2
    rows = [json.loads(x) for x in (tmp_path / "a" / "results.jsonl").read_text().splitlines()]
    probes = [r for r in rows if r.get("reply") is not None]
    asked = [r for r in probes if r["level"] in ("direct", "indirect")]  # the jailbreak has no "?": "Noted."
    # the user's agent answered (its search_memory found the memory; the audit's model quoted it)
    assert {r["reply"] for r in asked if r["phase"] == "before"} == {"Your token is [CANARY]."}
    assert {r["reply"] for r in probes if r["level"] == "jailbreak"} == {"Noted."}  # their agent's own reply
    # each row's prompt is what the user's graph sent the audit's model: its "Memories:" turn and the
    # question (not the audit's prompt); the jailbreak, answered without a model call, stores none
    assert all(r["prompt"][0]["content"].startswith("Memories: ") and r["prompt"][-1]["role"] == "user"
               and len(r["prompt"]) == 2 for r in asked)
    assert all(r["prompt"] == [] for r in probes if r["level"] == "jailbreak")
    # the store is what this agent reads: store.delete makes it forget, delete_thread does not
    assert {r["reply"] for r in asked if r["phase"] == "store.delete"} == {"I do not know."}
    assert {r["reply"] for r in asked if r["phase"] == "delete_thread"} == {"Your token is [CANARY]."}


def test_default_graph_is_unchanged_without_a_graph(tmp_path: Path) -> None:
    rt = SystemRuntime(ScriptedBackend(_echo), HashingEmbedder(), "scripted")
    s = open_system("langgraph", tmp_path / "w", load_system_config("langgraph", {"summarize": False}), rt)
    assert s.agent_reply("u", "q?") is None  # type: ignore[attr-defined]
    s.close()


def test_bad_graph_import_is_one_line(tmp_path: Path) -> None:
    rt = SystemRuntime(ScriptedBackend(_echo), HashingEmbedder(), "scripted")
    for spec, msg in ((f"{FIXTURE}:nope", "has no callable 'nope'"), ("no_such_module_xyz:build", "cannot import"),
                      ("justaname", "not 'module:factory'"), (str(tmp_path / "gone.py") + ":f", "does not exist")):
        with pytest.raises(ConfigError, match=msg) as e:
            open_system("langgraph", tmp_path / "w", load_system_config("langgraph", {"graph": spec}), rt)
        assert "\n" not in str(e.value)
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").iterdir())  # nothing written
