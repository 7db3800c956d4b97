"""The agno, openai-agents and llamaindex adapters on their real packages (no LLM: none of
them calls one as configured): what each native deletion leaves, measured on two users, and,
for the SQLite-backed ones, the read-only scan and the complete erasure of a live instance.

Expected counts come from what the packages do (explained at each assert), measured with
these versions (pyproject extras)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest

from traceless.audit import SystemAuditConfig, plant_canaries, store_copies
from traceless.errors import ConfigError
from traceless.models import CachingBackend, HashingEmbedder, ScriptedBackend
from traceless.systems import (
    SystemRuntime,
    erase_system,
    load_system_config,
    open_system,
    scan_system,
    system_class,
)

PLANTED = plant_canaries(SystemAuditConfig(profiles=2))
ME, OTHER = PLANTED


def _runtime() -> SystemRuntime:
    return SystemRuntime(CachingBackend(ScriptedBackend(lambda m, c: "no")), HashingEmbedder(), "scripted")


def _written(name: str, base: Path, **cfg: Any) -> None:
    sys = open_system(name, base, load_system_config(name, cfg), _runtime())
    try:
        sys.write([s for p in PLANTED for s in p.sessions])
    finally:
        sys.close()


def _after(name: str, base: Path, tmp: Path, op: str) -> tuple[dict[str, int], dict[str, int], bool, bool]:
    """(my canary's copies per store, the other user's, my canary retrieved, theirs retrieved)
    after ``op`` for me, on a fresh copy of ``base``."""
    work = tmp / op.replace("+", "_")
    shutil.copytree(base, work)
    sys = open_system(name, work, load_system_config(name, {}), _runtime())
    try:
        sys.delete(op, ME.target)
        q = "What is my private session token?"
        return (store_copies(sys, [ME.canary]), store_copies(sys, [OTHER.canary]),
                any(ME.canary in c.text for c in sys.context(ME.owner, q)),
                any(OTHER.canary in c.text for c in sys.context(OTHER.owner, q)))
    finally:
        sys.close()


def _sha(path: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))).hexdigest()


def test_agno_native_deletions(tmp_path: Path) -> None:
    pytest.importorskip("agno")
    _written("agno", tmp_path / "base")
    # the canary's user turn is one memory (text and its `input`: 2 copies) and one run
    mine, theirs, seen, _ = _after("agno", tmp_path / "base", tmp_path, "delete_user_memory")
    assert mine == {"agno_memories": 0, "agno_runs": 1, "agno_sessions": 0, "agno_schema_versions": 0}
    assert theirs["agno_memories"] == 2 and not seen  # the agent reads memories only
    mine, _, _, _ = _after("agno", tmp_path / "base", tmp_path, "delete_session")
    assert mine["agno_memories"] == 2 and mine["agno_runs"] == 0  # the run goes with the session
    mine, _, _, _ = _after("agno", tmp_path / "base", tmp_path, "clear_user_memories+delete_sessions")
    assert not any(mine.values())
    # the agent's clear_memory tool deletes every user's memories (agno #9983)
    _, theirs, _, seen_theirs = _after("agno", tmp_path / "base", tmp_path, "clear_memory")
    assert theirs["agno_memories"] == 0 and theirs["agno_runs"] == 1 and not seen_theirs


def test_openai_agents_native_deletions(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    _written("openai-agents", tmp_path / "base")
    # pop_item removes only the newest item: it is called until no item holds the canary,
    # which also removes every later item of the user's one session
    mine, theirs, seen, seen_theirs = _after("openai-agents", tmp_path / "base", tmp_path, "pop_item")
    assert mine == {"agent_messages": 0, "agent_sessions": 0} and not seen
    assert theirs["agent_messages"] == 1 and seen_theirs
    mine, _, _, _ = _after("openai-agents", tmp_path / "base", tmp_path, "clear_session")
    assert mine["agent_messages"] == 0


def test_llamaindex_native_deletions(tmp_path: Path) -> None:
    pytest.importorskip("llama_index.core")
    _written("llamaindex", tmp_path / "base")
    mine, theirs, seen, seen_theirs = _after("llamaindex", tmp_path / "base", tmp_path, "reset")
    assert mine["chat_store"] == 0 and mine["docstore"] == 1 and seen  # the index still retrieves it
    assert theirs["chat_store"] == 1 and seen_theirs
    # LlamaIndex's default delete_ref_doc keeps the nodes in the docstore
    mine, _, _, _ = _after("llamaindex", tmp_path / "base", tmp_path, "delete_ref_doc")
    assert mine["docstore"] == 1 and mine["vector_store"] == 0 and mine["chat_store"] == 1
    mine, _, _, _ = _after("llamaindex", tmp_path / "base", tmp_path, "delete_ref_doc+docstore")
    assert mine["docstore"] == 0
    mine, _, seen, _ = _after("llamaindex", tmp_path / "base", tmp_path, "reset+delete_ref_doc+docstore")
    assert not any(mine.values()) and not seen


@pytest.mark.parametrize("name, module, db", [("agno", "agno", "agno.db"),
                                              ("openai-agents", "agents", "sessions.db")])
def test_live_scan_is_read_only_and_the_erasure_is_complete(tmp_path: Path, name: str, module: str, db: str) -> None:
    pytest.importorskip(module)
    _written(name, tmp_path / "live")
    path = tmp_path / "live" / db
    cfg = load_system_config(name, {"db_file": str(path)})
    before = _sha(path)
    ro = system_class(name).attach(cfg, read_only=True)
    rep = scan_system(ro, ME.owner, [ME.canary])
    assert _sha(path) == before  # reading wrote nothing
    assert rep.hits and all(h.value is None for h in rep.hits) and rep.files
    assert {h.store for h in rep.hits if h.literal_count} and all(h.owner_match for h in rep.hits)
    with pytest.raises(ConfigError, match="read-only"):
        ro.delete("clear_session" if name == "openai-agents" else "clear_memory", ME.target)
    rw = system_class(name).attach(cfg, read_only=False)
    receipt = erase_system(rw, ME.owner, [ME.canary], state_dir=tmp_path / "state", key=b"k" * 32)
    assert receipt.verification.passed and receipt.verification.checks["bystanders_intact"]
    assert all(g.endswith("=clear") for g in receipt.guarantee)
    after = scan_system(system_class(name).attach(cfg, read_only=True), ME.owner, [ME.canary])
    assert after.empty() and after.files_scanned >= 1
    theirs = scan_system(system_class(name).attach(cfg, read_only=True), OTHER.owner, [OTHER.canary])
    assert any(h.literal_count for h in theirs.hits)  # the other user's records are all still there
    assert not list((tmp_path / "state" / "erasures").iterdir())  # the journal is gone after signing


def test_attach_refuses_a_missing_instance(tmp_path: Path) -> None:
    for name in ("agno", "openai-agents"):
        with pytest.raises(ConfigError, match="does not exist"):
            system_class(name).attach(load_system_config(name, {"db_file": str(tmp_path / "nope.db")}),
                                      read_only=True)
        with pytest.raises(ConfigError, match="db_file"):
            system_class(name).attach(load_system_config(name, {}), read_only=True)
    assert not list(tmp_path.iterdir())


def test_scan_of_an_instance_a_writer_has_open_reads_its_wal_and_changes_nothing(tmp_path: Path) -> None:
    import sqlite3

    pytest.importorskip("agents")
    _written("openai-agents", tmp_path / "live")
    path = tmp_path / "live" / "sessions.db"
    writer = sqlite3.connect(str(path))
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
                       (OTHER.owner, '{"role": "user", "content": "one more"}'))
        writer.commit()
        wal = path.with_name(path.name + "-wal")
        assert wal.stat().st_size > 0  # the new row is only in the WAL
        main, log = hashlib.sha256(path.read_bytes()).hexdigest(), hashlib.sha256(wal.read_bytes()).hexdigest()
        cfg = load_system_config("openai-agents", {"db_file": str(path)})
        rep = system_class("openai-agents").attach(cfg, read_only=True).scan(OTHER.owner, [OTHER.canary])
        assert rep.stores["agent_messages"] == 12 * 2 + 1  # 2 users x 12 turns, and the WAL's row
        assert hashlib.sha256(path.read_bytes()).hexdigest() == main
        assert hashlib.sha256(wal.read_bytes()).hexdigest() == log
    finally:
        writer.close()


def test_audit_rows_say_what_tracelesss_erasure_reaches_after_each_native_deletion(tmp_path: Path) -> None:
    """The residue cell of a deletion phase of a system with an erasure records, per store, the
    claim traceless's own erasure reached on that phase's memory (here every store ``clear``:
    Agno's deletions, then the runs they leave, then VACUUM); the report's scorecard shows it."""
    pytest.importorskip("agno")
    from traceless.audit import run_system_audit
    from traceless.report import render_report

    cfg = SystemAuditConfig(system="agno", model="scripted", profiles=2, operations=("delete_user_memory", "clear_memory"),
                            keep_memory=True)
    res = run_system_audit(cfg, _runtime(), tmp_path / "a")
    assert res.copies["delete_user_memory"]["agno_runs"] == 2  # what the native deletion left
    # the erasure ran on a copy: the kept memory is what the native deletion left
    kept = (tmp_path / "a" / "work" / "delete_user_memory" / "agno.db").read_bytes()
    assert kept.count(ME.canary.encode()) == 1
    for op in ("delete_user_memory", "clear_memory"):
        assert res.erasure[op]["passed"] and set(res.erasure[op]["claims"].values()) == {"clear"}
        assert set(res.erasure[op]["claims"]) == set(res.copies[op])
    assert res.bystanders["delete_user_memory"]["intact"] and not res.bystanders["clear_memory"]["intact"]
    md = render_report(tmp_path / "a").read_text()
    rows = md.split("## Erasure scorecard")[1].strip().splitlines()
    assert rows[2] == ("| agno | `delete_user_memory` | 0.00 | agno_runs 2 | 2 (`agno.db`) | — | — (not run by the audit) | "
                       f"yes ({res.bystanders['delete_user_memory']['copies_after']}/"
                       f"{res.bystanders['delete_user_memory']['copies_before']}) | clear in every store |")
    assert rows[3].startswith("| agno | `clear_memory` |") and "**NO**" in rows[3]
