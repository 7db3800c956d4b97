"""Issue 39: the SQLite-file erasure VACUUMs only when it must. Every deletion of this library
zeroes what it frees (``secure_delete``, compiled in by Debian/Ubuntu; traceless's own
connections set it) and the byte scan then finds no literal: the file is left as it is (no
rebuild of a 1 GB file). A deletion that left bytes (a connection with ``secure_delete`` off,
or a library without it) is VACUUMed, and the receipt never claims ``clear`` while the bytes of
a literal are in the file."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from traceless.memory import Session, Turn
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import SystemRuntime, erase_system, load_system_config, open_system, system_class
from traceless.systems import _sqlite_live as live

RT = SystemRuntime(ScriptedBackend(lambda m, c: "noted"), HashingEmbedder(), "scripted")
SECRET, OTHER = "IBAN-DE89-3704-0044", "bob-keeps-this-4471"
CASES = [("openai-agents", "agents", "sessions.db"), ("agno", "agno", "agno.db")]


def _build(name: str, root: Path) -> None:
    def s(user: str, sid: str, text: str) -> Session:
        return Session(user_id=user, session_id=sid, turns=[Turn(role="user", content=text),
                                                           Turn(role="assistant", content="noted")])
    system = open_system(name, root, load_system_config(name, {}), RT)
    try:
        system.write([s("u1", "a", f"my iban is {SECRET} " + "x" * 6000), s("bob", "b", f"note {OTHER}")])
    finally:
        system.close()


def _erase(name: str, root: Path, db: str, loose: bool) -> Any:
    """Erase u1; ``loose``: the native deletion replaced by one through a connection with
    secure_delete off (the rows' bytes left in the file's free space), as a library built
    without it leaves them."""
    system = system_class(name).attach(load_system_config(name, {"db_file": str(root / db)}), read_only=False)

    def planted(plan: Any) -> None:
        system.close()
        con = sqlite3.connect(root / db)
        con.execute("PRAGMA secure_delete = OFF")
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
            col = "session_id" if name == "openai-agents" else "user_id"
            if col in cols:
                con.execute(f'DELETE FROM "{t}" WHERE "{col}" = ?', ("u1",))  # noqa: S608
        con.commit()
        con.close()
    if loose:
        system.native_erasure = planted  # type: ignore[method-assign]
    try:
        return erase_system(system, "u1", [SECRET], state_dir=root / "state", key=b"k" * 32)
    finally:
        system.close()


def _bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.iterdir()) if p.is_file())


@pytest.mark.parametrize("loose", [False, True])
@pytest.mark.parametrize("name, module, db", CASES)
def test_vacuum_runs_only_when_bytes_are_left(tmp_path: Path, name: str, module: str, db: str, loose: bool) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"needs {module}")
    if not live.secure_delete_default():
        pytest.skip("this SQLite library does not zero deleted rows by default: every erasure VACUUMs")
    _build(name, tmp_path / "w")
    receipt = _erase(name, tmp_path / "w", db, loose)
    assert receipt.verification.passed, receipt.verification.checks
    data = _bytes(tmp_path / "w")
    assert SECRET.encode() not in data and b"u1" + b"x" * 100 not in data  # the user's bytes: gone either way
    assert OTHER.encode() in data
    assert any(live.VACUUMED in n for n in receipt.notes) is loose, receipt.notes
    assert any(live.ZEROED in n for n in receipt.notes) is not loose, receipt.notes


@pytest.mark.parametrize("name, module, db", CASES)
def test_no_clear_claim_while_bytes_are_left(tmp_path: Path, name: str, module: str, db: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """With compaction taken away, a loose deletion leaves the secret's bytes: the re-scan finds
    them, the receipt fails ``files_clean`` and claims no store ``clear``."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"needs {module}")
    monkeypatch.setattr(live, "compact", lambda con, files, literals: "not compacted (test)")
    _build(name, tmp_path / "w")
    receipt = _erase(name, tmp_path / "w", db, loose=True)
    assert SECRET.encode() in _bytes(tmp_path / "w")
    assert receipt.verification.checks["files_clean"] is False and not receipt.verification.passed
    assert not any(g.endswith("=clear") for g in receipt.guarantee), receipt.guarantee


def test_a_library_without_secure_delete_always_vacuums(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("agents") is None:
        pytest.skip("needs agents")
    monkeypatch.setattr(live, "secure_delete_default", lambda: False)
    _build("openai-agents", tmp_path / "w")
    receipt = _erase("openai-agents", tmp_path / "w", "sessions.db", loose=False)
    assert receipt.verification.passed and any(live.VACUUMED in n for n in receipt.notes), receipt.notes
