"""``traceless scan`` / ``forget --memory langgraph`` on LangGraph's ``PostgresSaver`` +
``PostgresStore`` (``langgraph-checkpoint-postgres``) on the Debian PostgreSQL 15 test server
(issue #35): the app's own graph (a ``StateGraph`` whose node keeps each user turn in the store
and appends a reply; no LLM) run by three users, one id a prefix of the target's (``ann`` /
``ann2`` / ``bob``); the target's secret in its thread state and store item, one thread of the
target freely named (the user is in its state only). The app connects with a password over
loopback TCP, as a role that owns its tables; its ``setup()`` made them (traceless never does).

* ``scan`` changes nothing: row digests of every table, ``pg_stat_user_tables`` write counters,
  and the server's statement log (``log_statement = 'all'`` for the database) shows only reads;
* ``forget`` with ``pg_compaction: full``: LangGraph's own API (``saver.list``, ``store.search``)
  shows the target's threads and items gone and the bystanders' unchanged; 0 copies of the secret
  in the relation files after ``CHECKPOINT``; the receipt verifies with the public key alone,
  names WAL and backups, and holds no password;
* ``forget`` with the default ``VACUUM``: what the relation files keep is measured and the
  receipt's claim says it (``files_clean`` false and ``logical`` when a copy remains);
* bad input: unreachable server, wrong password, tables missing, a role without ``DELETE``:
  one line, nothing created or changed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import operator
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from _cli import cli  # noqa: E402

if importlib.util.find_spec("langgraph.checkpoint.postgres") is None and os.environ.get("TRACELESS_REQUIRE_PG"):
    pytest.fail("TRACELESS_REQUIRE_PG is set but langgraph-checkpoint-postgres is not installed: "
                "pip install 'traceless[langgraph]'", pytrace=False)
pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("_home"),
              pytest.mark.skipif(importlib.util.find_spec("langgraph.checkpoint.postgres") is None,
                                 reason="needs traceless[langgraph] (langgraph-checkpoint-postgres)")]

USERS = ("ann", "ann2", "bob")
X = "ann"
APP_ROLE, RO_ROLE = "traceless_lg_app", "traceless_lg_ro"
PW, RO_PW = "Lg-app-pw-7Q2x9", "Lg-ro-pw-3K8m1"
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "store")


def secret(user: str) -> str:
    return f"ZX-{user}-4471-PLUMCODE"


def threads(user: str) -> list[str]:
    return [f"{user}/s1", f"{user}/s2", f"desk-{user}-free"]  # the last: named freely, its state says the user


# ---------------------------------------------------------------- the app


class State(TypedDict, total=False):
    messages: Annotated[list[dict[str, str]], operator.add]
    user_id: str


def build_graph(saver: Any, store: Any) -> Any:
    """The app's graph: the user's turn kept in the store under (user, "memories"), a reply appended."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    def remember(state: State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        turn = state["messages"][-1]["content"]
        runtime.store.put((state["user_id"], "memories"), f"m{len(state['messages']):03d}", {"text": turn})
        return {"messages": [{"role": "assistant", "content": "Noted."}]}

    g = StateGraph(State)
    g.add_node("remember", remember)
    g.add_edge(START, "remember")
    g.add_edge("remember", END)
    return g.compile(checkpointer=saver, store=store)


def fake_embed(texts: list[str]) -> list[list[float]]:
    """The app's embedder for the pgvector test (deterministic; no model)."""
    return [[b / 255 for b in hashlib.sha256(t.encode()).digest()[:8]] for t in texts]


def run_app(url: str, order: tuple[str, ...] = USERS, index: dict[str, Any] | None = None) -> None:
    """Three users (in ``order``), three threads each; the secret in the first thread and the free one."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    with PostgresSaver.from_conn_string(url) as saver, PostgresStore.from_conn_string(
            url, index=index) as store:  # type: ignore[arg-type]  # a TypedDict
        saver.setup()  # the app's own setup: traceless never calls it
        store.setup()
        graph = build_graph(saver, store)
        for u in order:
            for tid in threads(u):
                says = (f"My account code is {secret(u)}." if not tid.endswith("/s2") else f"I live in {u}ville.")
                cfg: Any = {"configurable": {"thread_id": tid}}
                graph.invoke({"messages": [{"role": "user", "content": says}], "user_id": u}, cfg)
                graph.invoke({"messages": [{"role": "user", "content": "Thanks!"}], "user_id": u}, cfg)


def api_view(url: str, user: str) -> tuple[list[Any], list[Any]]:
    """What LangGraph's own API shows of a user: every checkpoint of each thread, the store items."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    with PostgresSaver.from_conn_string(url) as saver, PostgresStore.from_conn_string(url) as store:
        cps = [(tid, c.checkpoint["id"], json.dumps(c.checkpoint["channel_values"], sort_keys=True, default=str))
               for tid in threads(user) for c in saver.list({"configurable": {"thread_id": tid}})]
        items = [(i.key, i.value) for i in store.search((user, "memories"), limit=1000)]
    return sorted(cps), sorted(items, key=lambda kv: kv[0])


# ---------------------------------------------------------------- the server


@pytest.fixture(scope="module")
def roles(pg_server: str) -> Iterator[str]:
    """The app's role (owns its database; may CHECKPOINT and read the data directory's name)
    and a read-only role; host:port of the server's loopback TCP listener."""
    import psycopg

    hostport = os.environ.get("TRACELESS_TEST_PG_TCP")
    if not hostport:
        pytest.skip("TRACELESS_TEST_PG_TCP unset (.ci/start-postgres sets it)")
    with psycopg.connect(pg_server, autocommit=True) as c:
        for role, pw in ((APP_ROLE, PW), (RO_ROLE, RO_PW)):
            c.execute(f"DROP ROLE IF EXISTS {role}")
            c.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{pw}'")
        c.execute(f"GRANT pg_checkpoint, pg_read_all_settings TO {APP_ROLE}")
    yield hostport
    with psycopg.connect(pg_server, autocommit=True) as c:
        for role in (APP_ROLE, RO_ROLE):
            c.execute(f"DROP ROLE IF EXISTS {role}")


def _su(pg_server: str, db: str) -> Any:
    import psycopg

    from conftest import pg_database_url

    return psycopg.connect(pg_database_url(pg_server, db), autocommit=True)


def _dbname(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).path.lstrip("/")


@pytest.fixture
def app_db(pg_server: str, pg_new_db: Callable[[], str], roles: str, request: pytest.FixtureRequest) -> tuple[str, str]:
    """A fresh database owned by the app's role, the app run on it (the users in the order the
    test's ``app_db`` parameter gives: ``first`` or ``last`` for the target): (database, URL)."""
    db = _dbname(pg_new_db())
    with _su(pg_server, "postgres") as c:
        c.execute(f"ALTER DATABASE {db} OWNER TO {APP_ROLE}")
    url = f"postgresql://{APP_ROLE}:{PW}@{roles}/{db}"
    last = getattr(request, "param", "first") == "last"
    run_app(url, (*USERS[1:], X) if last else USERS)
    return db, url


def write_cfg(tmp_path: Path, url: str, **traceless: Any) -> Path:
    cfg: dict[str, Any] = {"checkpointer": {"kind": "postgres", "url": url}, "store": {"kind": "postgres", "url": url}}
    if traceless:
        cfg["traceless"] = traceless
    p = tmp_path / "lg-pg.json"
    p.write_text(json.dumps(cfg), encoding="utf-8")
    return p


def row_digests(pg_server: str, db: str) -> dict[str, str]:
    with _su(pg_server, db) as c:
        return {t: hashlib.sha256(json.dumps(c.execute(f"SELECT t::text FROM {t} t ORDER BY 1").fetchall())
                                  .encode()).hexdigest() for t in TABLES}


def counters(pg_server: str, db: str) -> list[tuple[Any, ...]]:
    """``pg_stat_user_tables``' write counters, once they stopped moving (the app's backends
    flush their counts as they exit)."""
    def read() -> list[tuple[Any, ...]]:
        with _su(pg_server, db) as c:
            return list(c.execute("SELECT relname, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd FROM "
                                  "pg_stat_user_tables ORDER BY relname").fetchall())
    last, deadline = read(), time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = read()
        if now == last:
            return now
        last = now
    return last


def catalog(pg_server: str, db: str) -> list[tuple[Any, ...]]:
    with _su(pg_server, db) as c:
        return list(c.execute("SELECT relname, relkind FROM pg_class WHERE relnamespace = 'public'::regnamespace "
                              "UNION ALL SELECT extname, 'x' FROM pg_extension ORDER BY 1").fetchall())


def relation_copies(pg_server: str, db: str, needle: str, *, data: Path | None = None, dsn: str | None = None,
                    tables: tuple[str, ...] = TABLES) -> dict[str, int]:
    """After a CHECKPOINT: occurrences of ``needle`` per relation file of the tables (heap,
    TOAST, every index), read under the data directory (readable as root)."""
    import psycopg

    data = data or Path(os.environ["TRACELESS_TEST_PG_DATA"])
    with (psycopg.connect(dsn, autocommit=True) if dsn else _su(pg_server, db)) as c:
        c.execute("CHECKPOINT")
        rels = c.execute(
            "SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_class c WHERE c.oid = ANY(%(t)s::regclass[]) "
            "OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE oid = ANY(%(t)s::regclass[])) "
            "OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = ANY(%(t)s::regclass[]))",
            {"t": list(tables)}).fetchall()
    out = {}
    for name, fp in rels:
        main = data / fp
        files = [main, *sorted(main.parent.glob(main.name + ".[0-9]*"))]
        out[str(name)] = sum(p.read_bytes().count(needle.encode()) for p in files if p.is_file())
    return out


def wal_segments(needle: str) -> tuple[int, int]:
    segs = sorted(p for p in (Path(os.environ["TRACELESS_TEST_PG_DATA"]) / "pg_wal").glob("0*") if len(p.name) == 24)
    return sum(1 for p in segs if needle.encode() in p.read_bytes()), len(segs)


# ---------------------------------------------------------------- the tests


def test_scan_changes_nothing_and_the_log_shows_only_reads(
        pg_server: str, app_db: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, url = app_db
    cfg = write_cfg(tmp_path, url)
    log = Path(os.environ["TRACELESS_TEST_PG_DATA"]).parent / "server.log"
    before = (row_digests(pg_server, db), counters(pg_server, db), catalog(pg_server, db))
    with _su(pg_server, "postgres") as c:
        c.execute(f"ALTER DATABASE {db} SET log_statement = 'all'")
    start = log.stat().st_size
    t0 = time.monotonic()
    rc = cli("scan", "--memory", "langgraph", "--memory-config", str(cfg), "--user", X, "--literal", secret(X), "--json")
    took = time.monotonic() - t0
    out = capsys.readouterr()
    with open(log, "rb") as f:
        f.seek(start)
        logged = [ln.split("statement: ", 1)[1].strip() for ln in f.read().decode("utf-8", "replace").splitlines()
                  if "statement: " in ln and f"db={db} " in ln]  # the log is the cluster's: other tests' too
    with _su(pg_server, "postgres") as c:
        c.execute(f"ALTER DATABASE {db} RESET log_statement")
    assert rc == 0, out.err
    assert logged and all(s.split()[0].upper() in ("BEGIN", "SELECT", "SHOW", "ROLLBACK") for s in logged), logged
    assert any(s.upper().startswith("BEGIN READ ONLY") for s in logged)
    assert (row_digests(pg_server, db), counters(pg_server, db), catalog(pg_server, db)) == before
    report = json.loads(out.out)
    mine = [h for h in report["hits"] if h["owner_match"]]
    assert {h["store"] for h in mine} == set(TABLES)
    assert {json.loads(h["record_id"])[0] for h in mine if h["store"] != "store"} == set(threads(X))
    assert all(json.loads(h["record_id"])[0] == f"{X}.memories" for h in mine if h["store"] == "store")
    assert not any(h["literal_count"] for h in report["hits"] if not h["owner_match"])
    assert report["files_scanned"] >= len(TABLES)  # the relation files were read (a scan does not CHECKPOINT:
    # what is still only in shared buffers is not in them yet)
    assert PW not in out.out + out.err
    print(f"\nscan: {sum(report['stores'].values())} rows {report['stores']}, {len(mine)} of {X}'s, "
          f"{len(logged)} statements logged, {took:.2f} s")


@pytest.mark.parametrize("compaction, app_db", [("full", "first"), ("full", "last"), ("vacuum", "first"),
                                                 ("vacuum", "last")], indirect=["app_db"])
def test_forget_removes_the_users_threads_and_items(
        pg_server: str, app_db: tuple[str, str], tmp_path: Path, compaction: str, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    db, url = app_db
    cfg = write_cfg(tmp_path, url, **({"pg_compaction": "full"} if compaction == "full" else {}))
    views = {u: api_view(url, u) for u in USERS}
    assert all(views[u][0] and views[u][1] for u in USERS)
    assert sum(relation_copies(pg_server, db, secret(X)).values()) > 0
    receipt = tmp_path / "receipt.json"
    t0 = time.monotonic()
    rc = cli("forget", "--memory", "langgraph", "--memory-config", str(cfg), "--user", X, "--literal", secret(X),
             "--receipt", str(receipt))
    took = time.monotonic() - t0
    out = capsys.readouterr()
    assert api_view(url, X) == ([], [])  # LangGraph's own API: the target's threads and items gone
    assert {u: api_view(url, u) for u in USERS[1:]} == {u: views[u] for u in USERS[1:]}  # bystanders unchanged
    copies = relation_copies(pg_server, db, secret(X))
    wal, segs = wal_segments(secret(X))
    text = receipt.read_text()
    r = json.loads(text)
    notes = " ".join(r["notes"])
    assert PW not in text + out.out + out.err and secret(X) not in text
    assert r["verification"]["checks"]["bystanders_intact"]
    assert all(r["verification"]["checks"][f"store_clean:{t}"] for t in TABLES)
    assert "pg_wal: " in notes and "base backups" in notes and "WAL archives" in notes and "replicas" in notes
    left = sum(copies.values())
    assert r["verification"]["checks"]["files_clean"] == (left == 0)  # the claim is what the files hold
    assert rc == (0 if left == 0 else 11), out.err
    if left:
        assert any(g.endswith("=logical") for g in r["guarantee"]), r["guarantee"]
    if compaction == "full":
        assert left == 0, copies
        assert all(g.endswith("=clear") for g in r["guarantee"]), r["guarantee"]
    pub = tmp_path / "signer.pub"
    assert cli("keys", "export", "--out", str(pub)) == 0
    monkeypatch.setenv("TRACELESS_HOME", str(tmp_path / "verifier-home"))
    rc = cli("forget", "verify", str(receipt), "--public-key", str(pub))  # the signature holds; passed says the claim
    assert "signature OK" in capsys.readouterr().out and rc == (0 if left == 0 else 11)
    print(f"\nforget ({compaction}, target written {request.node.callspec.params['app_db']}): removed {sum(len(t['removed']) for t in r['tiers'].values())} rows "
          f"{ {k: len(t['removed']) for k, t in r['tiers'].items()} }, copies left {left} { {k: n for k, n in copies.items() if n} }, "
          f"pg_wal {wal}/{segs} segments hold the secret, {took:.2f} s; guarantee {r['guarantee']}")


def test_bad_server_input_is_one_line_and_changes_nothing(
        pg_server: str, pg_new_db: Callable[[], str], app_db: tuple[str, str], roles: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    db, url = app_db
    before = row_digests(pg_server, db), catalog(pg_server, db)
    host, port = roles.split(":")
    cases = {
        "password authentication failed": f"postgresql://{APP_ROLE}:wrong-pw-xyz@{roles}/{db}",
        "Connection refused": f"postgresql://{APP_ROLE}:wrong-pw-xyz@{host}:1/{db}",
    }
    for why, bad in cases.items():
        cfg = write_cfg(tmp_path, bad)
        for cmd in ("scan", "forget"):
            assert cli(cmd, "--memory", "langgraph", "--memory-config", str(cfg), "--user", X) == 2
            err = capsys.readouterr().err.strip()
            assert why in err and host in err and "wrong-pw" not in err and len(err.splitlines()) == 1, err
    # a role that may read but not DELETE: refused before any change
    with _su(pg_server, db) as c:
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {RO_ROLE}")
    cfg = write_cfg(tmp_path, f"postgresql://{RO_ROLE}:{RO_PW}@{roles}/{db}")
    assert cli("forget", "--memory", "langgraph", "--memory-config", str(cfg), "--user", X) == 2
    err = capsys.readouterr().err.strip()
    assert "may not DELETE" in err and RO_PW not in err, err
    assert (row_digests(pg_server, db), catalog(pg_server, db)) == before
    # a database without the saver's tables: refused, nothing created (no setup(), no DDL)
    empty = _dbname(pg_new_db())
    with _su(pg_server, "postgres") as c:
        c.execute(f"ALTER DATABASE {empty} OWNER TO {APP_ROLE}")
    was = catalog(pg_server, empty)
    cfg = write_cfg(tmp_path, f"postgresql://{APP_ROLE}:{PW}@{roles}/{empty}")
    for cmd in ("scan", "forget"):
        assert cli(cmd, "--memory", "langgraph", "--memory-config", str(cfg), "--user", X) == 2
        err = capsys.readouterr().err.strip()
        assert "no table 'checkpoints'" in err and "setup()" in err and PW not in err, err
    assert catalog(pg_server, empty) == was


def test_forget_removes_the_items_vectors_on_pgvector(
        pgvector_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The store with a pgvector index (``PostgresStore(index=...)``, PostgreSQL 18 + pgvector):
    the user's items go with their ``store_vectors`` rows; the others' vectors stay."""
    import psycopg
    from langgraph.store.postgres import PostgresStore

    srv = pgvector_server
    with psycopg.connect(srv.superuser_dsn(), autocommit=True) as c:
        c.execute("CREATE DATABASE lg_vec")
    url = srv.url("lg_vec")
    index = {"dims": 8, "embed": fake_embed, "fields": ["text"]}
    run_app(url, index=index)
    su = srv.superuser_dsn("lg_vec")

    def vectors() -> dict[str, int]:
        with psycopg.connect(su) as c:
            return dict(c.execute("SELECT split_part(prefix, '.', 1), count(*) FROM store_vectors GROUP BY 1").fetchall())
    before = vectors()
    assert before == {u: 2 for u in USERS}
    with PostgresStore.from_conn_string(url, index=index) as store:  # type: ignore[arg-type]
        hits_before = [(i.key, i.value) for i in store.search(("bob", "memories"), query="account code")]
    cfg = tmp_path / "lg-vec.json"
    cfg.write_text(json.dumps({"checkpointer": {"kind": "postgres", "url": url},
                               "store": {"kind": "postgres", "url": url, "index": {"dims": 8}},
                               "traceless": {"pg_compaction": "full"}}), encoding="utf-8")
    receipt = tmp_path / "receipt.json"
    assert cli("forget", "--memory", "langgraph", "--memory-config", str(cfg), "--user", X, "--literal", secret(X),
               "--receipt", str(receipt)) == 0, capsys.readouterr().err
    r = json.loads(receipt.read_text())
    assert vectors() == {u: 2 for u in USERS[1:]}  # ann's two vector rows gone, the others' kept
    assert len(r["tiers"]["store_vectors"]["removed"]) == 2 and r["verification"]["checks"]["bystanders_intact"]
    with PostgresStore.from_conn_string(url, index=index) as store:  # type: ignore[arg-type]
        assert [(i.key, i.value) for i in store.search(("bob", "memories"), query="account code")] == hits_before
        assert store.search((X, "memories"), query="account code") == []
    copies = relation_copies("", "lg_vec", secret(X), data=srv.data, dsn=su, tables=(*TABLES, "store_vectors"))
    assert sum(copies.values()) == 0, copies


def test_forget_by_user_alone_finds_the_thread_its_state_names(
        pg_server: str, app_db: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No literal: the erasure finds ann's rows by attribution only, the freely named thread by
    the ``user_id`` in its state (inline in the checkpoint's jsonb); ann2's and bob's stay."""
    db, url = app_db
    views = {u: api_view(url, u) for u in USERS[1:]}
    receipt = tmp_path / "receipt.json"
    assert cli("forget", "--memory", "langgraph", "--memory-config", str(write_cfg(tmp_path, url)), "--user", X,
               "--receipt", str(receipt)) == 0, capsys.readouterr().err
    assert api_view(url, X) == ([], [])
    assert {u: api_view(url, u) for u in USERS[1:]} == views
    r = json.loads(receipt.read_text())
    assert r["verification"]["passed"] and len(r["tiers"]["checkpoints"]["removed"]) == 18


def test_a_thread_two_users_wrote_in_is_refused_before_any_change(
        pg_server: str, app_db: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40.1 on the server: bob wrote a turn in ann's thread (the checkpoints' metadata
    names both, ``users.configurable``): the erasure is refused before any change, naming it."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    db, url = app_db
    tid, bob = threads(X)[0], USERS[-1]
    with PostgresSaver.from_conn_string(url) as saver, PostgresStore.from_conn_string(url) as store:
        graph = build_graph(saver, store)
        for who in (X, bob):
            graph.invoke({"messages": [{"role": "user", "content": f"{who} was here"}], "user_id": who},
                         {"configurable": {"thread_id": tid, "user_id": who}})
    cfg = json.loads(write_cfg(tmp_path, url).read_text())
    cfg["users"] = {"configurable": {"user_id": "{user_id}"}}
    (tmp_path / "lg-pg.json").write_text(json.dumps(cfg))
    before = row_digests(pg_server, db)
    rc = cli("forget", "--memory", "langgraph", "--memory-config", str(tmp_path / "lg-pg.json"), "--user", X,
             "--receipt", str(tmp_path / "r.json"))
    err = capsys.readouterr().err
    assert rc == 6 and "1 thread(s) of the user were also written by other users" in err and tid in err, err
    assert row_digests(pg_server, db) == before and not (tmp_path / "r.json").exists()


def _odd_rows(pg_server: str, db: str, odd: list[str]) -> None:
    """Rows written to trip the server's selection: a quote, a backslash, non-ASCII, a tab, the
    literal inside a blob between invalid UTF-8 bytes, a literal spanning two columns, in a
    thread and an item of nobody, another user's, one below the target's namespace."""
    from psycopg.types.json import Jsonb

    with _su(pg_server, db) as c:
        for prefix, key, value in [("carl.memories", "c1", {"text": f"carl quotes {odd[0]}"}),
                                   ("shared", "s1", {"text": "nobody's", "tags": [odd[2]]}),
                                   (f"{X}.memories.sub", "deep", {"text": f"{X}'s below {odd[1]}"}),
                                   (f"{X}2_memories", "trap", {"text": "LIKE's _ is not a wildcard here"})]:
            c.execute("INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s)", (prefix, key, Jsonb(value)))
        blob = b"\x92\xff\xc3" + f"in a blob {odd[0]} and {odd[2]}".encode() + b"\xe2\x80"
        for tid in ("free-zed", "bob/s1"):
            c.execute("INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
                      "VALUES (%s, '', 'notes', '9', 'msgpack', %s)", (tid, blob))
        c.execute("INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, metadata) "
                  "VALUES ('free-zed', '', 'z1', 'msgpack', %s, %s)",
                  (Jsonb({"v": 4, "channel_values": {"note": "zed"}}), Jsonb({"source": odd[1]})))
        tab_at = odd[1].index("\t")
        c.execute("INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, "
                  "blob) VALUES ('free-zed', '', 'z1', 't', 0, 'x', %s, %s)",
                  (f"y {odd[1][:tab_at]}", f"{odd[1][tab_at + 1:]} z".encode()))  # spans a text and a bytea column


def test_the_servers_selection_finds_what_reading_every_row_finds(
        pg_server: str, app_db: tuple[str, str], tmp_path: Path) -> None:
    """The scan, the plan, the audit's copy count and the bystanders read only the rows the
    server selects (issue #35 item 6: the user's threads by the owner map and ``thread_id``, the
    items by namespace, rows that may hold a literal by ``strpos``/``position``); on rows written
    to trip that selection they find exactly what reading every row finds."""
    import copy

    from traceless.systems import kernel, load_system_config, system_class

    db, url = app_db
    odd = ['say "Ñandú" \\ twice 42', "ü-tab\tcode 9911", "nested-LIT-7781"]
    _odd_rows(pg_server, db, odd)
    inst = system_class("langgraph").attach(load_system_config("langgraph", write_cfg(tmp_path, url)),
                                            read_only=True)._pg  # type: ignore[attr-defined]
    full = copy.copy(inst)
    full.records, full.counts = full.every_record, lambda: None
    with _su(pg_server, db) as c:  # a literal only a timestamp column holds (its minute, as the server prints it)
        stamp = str(c.execute("SELECT created_at::text FROM store ORDER BY created_at LIMIT 1").fetchone()[0])[:16]
    seen = 0
    for user, lits in [(X, []), (X, odd), (None, odd), ("bob", [odd[0]]), ("carl", [odd[0]]), ("nobody", odd),
                       (X, [secret("bob")]), (X, [odd[1]]), (None, [secret(X)]), (None, [stamp]), (X, [stamp])]:
        inst.requester = full.requester = user
        got, want = kernel.scan("langgraph", inst, user, lits), kernel.scan("langgraph", full, user, lits)
        assert _lg_hits(got) == _lg_hits(want) and got.stores == want.stores, (user, lits)
        p, q = kernel.plan("langgraph", inst, user, lits), kernel.plan("langgraph", full, user, lits)
        assert (p.actions, p.held_by_others) == (q.actions, q.held_by_others), (user, lits)
        assert kernel.store_copies(inst, lits) == kernel.store_copies(full, lits), (user, lits)
        for removed in ({(a.store, a.record_id) for a in p.actions}, set()):
            want = _key_tally(inst, kernel.bystander_rows(full, user, lits, removed))
            assert inst._tally(user, removed)[0] == want, (user, lits)
        seen += sum(1 for h in got.hits if h.literal_count and not h.owner_match)
    assert seen  # the tricky rows were found (by both)
    assert kernel.scan("langgraph", inst, None, [stamp]).hits  # the timestamp's rows found (by both)
    assert any(h.store == "checkpoint_blobs" and h.literal_count for h in kernel.scan("langgraph", inst, None, odd).hits)


def _key_tally(inst: Any, rows: Any) -> dict[str, tuple[int, int]]:
    """Per table, the rows' count and their keys' hash sum (the server's ``hashtextextended``):
    the tally of the bystanders the kernel finds by reading every row."""
    from traceless.systems.postgres import KEY_SEP, key_hash

    keys: dict[str, list[str]] = {}
    for (t, rid), _ in rows:
        keys.setdefault(t, []).append(KEY_SEP.join(json.loads(rid)))
    with inst.servers[0].connect(read_only=True) as con:
        hashes = key_hash(con, [k for ks in keys.values() for k in ks])
        con.rollback()
    return {t: (len(keys.get(t, [])), sum(hashes[k] for k in keys.get(t, []))) for t in inst.stores()}


def _lg_hits(rep: Any) -> list[tuple[Any, ...]]:
    return sorted((h.store, h.record_id, h.field, h.owner_match, h.literal_count, h.owner) for h in rep.hits)


# ---------------------------------------------------------------- on PostgreSQL 18: replicas, online

_LG_N = iter(range(10_000))


def _pgv_app_db(srv: Any) -> tuple[str, str]:
    """A fresh database on the PostgreSQL 18 server with the app run on it: (database, URL)."""
    import psycopg

    db = f"lg_on{next(_LG_N)}"
    with psycopg.connect(srv.superuser_dsn(), autocommit=True) as c:
        c.execute(f"CREATE DATABASE {db}")
    url = srv.url(db)
    run_app(url)
    return db, url


def _pgv_rows(srv: Any, db: str) -> dict[str, str]:
    import psycopg

    with psycopg.connect(srv.superuser_dsn(db)) as c:
        return {t: hashlib.sha256(json.dumps(c.execute(f"SELECT t::text FROM {t} t ORDER BY 1").fetchall())
                                  .encode()).hexdigest() for t in TABLES}


def replica_copies(srv: Any, rep: Any, db: str, needle: str) -> dict[str, int]:
    """``relation_copies`` on the replica: the primary checkpointed, the replica waited for until it
    replayed past that, then a restartpoint there and its relation files read."""
    import psycopg

    with psycopg.connect(srv.superuser_dsn(db), autocommit=True) as c:
        c.execute("CHECKPOINT")
        lsn = c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    deadline = time.monotonic() + 30
    while True:
        with suppress_operational(), psycopg.connect(rep.superuser_dsn(db), autocommit=True) as c:
            if c.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
                break
        assert time.monotonic() < deadline, "the replica did not replay within 30 s"
        time.sleep(0.05)
    return relation_copies("", db, needle, data=rep.data, dsn=rep.superuser_dsn(db))


def suppress_operational() -> Any:
    import contextlib

    import psycopg

    return contextlib.suppress(psycopg.OperationalError)  # the database itself not replayed yet


def test_replica_holds_no_copy_after_replay_and_the_receipt_names_it(
        pgvector_server: Any, pgvector_replica: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``traceless: {pg_replicas: [...]}`` for LangGraph on Postgres: the primary named as a replica
    is refused before any change; the streaming replica's relation files hold the target's secret
    before and 0 copies after the erasure replayed (``VACUUM FULL``); the receipt names it verified."""
    srv, rep = pgvector_server, pgvector_replica
    db, url = _pgv_app_db(srv)
    was = _pgv_rows(srv, db)
    cfg = write_cfg(tmp_path, url, pg_compaction="full", pg_replicas=[url])  # the primary: not a standby
    refused = tmp_path / "refused.json"
    assert cli("forget", "--memory", "langgraph", "--memory-config", str(cfg), "--user", X, "--literal", secret(X),
               "--receipt", str(refused)) == 2
    err = capsys.readouterr().err.strip()
    assert not refused.exists() and "is not a standby" in err and "nothing was changed" in err and len(err.splitlines()) == 1, err
    assert _password(url) not in err and _pgv_rows(srv, db) == was
    two = json.loads(cfg.read_text())  # the store through another connection string: whose replica is it?
    two["store"]["url"] = url + "?application_name=store"
    cfg.write_text(json.dumps(two))
    assert cli("forget", "--memory", "langgraph", "--memory-config", str(cfg), "--user", X, "--receipt",
               str(refused)) == 2
    err = capsys.readouterr().err.strip()
    assert not refused.exists() and "on two servers" in err and len(err.splitlines()) == 1 and _pgv_rows(srv, db) == was, err
    before = replica_copies(srv, rep, db, secret(X))
    assert sum(before.values()) > 0, before
    cfg = write_cfg(tmp_path, url, pg_compaction="full", pg_replicas=[f"postgresql://postgres:{_password(url)}"
                                                                      f"@127.0.0.1:{rep.port}"])  # no db: the primary's
    receipt = tmp_path / "receipt.json"
    t0 = time.monotonic()
    rc = cli("forget", "--memory", "langgraph", "--memory-config", str(cfg), "--user", X, "--literal", secret(X),
             "--receipt", str(receipt))
    took = time.monotonic() - t0
    out = capsys.readouterr()
    assert rc == 0, out.err
    after = replica_copies(srv, rep, db, secret(X))
    text = receipt.read_text()
    r = json.loads(text)
    notes = [n for n in r["notes"] if n.startswith(f"checkpoints: PostgreSQL replica at 127.0.0.1:{rep.port}")]
    print(f"\n[lg replica] copies of {X}'s secret in the replica's relation files: {sum(before.values())} before "
          f"{ {k: n for k, n in before.items() if n} }, {sum(after.values())} after (VACUUM FULL replayed); "
          f"forget {took:.2f} s; {notes}")
    assert sum(after.values()) == 0, after
    assert len(notes) == 1 and "verified after replaying the WAL past the erasure" in notes[0], r["notes"]
    assert "0 copies of the erased records' texts" in notes[0], notes
    assert r["verification"]["passed"] and r["verification"]["checks"]["files_clean"]
    assert all(g.endswith("=clear") for g in r["guarantee"]), r["guarantee"]
    assert ("out of scope: streaming and logical replicas other than the 1 named in traceless.pg_replicas"
            in r["notes"])
    assert _password(url) not in text + out.out + out.err and secret(X) not in text


def _password(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).password or ""


def test_a_replica_that_has_not_replayed_is_not_verified_and_its_copy_fails_the_byte_check(
        pgvector_server: Any, pgvector_replica: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Replay paused on the replica: the erasure waits (3 s here) and names it NOT verified; the
    kernel's byte scan reads the replica's relation files, still holding the secret: ``files_clean``
    fails (exit 11), not a silent pass."""
    import psycopg

    from traceless.systems import _pg_server

    srv, rep = pgvector_server, pgvector_replica
    db, url = _pgv_app_db(srv)
    assert sum(replica_copies(srv, rep, db, secret(X)).values()) > 0
    monkeypatch.setattr(_pg_server, "REPLAY_TIMEOUT_S", 3.0)
    cfg = write_cfg(tmp_path, url, pg_compaction="full", pg_replicas=[rep.url(db)])
    receipt = tmp_path / "receipt.json"
    with psycopg.connect(rep.superuser_dsn(db), autocommit=True) as c:
        c.execute("SELECT pg_wal_replay_pause()")
    try:
        rc = cli("forget", "--memory", "langgraph", "--memory-config", str(cfg), "--user", X, "--literal",
                 secret(X), "--receipt", str(receipt))
    finally:
        with psycopg.connect(rep.superuser_dsn(db), autocommit=True) as c:
            c.execute("SELECT pg_wal_replay_resume()")
    r = json.loads(receipt.read_text())
    notes = [n for n in r["notes"] if "PostgreSQL replica at" in n and "verified" in n]
    assert rc == 11, capsys.readouterr().err
    assert len(notes) == 1 and "NOT verified (it had not replayed the WAL up to" in notes[0], notes
    assert not r["verification"]["checks"]["files_clean"] and r["verification"]["checks"]["bystanders_intact"]
    primary = [n for n in r["notes"] if n.startswith("checkpoints: PostgreSQL at ") and "relation files" in n]
    assert primary and "read after CHECKPOINT: 0 copies" in primary[0], r["notes"]  # the copy is the replica's
    assert sum(replica_copies(srv, rep, db, secret(X)).values()) == 0  # once it replays: gone there too


class AppWriter:
    """The app while the erasure runs: a thread with LangGraph's own ``PostgresSaver`` and
    ``PostgresStore`` (its own connections) invoking the graph for the other users (new turns on
    their threads, new threads of a new user) and ``store.put`` over an existing item; every write
    kept with its time (what must be there after)."""

    def __init__(self, url: str) -> None:
        import threading

        self.url, self.stop, self.errors = url, threading.Event(), []  # type: ignore[var-annotated]
        self.checkpoints: list[tuple[float, str, str]] = []
        self.items: dict[tuple[tuple[str, ...], str], Any] = {}
        self.item_times: list[float] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def writes(self) -> int:
        return len(self.checkpoints) + len(self.item_times)

    def _run(self) -> None:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore

        try:
            with PostgresSaver.from_conn_string(self.url) as saver, PostgresStore.from_conn_string(self.url) as store:
                graph = build_graph(saver, store)
                n = 0
                while not self.stop.is_set():
                    self._turn(graph, store, n)
                    n += 1
                    time.sleep(0.01)
        except Exception as e:  # the test's evidence
            self.errors.append(f"{type(e).__name__}: {e}")

    def _turn(self, graph: Any, store: Any, n: int) -> None:
        user = ("ann2", "bob", "carl")[n % 3]
        tid = f"carl/s{n // 3}" if user == "carl" else threads(user)[n % 3]
        cfg: Any = {"configurable": {"thread_id": tid}}
        graph.invoke({"messages": [{"role": "user", "content": f"{user} says {n}"}], "user_id": user}, cfg)
        cid = graph.get_state(cfg).config["configurable"]["checkpoint_id"]
        self.checkpoints.append((time.monotonic(), tid, cid))
        for it in store.search((user, "memories"), limit=1000):  # what the graph's node put, last value
            self.items[(tuple(it.namespace), it.key)] = it.value
        if user != "carl":
            value = {"text": f"{user} updated during the erasure {n}"}
            store.put((user, "memories"), "m001", value)
            self.items[((user, "memories"), "m001")] = value
            self.item_times.append(time.monotonic())

    def lost(self) -> list[Any]:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore

        out: list[Any] = []
        with PostgresSaver.from_conn_string(self.url) as saver, PostgresStore.from_conn_string(self.url) as store:
            for _, tid, cid in self.checkpoints:
                if saver.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": cid}}) \
                        is None:
                    out.append((tid, cid))
            for (ns, key), value in self.items.items():
                got = store.get(ns, key)
                if got is None or got.value != value:
                    out.append((ns, key))
        return out


@pytest.mark.parametrize("level, broken", [("full", False), ("vacuum", False), ("full", True)])
def test_forget_online_while_the_app_writes_other_users(
        pgvector_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: str, broken: bool,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The online bystander rule: while the app (``AppWriter``) writes other users' threads and
    items, ``forget`` passes ``bystanders_intact`` (only rows this erasure's DELETE removed count),
    says in the receipt what the app changed, loses no write of the app, and removes the target's
    rows. The erasure is held at its DELETE until the app has written twice before and twice after
    it (the writes fall inside the erasure on any machine). ``broken``: the DELETE also removes one
    of bob's store items: the check FAILS (the rule does not hide an over-deletion)."""
    from traceless.systems._pg_server import PgServer

    srv = pgvector_server
    db, url = _pgv_app_db(srv)
    bob_before = api_view(url, "bob")[0]
    app = AppWriter(url)
    real = PgServer.delete

    def delete(self: PgServer, keys: Any) -> Any:
        def wait_for(n: int) -> None:
            deadline = time.monotonic() + 30
            while app.writes() < n and time.monotonic() < deadline and not app.errors:
                time.sleep(0.01)
        wait_for(app.writes() + 2)
        if broken and "store" in keys:
            cols, vals = keys["store"]
            keys = {**keys, "store": (cols, {*vals, ("bob.memories", "m003")})}
        out = real(self, keys)
        wait_for(app.writes() + 2)
        return out
    monkeypatch.setattr(PgServer, "delete", delete)
    cfg = write_cfg(tmp_path, url, **({"pg_compaction": "full"} if level == "full" else {}))
    receipt = tmp_path / "receipt.json"
    lits = ("--literal", secret(X)) if level == "full" else ()
    app.thread.start()
    try:
        while app.writes() < 3 and not app.errors:
            time.sleep(0.01)
        t0 = time.monotonic()
        rc = cli("forget", "--memory", "langgraph", "--memory-config", str(cfg), "--user", X, *lits,
                 "--receipt", str(receipt))
        t1 = time.monotonic()
        time.sleep(0.2)
    finally:
        app.stop.set()
        app.thread.join(timeout=60)
    out = capsys.readouterr()
    assert not app.errors, app.errors
    r = json.loads(receipt.read_text())
    during = sum(1 for t, *_ in app.checkpoints if t0 <= t <= t1) + sum(1 for t in app.item_times if t0 <= t <= t1)
    online = next(n for n in r["notes"] if "online: this erasure's DELETE removed" in n)
    print(f"\n[lg online] level={level} broken={broken}: forget {t1 - t0:.2f} s, {during} app writes during it "
          f"({app.writes()} in all), rc {rc}, bystanders_intact {r['verification']['checks']['bystanders_intact']}; "
          f"{online}")
    assert during >= 4
    assert api_view(url, X) == ([], [])  # the target's threads and items gone
    if broken:
        assert not r["verification"]["checks"]["bystanders_intact"] and rc == 11, out.err
        assert "1 of them NOT in the plan" in online and any("OVER-DELETION" in n for n in r["notes"])
        return
    assert rc == 0 and r["verification"]["passed"] and r["verification"]["checks"]["bystanders_intact"], out.err
    assert not app.lost()  # every write of the app is there after
    assert set(bob_before) <= set(api_view(url, "bob")[0])  # bob's checkpoints all kept
    assert ", all planned; meanwhile other transactions (the application) added some of the other users' rows" \
        in online, online
    assert not re.search(r"\d", online.split("all planned", 1)[1]), online  # how many: not the requester's to learn


# ---------------------------------------------------------------- --certify on the server

_PROBED_GRAPH = '''
from langgraph.graph import START, MessagesState, StateGraph


class State(MessagesState):
    {key}: str


def build(checkpointer, store, model=None):
    """The app's answering graph: the user's memories (its PostgresStore's search) as the model's
    context; it files each question as a memory too (a probe's put must not reach the server)."""
    def reply(state):
        ns = (state["{key}"], "memories")
        q = state["messages"][-1].content
        ctx = "\\n".join(str(i.value.get("text")) for i in store.search(ns, limit=50))
        store.put(ns, "asked", {{"text": q}})
        return {{"messages": [model.invoke([{{"role": "user", "content": "Memories:\\n" + ctx + "\\n" + q}}])]}}
    g = StateGraph(State)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    return g.compile(checkpointer=checkpointer, store=store)
'''
_CANARY = re.compile(r"ZX-\w+-4471-PLUMCODE")


def _parrot(messages: list[Any], config: object) -> str:
    """The graph's model: repeats any secret its context shows."""
    found = _CANARY.findall(" ".join(m.content for m in messages))
    return f"It is {found[0]}." if found else "I do not know."


def _graph_cfg(tmp_path: Path, url: str, key: str = "user_id", **traceless: Any) -> dict[str, Any]:
    (tmp_path / "probed_agent.py").write_text(_PROBED_GRAPH.format(key=key), encoding="utf-8")
    cfg = json.loads(write_cfg(tmp_path, url, **traceless).read_text())
    return {**cfg, "graph": f"{tmp_path / 'probed_agent.py'}:build"}


def test_certify_probes_read_the_servers_store_and_write_nothing_there(
        pg_server: str, app_db: tuple[str, str], tmp_path: Path) -> None:
    """``certify_live`` on the server (what ``forget --certify`` runs after the erasure): the user's
    graph answers each probe over LangGraph's own ``PostgresStore`` search of the user's items on
    the server; before any erasure it extracts bob's secret (the server is where the probe read
    it), not for ann2; its ``store.put`` stays in memory: the rows and the write counters of every
    table are unchanged."""
    from traceless._erase_api import attach_system, certify_live
    from traceless.models import ScriptedBackend

    db, url = app_db
    before = row_digests(pg_server, db), counters(pg_server, db)
    s = attach_system("langgraph", _graph_cfg(tmp_path, url), read_only=True)
    try:
        cert = certify_live(s, "bob", [secret("bob")], ScriptedBackend(_parrot))
        other = certify_live(s, "ann2", [secret("bob")], ScriptedBackend(_parrot))
    finally:
        s.close()
    assert cert.aer["agent"]["direct"] == 1.0 and all(p.extracted and p.context_items > 0 for p in cert.probes)
    assert not any(p.extracted for p in other.probes)
    assert cert.store_copies["store"] > 0
    assert (row_digests(pg_server, db), counters(pg_server, db)) == before  # the probes wrote nothing there


def test_forget_certify_on_the_server_signs_probes_that_find_nothing(
        pg_server: str, app_db: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import traceless
    from traceless.models import ScriptedBackend

    db, url = app_db
    bob = api_view(url, "bob")
    out = tmp_path / "receipt.json"
    r = traceless.forget(system="langgraph", config=_graph_cfg(tmp_path, url, pg_compaction="full"), user=X,
                         literals=[secret(X)], certify=True, model=ScriptedBackend(_parrot), receipt_path=out)
    assert r.certificate is not None and r.verification.passed, r.verification.checks
    assert r.verification.checks["certificate_no_extraction"] and r.verification.checks["certificate_no_store_copies"]
    assert {p.level for p in r.certificate.probes} == {"direct", "indirect", "jailbreak"}
    assert not any(p.extracted for p in r.certificate.probes)
    assert api_view(url, X) == ([], []) and api_view(url, "bob") == bob  # the probes' puts never reached the server
    text = out.read_text()
    assert PW not in text and secret(X) not in text
    pub = tmp_path / "signer.pub"
    assert cli("keys", "export", "--out", str(pub)) == 0
    monkeypatch.setenv("TRACELESS_HOME", str(tmp_path / "verifier-home"))
    capsys.readouterr()
    assert cli("forget", "verify", str(out), "--public-key", str(pub)) == 0
    assert "certificate OK" in capsys.readouterr().out


def test_forget_certify_that_cannot_probe_is_refused_before_any_change(
        pg_server: str, app_db: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A graph whose input the probes cannot give (it needs ``tenant_id``): one line, exit 2,
    before the journal or any row changes on the server."""
    db, url = app_db
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(_graph_cfg(tmp_path, url, key="tenant_id")), encoding="utf-8")
    before = row_digests(pg_server, db)
    capsys.readouterr()
    code = cli("forget", "--memory", "langgraph", "--memory-config", str(cfg), "--user", X, "--literal", secret(X),
               "--certify", "--model", "scripted", "--receipt", str(tmp_path / "r.json"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and "'tenant_id'" in err and "nothing was erased" in err and len(err.splitlines()) == 1, err
    assert row_digests(pg_server, db) == before and not (tmp_path / "r.json").exists()
