"""The bystander check of the SQLite-backed erasure (agno, openai-agents; ``_sqlite_live``)
when another user's record quotes the erased user's literal.

The erasure rewrites such a record (the literal becomes ``[erased]``, the record stays): the
bystander digests must compare the other users' records with that rewrite applied, so the
planned rewrite is not reported as over-deletion (a false "damaged"), while any other change
to a bystander's record still is (no false "intact")."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from traceless.audit import SystemAuditConfig, plant_canaries
from traceless.memory import Session, Turn
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import (
    ErasurePlan,
    StoreOutcome,
    SystemRuntime,
    erase_system,
    load_system_config,
    open_system,
    scan_system,
    system_class,
)

ME, OTHER = plant_canaries(SystemAuditConfig(profiles=2))
SYSTEMS = [("agno", "agno", "agno.db", "agno_memories"), ("openai-agents", "agents", "sessions.db", "agent_messages")]


def _live(name: str, base: Path, db: str) -> Path:
    """Both users' sessions, and one more of the other user quoting my canary."""
    quote = Session(user_id=OTHER.owner, session_id="quote", turns=[
        Turn(role="user", content=f"my colleague's token is {ME.canary}, remember it"),
        Turn(role="assistant", content="noted")])
    system = open_system(name, base, load_system_config(name, {}),
                         SystemRuntime(ScriptedBackend(lambda m, c: "no"), HashingEmbedder(), "scripted"))
    try:
        system.write([*ME.sessions, *OTHER.sessions, quote])
    finally:
        system.close()
    return base / db


@pytest.mark.parametrize("name, module, db, table", SYSTEMS)
def test_a_bystander_record_rewritten_by_the_erasure_is_intact(tmp_path: Path, name: str, module: str, db: str,
                                                               table: str) -> None:
    pytest.importorskip(module)
    path = _live(name, tmp_path / "live", db)
    cfg = load_system_config(name, {"db_file": str(path)})
    before = scan_system(system_class(name).attach(cfg, read_only=True), None, [ME.canary])
    quoted = [h for h in before.hits if not h.owner_match and h.literal_count]
    assert quoted  # the other user's record holds my canary: the erasure rewrites it
    receipt = erase_system(system_class(name).attach(cfg, read_only=False), ME.owner, [ME.canary],
                           state_dir=tmp_path / "state", key=b"k" * 32)
    assert receipt.verification.checks["bystanders_intact"], receipt.notes
    assert receipt.verification.passed and all(g.endswith("=clear") for g in receipt.guarantee)
    con = sqlite3.connect(str(path))
    try:
        texts = ["\t".join(map(str, r)) for r in con.execute(f"SELECT * FROM {table}")]  # noqa: S608 - fixed names
    finally:
        con.close()
    joined = "\n".join(texts)
    assert ME.canary not in joined and "my colleague's token is [erased]" in joined  # rewritten, kept
    assert OTHER.canary in (path.read_bytes().decode("utf-8", "replace"))  # the other user's own canary stays


@pytest.mark.parametrize("name, module, db, table", SYSTEMS)
def test_any_other_change_to_a_bystander_record_is_still_over_deletion(tmp_path: Path, name: str, module: str,
                                                                       db: str, table: str) -> None:
    """The normalisation covers the planned rewrite only: an erasure that also edits another
    user's record in a way the plan did not say fails the check."""
    pytest.importorskip(module)
    path = _live(name, tmp_path / "live", db)
    cls = system_class(name)
    system = cls.attach(load_system_config(name, {"db_file": str(path)}), read_only=False)
    real = system.execute_erasure

    def damaging(plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        out = real(plan, literals)
        con = sqlite3.connect(str(path))
        try:  # a bystander's record loses a word the plan never named
            con.execute(f"UPDATE {table} SET {_text_col(table)} = replace({_text_col(table)}, 'remember', '')")  # noqa: S608
            con.commit()
        finally:
            con.close()
        return out

    system.execute_erasure = damaging  # type: ignore[method-assign]
    receipt = erase_system(system, ME.owner, [ME.canary], state_dir=tmp_path / "state", key=b"k" * 32)
    assert not receipt.verification.checks["bystanders_intact"] and not receipt.verification.passed
    assert any(n.startswith("OVER-DELETION") and table in n for n in receipt.notes)


def _text_col(table: str) -> str:
    return {"agno_memories": "memory", "agent_messages": "message_data"}[table]
