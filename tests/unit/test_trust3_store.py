"""Issue #22, items 1, 6, 11 and 12: traceless never alters a database it does not own,
`forget verify --db` re-scans what it is given, a store id is never a path, and a gate
without its key id fails closed.

Each test failed on the code before the fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cli import cli
from _forget_helpers import CANARY, alice_sessions, make_writer, session

from traceless import Memory
from traceless import verify as api_verify
from traceless.errors import GateKeyError, MemoryStoreError, NotAStoreError, ReceiptError
from traceless.forget import ForgetTarget, check_store, forget, load_receipt, verify_receipt
from traceless.memory import MemoryStore
from traceless.memory._schema import MIGRATIONS

pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


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


# ------------------------------------------------------------------ 1. a foreign database is never modified
SECRET = "PIN-4312-ALPHA"

# the tables as mem0 (mem0/memory/storage.py) and LangGraph (langgraph-checkpoint-sqlite,
# langgraph.store.sqlite) create them
_FOREIGN: dict[str, tuple[str, list[str], str | None]] = {
    "mem0": ("delete", [
        "CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT, event TEXT, "
        "created_at DATETIME, updated_at DATETIME, is_deleted INTEGER, actor_id TEXT, role TEXT)",
        "CREATE TABLE messages (id TEXT PRIMARY KEY, session_scope TEXT, role TEXT, content TEXT, name TEXT, "
        "created_at DATETIME)",
        f"INSERT INTO history VALUES ('h1', 'm1', NULL, 'my pin is {SECRET}', 'ADD', '2024', NULL, 0, 'cust-4411', "
        "'user')",
    ], "mem0's history database"),
    "langgraph_checkpoints": ("wal", [
        "CREATE TABLE checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', checkpoint_id "
        "TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB, "
        "PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))",
        "CREATE TABLE writes (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', checkpoint_id TEXT "
        "NOT NULL, task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL, type TEXT, value BLOB, "
        "PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx))",
        f"INSERT INTO checkpoints VALUES ('cust-4411', '', 'c1', NULL, 'json', '{SECRET}', '{{}}')",
    ], "LangGraph's checkpoint database"),
    "langgraph_store": ("delete", [
        "CREATE TABLE store (prefix text NOT NULL, key text NOT NULL, value text NOT NULL, created_at TIMESTAMP "
        "DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, expires_at TIMESTAMP, "
        "ttl_minutes REAL, PRIMARY KEY (prefix, key))",
        "CREATE TABLE store_migrations (v INTEGER PRIMARY KEY)",
        f"INSERT INTO store(prefix, key, value) VALUES ('memories.cust-4411', 'k1', '{{\"text\": \"{SECRET}\"}}')",
    ], "LangGraph's store database"),
    "any_app": ("wal", [
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, note TEXT)",
        f"INSERT INTO orders(customer, note) VALUES ('cust-4411', '{SECRET}')",
    ], None),
}


def _sums(db: Path) -> dict[str, str]:
    """SHA-256 of the file and of every -wal/-shm/-journal beside it (their presence too)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(db.parent.glob(db.name + "*"))}


@contextlib.contextmanager
def _foreign(tmp_path: Path, kind: str) -> Iterator[Path]:
    """Another application's database; a WAL one stays open in that application (its -wal
    and -shm exist while traceless runs), as a live LangGraph agent keeps it."""
    journal, stmts, _ = _FOREIGN[kind]
    db = tmp_path / f"{kind}.db"
    app = sqlite3.connect(db, isolation_level=None)
    app.execute(f"PRAGMA journal_mode = {journal}")
    for stmt in stmts:
        app.execute(stmt)
    try:
        if journal != "wal":
            app.close()
        yield db
    finally:
        app.close()


def _real_receipt(tmp_path: Path) -> Path:
    """A receipt of a real store (to try `forget verify` on the foreign file)."""
    store_db = tmp_path / "real.db"
    with MemoryStore(store_db) as store:
        make_writer(store, 0).write_sessions(alice_sessions())
        r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(store, 0))
    out = tmp_path / "real-receipt.json"
    out.write_text(r.model_dump_json(), encoding="utf-8")
    return out


def _commands(db: Path, tmp_path: Path) -> list[list[str]]:
    sessions = tmp_path / "s.jsonl"
    sessions.write_text(json.dumps({"user_id": "cust-4411", "session_id": "s1", "turns": [
        {"role": "user", "content": "hello"}]}) + "\n", encoding="utf-8")
    d, receipt = str(db), str(_real_receipt(tmp_path))
    return [
        ["memory", "show", "--db", d], ["memory", "show", "--db", d, "--user", "cust-4411", "--full"],
        ["memory", "search", "pin", "--db", d, "--user", "cust-4411", "--embedder", "hashing"],
        ["memory", "lineage", "r-00000001", "--db", d], ["memory", "migrate", "--db", d],
        ["memory", "add", str(sessions), "--db", d, "--embedder", "hashing", "--no-extractive"],
        ["forget", "--db", d, "--mode", "full_purge", "--user", "cust-4411", "--receipt", str(tmp_path / "u.json")],
        ["forget", "--db", d, "--mode", "full_purge", "--literal", SECRET, "--owner", "cust-4411",
         "--receipt", str(tmp_path / "l.json")],
        ["forget", "verify", receipt, "--db", d], ["forget", "verify", receipt, "--db", d, "--json"],
        ["forget", "receipts", "--db", d], ["forget", "receipt", "rcpt-0", "--db", d, "--out", str(tmp_path / "o.json")],
    ]


@pytest.mark.parametrize("kind", sorted(_FOREIGN))
def test_no_command_modifies_a_foreign_database(tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    with _foreign(tmp_path, kind) as db:
        commands = _commands(db, tmp_path)
        capsys.readouterr()
        before = _sums(db)
        assert (f"{db.name}-wal" in before) == (_FOREIGN[kind][0] == "wal")  # the application holds it open
        for args in commands:
            code = cli(*args)
            err = capsys.readouterr().err
            assert code == NotAStoreError.exit_code, (args, code, err)
            assert "is not a traceless store" in err and "Nothing was changed" in err, (args, err)
            assert len(err.strip().splitlines()) == 1, err  # one line, no traceback
            if _FOREIGN[kind][2] is not None:
                assert f"this looks like {_FOREIGN[kind][2]}" in err and "traceless scan --memory" in err
            assert _sums(db) == before, args
        for call in (lambda: MemoryStore(db), lambda: MemoryStore(db, access="read"),
                     lambda: MemoryStore(db, access="write"), lambda: Memory(db, embedder="hashing"),
                     lambda: verify_receipt(load_receipt(tmp_path / "real-receipt.json"), db=db)):
            with pytest.raises(NotAStoreError):
                call()
            assert _sums(db) == before
        assert not list(tmp_path.glob("*.json")) or not (tmp_path / "u.json").exists()


def test_a_store_is_created_only_in_a_new_or_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    sessions = tmp_path / "s.jsonl"
    sessions.write_text(json.dumps({"user_id": "u", "session_id": "s1", "turns": [
        {"role": "user", "content": "hello"}]}) + "\n", encoding="utf-8")
    missing = tmp_path / "missing.db"
    for db in (empty, missing):  # no command but `memory add` makes a store
        for args in (["memory", "migrate", "--db", str(db)],
                     ["forget", "--db", str(db), "--mode", "full_purge", "--user", "u",
                      "--receipt", str(tmp_path / "r.json")]):
            assert cli(*args) != 0
        assert not missing.exists() and empty.stat().st_size == 0
        with pytest.raises(NotAStoreError, match="Only `traceless memory add"):
            MemoryStore(db, access="write")
    assert not missing.exists() and empty.stat().st_size == 0
    assert cli("memory", "add", str(sessions), "--db", str(empty), "--embedder", "hashing") == 0
    with MemoryStore(empty, access="read") as store:
        assert [a.text for a in store.artifacts(tier="raw")] == ["hello"]


def _read_only(db: Path, before: dict[str, str]) -> bool:
    """The store's file is unchanged (a read-only SQLite connection of the store's own may
    leave an empty -wal and its -shm beside it; the -wal holds no frame)."""
    now = _sums(db)
    return now[db.name] == before[db.name] and now.get(f"{db.name}-wal", _EMPTY) == _EMPTY


_EMPTY = hashlib.sha256(b"").hexdigest()


def test_read_commands_never_write_and_never_migrate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    with MemoryStore(db) as store:
        make_writer(store, 0).write_sessions(alice_sessions())
    before = _sums(db)
    for args in (["memory", "show", "--db", str(db)], ["memory", "lineage", "r-00000001", "--db", str(db)],
                 ["memory", "search", "dog", "--db", str(db), "--user", "alice"],
                 ["forget", "receipts", "--db", str(db)]):
        assert cli(*args) == 0, capsys.readouterr().err
        assert _read_only(db, before)
    # a store of an older schema (made as traceless 4 did): read commands refuse it, unchanged;
    # a write command migrates it, saying so first
    old_db = tmp_path / "v4.db"
    conn = sqlite3.connect(old_db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for name, sql in MIGRATIONS[:4]:
        conn.executescript(sql)
        conn.execute("INSERT INTO _migrations(name, applied_at) VALUES (?, 0)", (name,))
    conn.execute("PRAGMA user_version = 4")
    conn.execute("INSERT INTO artifacts(id, owner, tier, kind, seq, text, digest, created_at) "
                 "VALUES ('r-00000001', 'alice', 'raw', 'turn', 0, 'hello', 'd', 0)")
    conn.close()
    old = _sums(old_db)
    capsys.readouterr()
    for args in (["memory", "show", "--db", str(old_db)], ["forget", "receipts", "--db", str(old_db)]):
        assert cli(*args) == MemoryStoreError.exit_code
        err = capsys.readouterr().err
        assert "schema version 4" in err and "never migrates" in err and "memory migrate" in err
        assert _read_only(old_db, old)
    with pytest.raises(MemoryStoreError, match="never migrates"):
        MemoryStore(old_db, access="read")
    assert _read_only(old_db, old)
    assert cli("memory", "migrate", "--db", str(old_db)) == 0
    assert f"migrating {old_db} from schema version 4 to {len(MIGRATIONS)}" in capsys.readouterr().err
    with MemoryStore(old_db, access="read") as store:
        assert [a.text for a in store.artifacts()] == ["hello"]
    seen: list[tuple[int, int]] = []
    MemoryStore(old_db, access="write", on_migrate=lambda a, b: seen.append((a, b))).close()
    assert seen == []  # up to date now: nothing to say


def test_a_forget_that_matched_nothing_never_reads_passed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    with MemoryStore(db) as store:
        make_writer(store, 0).write_sessions(alice_sessions())
    rpath = tmp_path / "r.json"
    assert cli("forget", "--db", str(db), "--mode", "full_purge", "--user", "cust-4411", "--receipt", str(rpath)) == 7
    r = load_receipt(rpath)
    assert not r.matched and r.verification.passed is False and r.verification.checks["target_matched"] is False
    capsys.readouterr()
    for args in (["forget", "verify", str(rpath)], ["forget", "verify", str(rpath), "--db", str(db)]):
        assert cli(*args) == 7
        assert "matched nothing: it proves no erasure" in capsys.readouterr().err
    assert cli("forget", "verify", str(rpath), "--db", str(db), "--json") == 7
    doc = json.loads(capsys.readouterr().out)
    assert doc["nothing_matched"] is True and doc["ok"] is False
    with MemoryStore(db, access="read") as store, pytest.raises(ReceiptError, match="matched nothing"):
        api_verify(r, store)


# ------------------------------------------------------------------ 6. verify re-scans what it is given
def _forgotten(tmp_path: Path, mode: str = "full_purge", target: ForgetTarget | None = None) -> tuple[Path, Path, Path]:
    """A store, its backup taken before a forget, and the forget's receipt file."""
    db, backup = tmp_path / "m.db", tmp_path / "backup.db"
    with MemoryStore(db) as store:
        make_writer(store, 0).write_sessions(alice_sessions())
    shutil.copyfile(db, backup)  # closed: the whole store is in the main file
    with MemoryStore(db) as store:
        r = forget(store, target or ForgetTarget.literal(CANARY, "alice"), mode, writer=make_writer(store, 0))
    assert r.matched and r.verification.passed, r.verification.checks
    rpath = tmp_path / "r.json"
    rpath.write_text(r.model_dump_json(), encoding="utf-8")
    return db, backup, rpath


@pytest.mark.parametrize(("mode", "kind"), [("full_purge", "literal"), ("raw_only", "literal"),
                                            ("exact", "record"), ("tombstone", "record"),
                                            ("full_purge", "session")])
def test_verify_fails_on_a_backup_taken_before_the_forget(tmp_path: Path, mode: str, kind: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    target = None
    if kind != "literal":
        with MemoryStore(":memory:") as probe:
            make_writer(probe, 0).write_sessions(alice_sessions())
            rec = next(a for a in probe.artifacts(tier="raw") if CANARY in (a.text or ""))
        target = (ForgetTarget.record(rec.id) if kind == "record"
                  else ForgetTarget.session(rec.session_id or "", "alice"))
    db, backup, rpath = _forgotten(tmp_path, mode, target)
    text = rpath.read_text(encoding="utf-8")
    assert CANARY not in text and CANARY.encode().hex() not in text  # the material is sealed, not stored
    sums = {p: _sums(p) for p in (db, backup)}
    assert cli("forget", "verify", str(rpath), "--db", str(backup)) == ReceiptError.exit_code
    err = capsys.readouterr().err  # removed records are back, or (rewritten in place) their old text is
    assert "still holds what the receipt erased" in err or "removed exist again" in err
    assert cli("forget", "verify", str(rpath), "--db", str(db)) == 0, capsys.readouterr().err
    for p, before in sums.items():  # the re-scan (bookkeeping runs included) reads, never writes
        assert _read_only(p, before), p
    assert cli("forget", "verify", str(rpath), "--db", str(db)) == 0, capsys.readouterr().err
    assert "none of what it erased is there" in capsys.readouterr().out
    assert cli("forget", "verify", str(rpath), "--db", str(backup), "--json") == 11
    doc = json.loads(capsys.readouterr().out)
    assert doc["same_store"] is True and doc["material_absent"] is False and doc["material_copies"]["rows"] > 0
    with MemoryStore(backup, access="read") as store, pytest.raises(ReceiptError, match="still holds|exist again"):
        api_verify(load_receipt(rpath), store)
    with MemoryStore(db, access="read") as store:
        api_verify(load_receipt(rpath), store)


def test_verify_rescans_the_file_bytes_not_only_the_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A clone whose rows were cleaned by hand, without secure_delete: the rows hold nothing, the
    freed pages still hold the literal. The receipt's mode erases everywhere, so verify scans bytes."""
    db, backup, rpath = _forgotten(tmp_path)
    conn = sqlite3.connect(backup, isolation_level=None)
    conn.execute("PRAGMA secure_delete = OFF")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("DELETE FROM artifacts WHERE instr(text, ?) > 0 OR instr(meta, ?) > 0", (CANARY, CANARY))
    conn.close()
    assert CANARY.encode() in backup.read_bytes()
    conn = sqlite3.connect(backup)
    assert conn.execute("SELECT count(*) FROM artifacts WHERE instr(text, ?) > 0", (CANARY,)).fetchone() == (0,)
    conn.close()
    assert cli("forget", "verify", str(rpath), "--db", str(backup), "--json") == 11
    doc = json.loads(capsys.readouterr().out)
    assert doc["material_absent"] is False and doc["material_copies"].get(str(backup), 0) > 0, doc


def test_another_owners_copy_is_not_the_receipts_material(tmp_path: Path) -> None:
    """Only bytes beyond what other owners' live rows hold count against alice's receipt."""
    db = tmp_path / "m.db"
    with MemoryStore(db) as store:
        make_writer(store, 0).write_sessions([*alice_sessions(), session("bob", "b1", [f"bob keeps {CANARY}"])])
        r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(store, 0))
    with MemoryStore(db, access="read") as store:
        assert store.containing(CANARY, owner="bob")
        got = check_store(r, store)
    assert got["material_absent"] is True and got["material_copies"] == {}, got


def test_api_verify_checks_the_store_id(tmp_path: Path) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for db in (a, b):  # the same content, two stores
        with MemoryStore(db) as store:
            make_writer(store, 0).write_sessions(alice_sessions())
    with MemoryStore(a) as store:
        r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(store, 0))
        api_verify(r, store)
    with MemoryStore(b) as store:
        forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(store, 0))
        with pytest.raises(ReceiptError, match="not the store this receipt was made on"):
            api_verify(r, store)


# ------------------------------------------------------------------ PostgreSQL
def _pg_state(url: str) -> list[tuple[Any, ...]]:
    """Every table of the database's current schema, with its columns and rows."""
    tables = [r[0] for r in _sql(url, "SELECT table_name FROM information_schema.tables "
                                      "WHERE table_schema = current_schema() ORDER BY 1")]
    out: list[tuple[Any, ...]] = []
    for t in tables:
        cols = _sql(url, "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
                         "ORDER BY ordinal_position", (t,))
        out.append((t, cols, sorted(map(str, _sql(url, f'SELECT * FROM "{t}"')))))
    return out


@pytest.mark.postgres
@pytest.mark.parametrize("kind", ["mem0", "any_app"])
def test_a_foreign_postgres_database_is_refused(pg_url: str, tmp_path: Path, kind: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    if kind == "mem0":  # mem0's history table, as its PostgreSQL history store makes it
        _sql(pg_url, "CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT, "
                     "event TEXT, created_at TIMESTAMP, updated_at TIMESTAMP, is_deleted INTEGER, actor_id TEXT, "
                     "role TEXT)")
        _sql(pg_url, f"INSERT INTO history(id, memory_id, new_memory, actor_id) VALUES ('h1', 'm1', '{SECRET}', "
                     "'cust-4411')")
    else:
        _sql(pg_url, "CREATE TABLE orders (id SERIAL PRIMARY KEY, customer TEXT, note TEXT)")
        _sql(pg_url, f"INSERT INTO orders(customer, note) VALUES ('cust-4411', '{SECRET}')")
    before = _pg_state(pg_url)
    capsys.readouterr()
    for args in (["memory", "show", "--db", pg_url],
                 ["forget", "--db", pg_url, "--mode", "full_purge", "--user", "cust-4411",
                  "--receipt", str(tmp_path / "r.json")]):
        assert cli(*args) == NotAStoreError.exit_code
        assert _pg_state(pg_url) == before
        err = capsys.readouterr().err
        assert "is not a traceless store" in err and (kind != "mem0" or "mem0's history database" in err)
    for access in ("create", "write", "read"):
        with pytest.raises(NotAStoreError, match="is not a traceless store"):
            MemoryStore(pg_url, access=access)  # type: ignore[arg-type]
        assert _pg_state(pg_url) == before


@pytest.mark.postgres
def test_an_empty_postgres_database_becomes_a_store_only_by_create(pg_url: str) -> None:
    for access in ("write", "read"):
        with pytest.raises(NotAStoreError, match="no traceless tables"):
            MemoryStore(pg_url, access=access)  # type: ignore[arg-type]
    assert _pg_state(pg_url) == []
    MemoryStore(pg_url).close()
    MemoryStore(pg_url, access="read").close()


@pytest.mark.postgres
def test_verify_fails_on_a_postgres_clone_taken_before_the_forget(pg_server: str, pg_new_db: Any,
                                                                  tmp_path: Path) -> None:
    import uuid
    from urllib.parse import urlsplit

    import psycopg

    url = pg_new_db()
    with MemoryStore(url, encrypt=False) as store:  # plaintext: the clone's rows are readable
        make_writer(store, 0).write_sessions(alice_sessions())
    name, parts = f"traceless_t_{uuid.uuid4().hex[:12]}", urlsplit(url)
    with psycopg.connect(pg_server, autocommit=True) as c:  # a clone: same store id, same rows
        c.execute(f"CREATE DATABASE {name} TEMPLATE {parts.path.lstrip('/')}")
    clone = parts._replace(path=f"/{name}").geturl()
    try:
        with MemoryStore(url) as store:
            r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(store, 0))
        assert r.verification.passed
        rpath = tmp_path / "r.json"
        rpath.write_text(r.model_dump_json(), encoding="utf-8")
        assert cli("forget", "verify", str(rpath), "--db", url) == 0
        assert cli("forget", "verify", str(rpath), "--db", clone) == ReceiptError.exit_code
        res, _ = verify_receipt(r, db=clone)
        assert res.same_store and res.material_absent is False and not res.ok
    finally:
        with psycopg.connect(pg_server, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.parametrize("literal", [CANARY, "naïve-Ω-4312"])
def test_keyed_rescan_counts_what_the_plain_scan_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        literal: str) -> None:
    """The keyed re-scan finds every byte form the plaintext scan finds, across chunk
    boundaries too, and nothing else."""
    import random

    from traceless.forget import _material, encodings_of, scan_files

    monkeypatch.setattr(_material, "_CHUNK", 61)  # many boundaries, some inside a copy
    rng = random.Random(7)
    parts = []
    for _ in range(40):
        parts.append(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 90))))
        parts.append(rng.choice(encodings_of(literal)))
    f = tmp_path / "blob.bin"
    f.write_bytes(b"".join(parts))
    pep = os.urandom(32)
    m = _material.Material.of(pep, literal)
    assert _material.scan_files_for(pep, m, [f]) == scan_files([f], literal) == {str(f): 40}
    other = _material.Material.of(pep, literal[:-1] + "#")
    assert _material.scan_files_for(pep, other, [f]) == {str(f): 0}
    sealed = _material.seal_material(pep, m)
    assert literal.encode() not in bytes.fromhex(sealed) and _material.unseal_material(pep, sealed).forms == m.forms
    with pytest.raises(ReceiptError, match="pepper"):
        _material.unseal_material(os.urandom(32), sealed)


@pytest.mark.parametrize("system", ["mem0", "langgraph_checkpoints", "langgraph_store"])
def test_files_the_real_libraries_write_are_recognised(tmp_path: Path, system: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / f"{system}.db"
    if system == "mem0":
        storage = pytest.importorskip("mem0.memory.storage")
        mgr = storage.SQLiteManager(str(db))
        mgr.add_history("m1", None, f"my pin is {SECRET}", "ADD", actor_id="cust-4411")
        mgr.connection.close()
        name = "mem0's history database"
    elif system == "langgraph_checkpoints":
        saver = pytest.importorskip("langgraph.checkpoint.sqlite")
        conn = sqlite3.connect(db, check_same_thread=False)
        saver.SqliteSaver(conn).setup()
        conn.close()
        name = "LangGraph's checkpoint database"
    else:
        lg_store = pytest.importorskip("langgraph.store.sqlite")
        conn = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
        st = lg_store.SqliteStore(conn)
        st.setup()
        st.put(("memories", "cust-4411"), "k1", {"text": SECRET})
        conn.close()
        name = "LangGraph's store database"
    before = _sums(db)
    capsys.readouterr()
    for args in (["memory", "show", "--db", str(db)], ["forget", "--db", str(db), "--mode", "full_purge",
                                                       "--user", "cust-4411", "--receipt", str(tmp_path / "r.json")]):
        assert cli(*args) == NotAStoreError.exit_code
        assert f"this looks like {name}" in capsys.readouterr().err
        assert _sums(db) == before
