"""Bad input never half-writes: newer schema, read-only and locked files, malformed JSONL."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from _forget_helpers import CANARY, alice_sessions, make_writer, other_writer

from traceless.errors import InputFormatError, MemoryStoreError, SchemaVersionError, StoreLockedError
from traceless.forget import ForgetTarget, forget
from traceless.memory import SCHEMA_VERSION, MemoryStore, parse_session_lines, read_sessions

pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _snapshot(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(db.parent.glob(db.name + "*"))}


def _populated(tmp_path: Path, where: str | None = None) -> Path:
    db = tmp_path / "m.db"
    with MemoryStore(where or db) as store:
        make_writer(store, 1).write_sessions(alice_sessions())
    return db


# ---------------------------------------------------------------- schema version
@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_newer_schema_refused_file_untouched(tmp_path: Path, journal: str) -> None:
    db = _populated(tmp_path)
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 7}")
    conn.close()
    before = _snapshot(db)
    assert list(before) == ["m.db"]
    with pytest.raises(SchemaVersionError) as ei:
        MemoryStore(db)
    msg = str(ei.value)
    assert str(SCHEMA_VERSION + 7) in msg and "newer traceless" in msg and "not modified" in msg
    assert _snapshot(db) == before  # same bytes, no -wal/-shm left behind


# ---------------------------------------------------------------- read-only / locked
def test_read_only_file(tmp_path: Path) -> None:
    db = _populated(tmp_path)
    db.chmod(0o444)
    try:
        before = _snapshot(db)
        with pytest.raises(StoreLockedError, match="read-only"):
            MemoryStore(db)
        assert _snapshot(db) == before
    finally:
        db.chmod(0o644)


def test_locked_by_exclusive_transaction(store_url: str) -> None:
    _populated(Path(), store_url)
    store = MemoryStore(store_url, timeout=0.2)
    writer = make_writer(store, 1)
    digests = {a.id: a.digest for a in store.artifacts()}
    with other_writer(store_url):
        with pytest.raises(StoreLockedError, match="locked"):
            forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=writer)
        with pytest.raises(StoreLockedError):
            writer.write_sessions(alice_sessions("OTHER"))
        with pytest.raises(StoreLockedError), store.transaction():
            pass
    assert {a.id: a.digest for a in store.artifacts()} == digests
    assert store.receipts() == []
    # the lock gone, the same store works again
    forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=writer)
    assert not store.containing(CANARY)
    store.close()


def test_locked_rollback_journal_on_open(tmp_path: Path) -> None:
    """A non-WAL file held EXCLUSIVE cannot even be read: opening reports it as locked."""
    db = _populated(tmp_path)  # a traceless store (another application's file is refused unread)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = delete")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO meta VALUES ('x', '1')")
    try:
        with pytest.raises(StoreLockedError, match="locked"):
            MemoryStore(db, timeout=0.1)
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def test_not_a_database(tmp_path: Path) -> None:
    p = tmp_path / "junk.db"
    p.write_bytes(b"this is not sqlite at all" * 100)
    before = p.read_bytes()
    with pytest.raises(MemoryStoreError, match="not a traceless memory file"):
        MemoryStore(p)
    assert p.read_bytes() == before


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="does not exist"):
        MemoryStore(tmp_path / "nope" / "m.db")


# ---------------------------------------------------------------- malformed JSONL
def _line(**over: object) -> str:
    obj: dict[str, object] = {"user_id": "u", "session_id": "s", "turns": [{"role": "user", "content": "hi"}]}
    obj.update(over)
    return json.dumps(obj)


@pytest.mark.parametrize(("bad", "needles"), [
    ("{not json", ["line 2", "not valid JSON"]),
    ("[1, 2]", ["line 2", "JSON object"]),
    (_line(turns=[]), ["line 2", "'turns'"]),
    (_line(turns=[{"role": "robot", "content": "x"}]), ["line 2", "'turns.0.role'"]),
    (_line(turns=[{"role": "user"}]), ["line 2", "'turns.0.content'"]),
    (_line(user_id=""), ["line 2", "'user_id'"]),
    (_line(session_id=None), ["line 2", "'session_id'"]),
    (_line(colour="blue"), ["line 2", "'colour'"]),
    (_line(neighbors={"0": "x"}), ["line 2", "'neighbors.0'"]),
    (_line(session_id="s0"), ["line 2", "duplicate session"]),
    (_line(neighbors={"7": [0]}), ["line 2", "'neighbors'", "not a turn index"]),
    (_line(neighbors={"0": [5]}), ["line 2", "'neighbors'", "outside"]),
])
def test_malformed_jsonl_names_line_and_field_writes_nothing(tmp_path: Path, store_url: str, bad: str,
                                                             needles: list[str]) -> None:
    _populated(tmp_path, store_url)
    p = tmp_path / "in.jsonl"
    p.write_text("\n".join([_line(session_id="s0"), bad, _line(session_id="s3")]) + "\n", encoding="utf-8")
    store = MemoryStore(store_url)
    writer = make_writer(store, 1)
    before = {a.id: a.digest for a in store.artifacts()}
    with pytest.raises(InputFormatError) as ei:
        writer.write_sessions(read_sessions(p))
    msg = str(ei.value)
    for n in needles:
        assert n in msg, msg
    assert str(p) in msg
    assert {a.id: a.digest for a in store.artifacts()} == before
    store.close()


def test_invalid_utf8_names_line(tmp_path: Path) -> None:
    p = tmp_path / "in.jsonl"
    p.write_bytes(_line(session_id="a").encode() + b"\n" + _line(session_id="b").encode()[:-3] + b"\xff\xfe\"}\n")
    with pytest.raises(InputFormatError, match="line 2: not valid UTF-8"):
        read_sessions(p)


def test_utf8_bom_accepted(tmp_path: Path) -> None:
    p = tmp_path / "in.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + _line(session_id="a").encode() + b"\n")
    assert [s.session_id for s in read_sessions(p)] == ["a"]


def test_empty_and_missing_input(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match="no sessions"):
        parse_session_lines(["", "   "])
    with pytest.raises(InputFormatError, match="does not exist"):
        read_sessions(tmp_path / "missing.jsonl")


def test_valid_jsonl_round_trip(tmp_path: Path) -> None:
    from traceless.memory import write_sessions_jsonl

    p = tmp_path / "s.jsonl"
    write_sessions_jsonl(alice_sessions(), p)
    assert read_sessions(p) == alice_sessions()
