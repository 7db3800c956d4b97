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
                  if "statement: " in ln]
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
