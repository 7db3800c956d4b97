"""Issue #22, items 1, 6, 11 and 12: traceless never alters a database it does not own,
`forget verify --db` re-scans what it is given, a store id is never a path, and a gate
without its key id fails closed.

Each test failed on the code before the fix.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _forget_helpers import CANARY, alice_sessions, make_writer, session

from traceless.errors import GateKeyError, MemoryStoreError
from traceless.forget import ForgetTarget, forget
from traceless.memory import MemoryStore


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("TRACELESS_HOME", str(home))
    return home


def _pg(db: str) -> bool:
    return db.startswith("postgresql://")


def _sql(db: str, stmt: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement past the store, with the engine's own client (an attacker's edit)."""
    if _pg(db):
        import psycopg

        with psycopg.connect(db, autocommit=True) as c:
            cur = c.execute(stmt.replace("?", "%s"), params)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        return [tuple(r) for r in conn.execute(stmt, params).fetchall()]
    finally:
        conn.close()


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# ------------------------------------------------------------------ 11. the store id is never a path
@pytest.mark.parametrize("tampered", ["abs", "../x", "../../escape"])
def test_tampered_store_id_is_refused_before_any_key_path(tmp_path: Path, store_url: str, _home: Path,
                                                          tampered: str) -> None:
    evil = str(tmp_path / "evil") if tampered == "abs" else tampered
    MemoryStore(store_url).close()  # a new, empty store: encryption may still be switched on
    _sql(store_url, "UPDATE meta SET value = ? WHERE key = 'store_id'", (evil,))
    before = _tree(tmp_path)
    with pytest.raises(MemoryStoreError, match="store id .* not one traceless makes"):
        MemoryStore(store_url, encrypt=True)
    after = _tree(tmp_path)
    assert after - before <= {"home", "home/master"}, after - before  # nothing under the tampered path
    assert not (tmp_path / "evil").exists() and not any((tmp_path / "home").glob("*/*.key"))


def test_tampered_store_id_of_an_encrypted_store(tmp_path: Path, store_url: str) -> None:
    with MemoryStore(store_url, encrypt=True) as store:
        make_writer(store, 0).write_sessions(alice_sessions())
    _sql(store_url, "UPDATE meta SET value = ? WHERE key = 'store_id'", (str(tmp_path / "evil"),))
    with pytest.raises(MemoryStoreError, match="store id .* not one traceless makes"):
        MemoryStore(store_url)
    assert not (tmp_path / "evil").exists()


# ------------------------------------------------------------------ 12. descriptors without a key id
def test_gate_without_its_key_id_fails_closed(store_url: str) -> None:
    with MemoryStore(store_url) as store:
        make_writer(store, 0).write_sessions(alice_sessions())
        forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(store, 0), gate=True)
    assert _sql(store_url, "SELECT count(*) FROM gate_entries")[0][0] > 0
    _sql(store_url, "DELETE FROM meta WHERE key = 'gate_key_id'")
    with MemoryStore(store_url) as store:
        n = len(store.artifacts())
        with pytest.raises(GateKeyError, match="no longer records the gate key id"):
            make_writer(store, 0).write_sessions([session("alice", "s9", [f"again {CANARY}"])])
        with pytest.raises(GateKeyError), store.transaction():  # not even a new descriptor under a fresh key
            store.gate_forget("bob", "secret", "ANOTHER-SECRET-77")
        assert len(store.artifacts()) == n and not store.containing(CANARY)
    assert _sql(store_url, "SELECT value FROM meta WHERE key = 'gate_key_id'") == []
