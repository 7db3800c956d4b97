"""Issue 39.1 on the SQLite-file systems (agno, openai-agents, adk, langgraph's SqliteStore +
SqliteSaver): SQLite selects the rows of the user and the rows whose bytes hold a literal, and
only those are decoded. The narrowed scan, plan and per-store copy count must be the full read's
(every row decoded, ``row_owner`` and the one match rule deciding): tested on user ids that are
prefixes of one another (``u1``, ``u10``), a literal quoted in another user's row, non-ASCII
literals (stored raw and JSON-escaped by the packages) and one stored only JSON-escaped.

The bystander digests are SQLite's per row: an over-deletion (a bystander's row removed, or one
byte of one changed) planted in the erasure is still caught."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from traceless.memory import Session, Turn
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import (
    SystemRuntime,
    erase_system,
    kernel,
    load_system_config,
    open_system,
    system_class,
)
from traceless.systems._langgraph_live import LiveLangGraph, owned_threads, state_users
from traceless.systems.sqlite import SqliteFile

RT = SystemRuntime(ScriptedBackend(lambda m, c: "noted"), HashingEmbedder(), "scripted")
ASCII, UMLAUT, CJK, PLAIN = "IBAN-DE89-3704", "Zürich-Straße-7", "東京-4471-秘密", "u1-note"
OWN = "u1-only-secret-9931"
USERS = ("u1", "u10", "ü1", "bob")
SQLITE = [("agno", "agno", "agno.db"), ("openai-agents", "agents", "sessions.db"), ("adk", "google.adk", "adk.db")]


def _sessions() -> list[Session]:
    def s(user: str, sid: str, *texts: str) -> Session:
        turns = [t for x in texts for t in (Turn(role="user", content=x), Turn(role="assistant", content="noted"))]
        return Session(user_id=user, session_id=sid, turns=turns)
    return [s("u1", "a", f"my iban is {ASCII}", f"I live in {UMLAUT}", f"remember {OWN}"),
            s("u10", "b", f"u1 told me {ASCII}", "nothing else"),  # another user's row quotes u1's literal
            s("ü1", "c", f"{CJK} is mine", "u1 and u10 are friends"),
            s("bob", "d", f"I once visited {UMLAUT}", PLAIN)]


def _build(name: str, root: Path, cfg: dict[str, Any] | None = None) -> None:
    system = open_system(name, root, load_system_config(name, cfg or {}), RT)
    try:
        system.write(_sessions())
    finally:
        system.close()


def _cases() -> list[tuple[str | None, tuple[str, ...]]]:
    lits: list[tuple[str, ...]] = [(), (ASCII,), (UMLAUT,), (CJK,), (ASCII, UMLAUT, CJK), (PLAIN,), ("noted",)]
    return [(u, ls) for u in (*USERS, None) for ls in lits if u is not None or ls]


def _view(rep: Any) -> Any:
    return rep.stores, sorted(h.model_dump_json() for h in rep.hits)


def _plan_view(p: Any) -> Any:
    return sorted((a.store, a.record_id, a.action, a.reason) for a in p.actions), p.held_by_others


@pytest.mark.parametrize("name, module, db", SQLITE)
def test_the_narrowed_read_finds_what_the_full_read_finds(tmp_path: Path, name: str, module: str, db: str) -> None:
    if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
        pytest.skip(f"needs {module}")
    _build(name, tmp_path / "w")
    system = system_class(name).attach(load_system_config(name, {"db_file": str(tmp_path / "w" / db)}),
                                       read_only=True)
    narrowed = system.instance()
    assert isinstance(narrowed, SqliteFile) and narrowed.owner_sql is not None and narrowed.counts()
    full = SqliteFile(narrowed.path, narrowed.owner_of)  # no owner filter: every row decoded
    for user, lits in _cases():
        assert _view(kernel.scan(name, narrowed, user, lits, reveal=True)) == \
            _view(kernel.scan(name, full, user, lits, reveal=True)), (user, lits)
        assert _plan_view(kernel.plan(name, narrowed, user, lits)) == _plan_view(kernel.plan(name, full, user, lits))
        assert kernel.store_copies(narrowed, lits) == kernel.store_copies(full, lits)
    # the narrowed read reads the user's rows and the literals' rows, not the instance
    assert len(list(narrowed.records("u1", (ASCII,)))) < len(list(full.records(None, ())))


def test_a_literal_stored_only_json_escaped_is_found(tmp_path: Path) -> None:
    """A row whose only copy of a non-ASCII literal is its ``\\uXXXX`` escape (an app's JSON)."""
    db = tmp_path / "x.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (id TEXT PRIMARY KEY, user_id TEXT, data BLOB, n REAL)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [
        ("1", "u10", json.dumps({"text": f"see {UMLAUT}"}).encode(), 1.5),
        ("2", "u1", b"\xff\xfe raw " + UMLAUT.encode("utf-16-le"), 0.1 + 0.2),
        ("3", "bob", json.dumps({"text": f"see {CJK}"}).upper(), None),
        ("4", "bob", b"x", 1e15), ("5", "bob", b"y", 1e-05), ("6", "bob", b"z", -0.0), ("7", "bob", b"w", 2.5)])
    con.commit()
    con.close()
    from traceless.systems.sqlite import user_column

    narrowed = SqliteFile(db, lambda t, r: r.get("user_id") if isinstance(r.get("user_id"), str) else None,
                          user_column("user_id"))
    full = SqliteFile(db, narrowed.owner_of)
    for user, lits in [("u1", (UMLAUT,)), (None, (UMLAUT,)), (None, (CJK,)), ("u10", ("0000000000000004",)),
                       (None, ("1.5",)), ("u1", ("raw",)), (None, ("1000000000000000",)), (None, ("1e-05",)),
                       (None, ("-0.0",)), (None, ("2.5",))]:
        assert _view(kernel.scan("x", narrowed, user, lits, reveal=True)) == \
            _view(kernel.scan("x", full, user, lits, reveal=True)), (user, lits)
    hits = kernel.scan("x", narrowed, None, (UMLAUT,)).hits
    assert {h.record_id for h in hits if h.literal_count} == {"1"}  # the escaped row, by the one match rule


def _owner_oracle(live: LiveLangGraph, user: str | None) -> set[str]:
    """The user's threads as the full read finds them: every checkpoint's state decoded."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    conn = live._conns["checkpoints"]
    if user is None:
        return set()
    serde = JsonPlusSerializer()
    pairs = [(str(t), (serde.loads_typed((typ, b)).get("channel_values") or {}).get(live.users.state_key or ""))
             for t, typ, b in conn.execute("SELECT thread_id, type, checkpoint FROM checkpoints")]
    tids, named = live._named(conn)
    return owned_threads(live.users, user, tids, named, state_users(pairs))


def _lg_oracle(live: LiveLangGraph, user: str | None, lits: Sequence[str]) -> set[tuple[str, str, bool, int]]:
    """(table, key, owned, literal count) of every row the full read reports: each row read."""
    forms = kernel.byte_forms(lits)
    mine = _owner_oracle(live, user)
    prefix = live.users.prefix(user) if user is not None else None
    out = set()
    for db, conn in live._conns.items():
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            cur = conn.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - the test's own tables
            cols = [d[0] for d in cur.description]
            if (db == "checkpoints" and "thread_id" not in cols) or (db == "store" and table not in ("store",
                                                                                                    "store_vectors")):
                continue
            for vals in cur.fetchall():
                row = dict(zip(cols, vals, strict=True))
                if db == "store":
                    owned = prefix is not None and (row["prefix"] == prefix or row["prefix"].startswith(prefix + "."))
                    keycols = ["prefix", "key", *(["field_name"] if table == "store_vectors" else [])]
                else:
                    owned = str(row["thread_id"]) in mine
                    keycols = ["thread_id", *(c for c in cols if c in ("checkpoint_ns", "checkpoint_id", "task_id",
                                                                        "idx", "channel", "version"))]
                n = kernel.count_in_blobs(vals, forms)
                if owned or n:
                    out.add((table, json.dumps([row[k] for k in keycols], ensure_ascii=False), owned, n))
    return out


def test_langgraph_narrowed_scan_is_the_full_read(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    _build("langgraph", tmp_path / "w", {"summarize": False})
    cfg = system_class("langgraph").attach_config(tmp_path / "w", load_system_config("langgraph", {"summarize": False}))
    system = system_class("langgraph").attach(cfg, read_only=True)
    live = system._attached()  # type: ignore[attr-defined]
    try:
        for user, lits in _cases():
            rep = live.scan("langgraph", user, lits, False)
            got = {(h.store, h.record_id, h.owner_match, h.literal_count) for h in rep.hits}
            assert got == _lg_oracle(live, user, lits), (user, lits)
            assert sum(rep.stores.values()) == sum(
                c.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]  # noqa: S608
                for t in rep.stores for c in [live._conns["store" if t.startswith("store") else "checkpoints"]])
        plan = live.plan("langgraph", "u1", [ASCII])
        removed = {json.loads(a.record_id)[0] for a in plan.actions if a.store == "checkpoints"}
        assert removed == {"u1/a"} and plan.held_by_others  # u10's quote is held, not erased
    finally:
        system.close()


def _erase(name: str, tmp_path: Path, db: str, plant: str) -> Any:
    """Erase u1 with an over-deletion planted in the native step: ``delete`` removes a row of
    the prefix user u10, ``flip`` changes one byte of one of u10's rows, ``far`` removes a row
    of bob (outside the digests' containers: the count sees it)."""
    _build(name, tmp_path / "w", {"summarize": False} if name == "langgraph" else None)
    cls = system_class(name)
    cfg = cls.attach_config(tmp_path / "w", load_system_config(name, {"summarize": False})) if name == "langgraph" \
        else load_system_config(name, {"db_file": str(tmp_path / "w" / db)})
    system = cls.attach(cfg, read_only=False)
    path = tmp_path / "w" / db

    def over_delete() -> None:
        con = sqlite3.connect(path)
        table, col = {"agno": ("agno_memories", "user_id"), "openai-agents": ("agent_messages", "session_id"),
                      "adk": ("events", "user_id"), "langgraph": ("writes", "thread_id")}[name]
        who = ("bob/d" if plant == "far" else "u10/b") if name == "langgraph" else ("bob" if plant == "far" else "u10")
        rid = con.execute(f'SELECT max(rowid) FROM "{table}" WHERE "{col}" = ?', (who,)).fetchone()[0]  # noqa: S608
        assert rid is not None
        if plant in ("delete", "far"):
            con.execute(f'DELETE FROM "{table}" WHERE rowid = ?', (rid,))  # noqa: S608
        else:
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
            row = dict(zip(cols, con.execute(f'SELECT * FROM "{table}" WHERE rowid = ?', (rid,)).fetchone(),  # noqa: S608
                           strict=True))
            c, v = max(((k, x) for k, x in row.items() if isinstance(x, str | bytes) and k != col),
                       key=lambda kv: len(kv[1]))
            flip = (v[:-1] + bytes([v[-1] ^ 1])) if isinstance(v, bytes) else v[:-1] + chr(ord(v[-1]) ^ 1)
            con.execute(f'UPDATE "{table}" SET "{c}" = ? WHERE rowid = ?', (flip, rid))  # noqa: S608
        con.commit()
        con.close()

    if plant == "none":
        pass
    elif name == "langgraph":
        live = system._attached()  # type: ignore[attr-defined]
        native = live._native_deletes

        def planted(plan: Any, outcomes: Any) -> None:
            native(plan, outcomes)
            over_delete()
        live._native_deletes = planted
    else:
        native = system.native_erasure

        def planted(plan: Any) -> None:  # type: ignore[misc]
            native(plan)
            system.close()
            over_delete()
        system.native_erasure = planted  # type: ignore[method-assign]
    try:
        # langgraph leaves another user's quote (the erasure refuses the literal): a literal of u1's only
        return erase_system(system, "u1", [OWN if name == "langgraph" else ASCII], state_dir=tmp_path / "state", key=b"k" * 32)
    finally:
        system.close()


@pytest.mark.parametrize("plant", ["none", "delete", "flip", "far"])
@pytest.mark.parametrize("name, module, db", [*SQLITE, ("langgraph", "langgraph", "checkpoints.db")])
def test_a_planted_over_deletion_is_caught(tmp_path: Path, name: str, module: str, db: str, plant: str) -> None:
    if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
        pytest.skip(f"needs {module}")
    receipt = _erase(name, tmp_path, db, plant)
    assert receipt.verification.checks["bystanders_intact"] is (plant == "none"), receipt.notes
    if plant == "none":
        assert receipt.verification.passed, receipt.verification.checks


@pytest.mark.parametrize("wal", [False, True])
def test_the_kept_read_is_not_used_after_a_write(tmp_path: Path, wal: bool) -> None:
    """The narrowed read is kept while the file is unchanged (plan, scope check, digests read it
    once); a commit by another connection since (rollback journal or WAL, the writer still
    open) is read."""
    from traceless.systems.sqlite import user_column

    db = tmp_path / "x.db"
    con = sqlite3.connect(db)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE t (id TEXT PRIMARY KEY, user_id TEXT, data TEXT)")
    con.execute("INSERT INTO t VALUES ('1', 'u1', 'first')")
    con.commit()
    inst = SqliteFile(db, lambda t, r: r.get("user_id"), user_column("user_id"))
    assert [r.id for r in inst.records("u1", ())] == ["1"]
    con.execute("UPDATE t SET data = 'secret-42' WHERE id = '1'")  # same row count, same size class
    con.commit()
    assert [r.fields["data"] for r in inst.records("u1", ())] == ["secret-42"]
    con.execute("INSERT INTO t VALUES ('2', 'u1', 'second')")
    con.commit()
    assert sorted(r.id for r in inst.records("u1", ())) == ["1", "2"]
    con.close()


@pytest.mark.parametrize("name, module, db", [*SQLITE, ("langgraph", "langgraph", "checkpoints.db")])
def test_the_digests_read_only_the_touched_containers(tmp_path: Path, name: str, module: str, db: str) -> None:
    """Issue 39: the bystander digest hashes the rows sharing a container with the erasure (u1's
    and the prefix user u10's), and counts the others (bob's, ü1's) in one ``#rest:`` entry."""
    if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
        pytest.skip(f"needs {module}")
    _build(name, tmp_path / "w", {"summarize": False} if name == "langgraph" else None)
    cls = system_class(name)
    cfg = cls.attach_config(tmp_path / "w", load_system_config(name, {"summarize": False})) if name == "langgraph" \
        else load_system_config(name, {"db_file": str(tmp_path / "w" / db)})
    system = cls.attach(cfg, read_only=True)
    try:
        system.plan_erasure("u1", [OWN])
        digests = system.bystander_digests("u1")
    finally:
        system.close()
    con = sqlite3.connect(tmp_path / "w" / db)
    table = {"agno": "agno_sessions", "openai-agents": "agent_messages", "adk": "events", "langgraph": "writes"}[name]
    col = {"agno": "user_id", "openai-agents": "session_id", "adk": "user_id", "langgraph": "thread_id"}[name]
    others = con.execute(f'SELECT count(*) FROM "{table}" WHERE substr("{col}", 1, 2) <> \'u1\'').fetchone()[0]  # noqa: S608
    u10 = con.execute(f'SELECT count(*) FROM "{table}" WHERE substr("{col}", 1, 3) = \'u10\'').fetchone()[0]  # noqa: S608
    con.close()
    rest = [e for e in digests[table] if e.startswith("#rest:")]
    assert others > 0 and u10 > 0 and rest and rest[0].endswith(f":{others}"), (digests[table], others)
    assert len([e for e in digests[table] if not e.startswith("#")]) == u10
