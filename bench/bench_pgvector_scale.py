"""mem0 on a PostgreSQL + pgvector **server** at scale (issue #35, item 6): one user's
``traceless scan`` and ``traceless forget --memory mem0`` at 10^5 (and 10^6) memories over
10^4 users, side by side with mem0's own ``delete_all(user_id=…)`` on the same data, in one run.

    python bench/bench_pgvector_scale.py [--memories 100000] [--users 10000] [--dims 384] [--reps 1] [--app]

The server is a real one (``tests/_pgvector_server.py``: PostgreSQL 18 + pgvector from the
test extra's wheel, in a temp dir). The collection is mem0's own (``PGVector.create_col``:
heap, HNSW ``vector_cosine_ops``, GIN on ``text_lemmatized``), filled with mem0's payload
shape and pseudo-random vectors made on the server (``generate_series``; no embedder runs; the
indexes are built after the load, as a DBA
restores one), and the history db holds one ``ADD`` row per memory as mem0 writes it. mem0
creates no index on ``payload->>'user_id'``; the bench adds one (``--no-user-index`` leaves
it out), as a deployment at this size has: both mem0's ``list``/``delete_all`` and the
scan then find the user's rows through it (the plans are printed and checked).

Each rep makes a fresh copy of the database (``CREATE DATABASE … TEMPLATE``) and of the
history db, then times in this process (imports excluded):

* ``delete_all``: mem0's ``Memory.delete_all(user_id=U)`` (what the app would call);
* ``scan``: ``traceless.scan("mem0", cfg, user=U)`` and with ``literals=[canary]`` (the
  literal's rows are found by a pass over the table on the server: ``strpos`` on the JSON);
* ``forget``: ``traceless.forget(system="mem0", …, user=U, literals=[canary])``: plan, the
  scope check, bystander counts (on the server: one aggregate per table), one ``DELETE``, the
  physical step (``VACUUM (INDEX_CLEANUP ON)`` by default, ``CHECKPOINT``, and the history
  db's ``VACUUM``: timed together), the relation files and ``pg_wal`` read for the erased texts
  (the byte scan, timed with the kernel's byte check), re-scan, signed receipt.

Ratios are traceless's time over ``delete_all``'s on the same data. ``uptime``'s load is
printed before and after. Exits 1 when a receipt does not pass or the scan misses a row.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLE = "app_memories"  # the name the online test's application load uses (``--app``)
USER = "u0107"  # outside u0000-u0099, the users the --app load writes for
CANARY = "CANARY-pg-bench-4411"
SCAN_TARGET_S, FORGET_TARGET_S = 1.0, 5.0


_FILL = """INSERT INTO {table} (id, vector, payload)
SELECT md5('m' || i)::uuid,
       (SELECT array_agg(((hashint4(i * 131 + d) & 65535) / 32768.0 - 1)::real) FROM generate_series(1, %(dims)s) d)::vector,
       jsonb_build_object('user_id', u, 'data', txt, 'hash', md5(txt), 'created_at', at, 'updated_at', at,
                          'text_lemmatized', lower(txt))
FROM (SELECT i, CASE WHEN i %% (%(n)s / 10) = 7 THEN %(me)s
                     ELSE 'u' || lpad(((hashint4(i) & 2147483647) %% %(users)s)::text, 4, '0') END AS u,
             to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"') AS at
      FROM generate_series(0, %(n)s - 1) i) s,
LATERAL (SELECT u || ' note ' || i || ': ' || CASE WHEN u = %(me)s THEN 'my account code is ' || %(canary)s
                ELSE 'likes topic ' || ((hashint4(i + 1) & 2147483647) %% 1000000) END AS txt) t"""
"""mem0's payload shape for ``n`` memories over ``users`` users (the target's every tenth of the
table and wherever the hash picks it), vectors of ``dims`` components in [-1, 1): made on the
server (``generate_series``), deterministic (hashes of the row number, no RNG)."""


def _build(srv: Any, root: Path, n: int, users: int, dims: int, user_index: bool) -> dict[str, int]:
    """Database ``scale_tmpl`` (mem0's table, n memories, filled on the server: ``_FILL``) and
    ``root/history.db``."""
    import psycopg
    from mem0.memory.storage import SQLiteManager
    from mem0.vector_stores.pgvector import PGVector

    with psycopg.connect(srv.superuser_dsn(), autocommit=True) as c:
        c.execute("CREATE DATABASE scale_tmpl")
    store = PGVector(dbname=None, collection_name=TABLE, embedding_model_dims=dims, user=None, password=None,
                     host=None, port=None, diskann=False, hnsw=True, maxconn=2, connection_string=srv.url("scale_tmpl"))
    try:
        store.create_col()
    finally:
        store.connection_pool.close()
    t0 = time.monotonic()
    with psycopg.connect(srv.superuser_dsn("scale_tmpl"), autocommit=True) as c:
        idx = [r[0] for r in c.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexname <> %s",
                                       (TABLE, f"{TABLE}_pkey"))]
        c.execute(f"DROP INDEX {TABLE}_hnsw_idx, {TABLE}_text_lemmatized_idx")
        c.execute(_FILL.format(table=TABLE), {"n": n, "users": users, "dims": dims, "me": USER, "canary": CANARY})
        mine = int(c.execute(f"SELECT count(*) FROM {TABLE} WHERE payload->>'user_id' = %s", (USER,)).fetchone()[0])
        hist = [(str(i), str(t)) for i, t in c.execute(f"SELECT id::text, payload->>'data' FROM {TABLE}").fetchall()]
        c.execute("SET maintenance_work_mem = '2GB'")
        for d in idx:
            c.execute(d)
        if user_index:
            c.execute(f"CREATE INDEX {TABLE}_user_id_idx ON {TABLE} ((payload->>'user_id'))")
        c.execute(f"VACUUM ANALYZE {TABLE}")
    SQLiteManager(str(root / "history.db")).close()  # mem0's own schema
    with sqlite3.connect(root / "history.db") as con:
        now = datetime.now(UTC).isoformat()
        con.executemany("INSERT INTO history (id, memory_id, old_memory, new_memory, event, created_at, is_deleted) "
                        "VALUES (?, ?, NULL, ?, 'ADD', ?, 0)", [(str(uuid.uuid4()), m, t, now) for m, t in hist])
    print(f"built {n:,} memories over {users:,} users ({mine} of {USER}) in {time.monotonic() - t0:.0f} s")
    return {"mine": mine}


def _cfg(srv: Any, db: str, root: Path, dims: int, level: str) -> dict[str, Any]:
    from traceless.models._st_embedder import minilm_path

    return {"vector_store": {"provider": "pgvector", "config": {
        "connection_string": srv.url(db), "collection_name": TABLE, "embedding_model_dims": dims}},
        "history_db_path": str(root / "history.db"),
        "embedder": {"provider": "huggingface", "config": {"model": str(minilm_path()), "embedding_dims": dims}},
        "llm": {"provider": "openai", "config": {"model": "unused", "api_key": "unused",
                                                 "openai_base_url": "http://127.0.0.1:9/v1"}},
        "version": "v1.1", "traceless": {"infer": False, "pg_compaction": level}}


_N = iter(range(1000))
_TMP: list[Path] = []
"""The run's temp dir (the history db copies, the configs)."""


def _copy(srv: Any, template: Path, dims: int, level: str) -> tuple[dict[str, Any], Path]:
    import psycopg

    db = f"scale{next(_N)}"
    work = Path(tempfile.mkdtemp(prefix="pg-scale-", dir=_TMP[0]))
    with psycopg.connect(srv.superuser_dsn(), autocommit=True) as c:
        c.execute(f"CREATE DATABASE {db} TEMPLATE scale_tmpl")
    shutil.copy(template / "history.db", work / "history.db")
    cfg = _cfg(srv, db, work, dims, level)
    path = work / "mem0.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return cfg, path


def _plan(srv: Any, db: str) -> str:
    """The server's plan for the user's rows (what mem0's list and the scan ask)."""
    import psycopg

    with psycopg.connect(srv.superuser_dsn(db)) as c:
        rows = c.execute(f"EXPLAIN SELECT id FROM {TABLE} WHERE payload->>'user_id' = %s", (USER,)).fetchall()
    return " / ".join(str(r[0]).strip() for r in rows)


def _delete_all(cfg: dict[str, Any]) -> float:
    from traceless.systems._mem0 import _import_mem0

    mem = _import_mem0(Path(tempfile.mkdtemp(dir=_TMP[0]))).Memory.from_config({k: v for k, v in cfg.items() if k != "traceless"})
    t0 = time.monotonic()
    mem.delete_all(user_id=USER)
    dt = time.monotonic() - t0
    mem.vector_store.connection_pool.close()
    return dt


def _timed(owner: Any, name: str, spent: list[float] | None = None) -> list[float]:
    """Wrap ``owner.name`` (a class's method or a module's function) to time it apart (the
    bench's instrument; the code is unchanged); ``spent``: add to another's timings."""
    spent = [] if spent is None else spent
    orig = getattr(owner, name)

    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.monotonic()
        try:
            return orig(*a, **k)
        finally:
            spent.append(time.monotonic() - t0)

    setattr(owner, name, timed)
    return spent


def _byte_check_timer(erase_run: Any) -> list[float]:
    """The kernel's byte check of the files (``scan_files``) timed where it adds to the
    erasure's wall: a call of its own in full; inside ``scan_system``, which runs it in a second
    thread beside the adapter's scan, only what ``scan_system`` took beyond the adapter's scan
    (the part the overlap did not hide). So the rest (the forget less the physical step and
    the byte scan) is the same with or without the overlap, never made smaller by it."""
    spent = _timed(erase_run, "scan_files")
    orig = erase_run.scan_system

    def scan_system(system: Any, *a: Any, **k: Any) -> Any:
        cls, inner = type(system), []
        own, scan = cls.__dict__.get("scan"), cls.scan

        def timed_scan(self: Any, *sa: Any, **sk: Any) -> Any:
            t0 = time.monotonic()
            try:
                return scan(self, *sa, **sk)
            finally:
                inner.append(time.monotonic() - t0)

        cls.scan = timed_scan
        n0, t0 = len(spent), time.monotonic()
        try:
            return orig(system, *a, **k)
        finally:
            wall = time.monotonic() - t0
            if own is None:
                del cls.scan
            else:
                cls.scan = own
            del spent[n0:]
            spent.append(max(0.0, wall - sum(inner)))

    erase_run.scan_system = scan_system
    return spent


@contextmanager
def _app_load(srv: Any, cfg: dict[str, Any], app: bool) -> Iterator[Any]:
    """The online test's application (``AppLoad``) on this database while the block runs, or None."""
    if not app:
        yield None
        return
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    import psycopg
    from test_pgvector_online import AppLoad

    url = cfg["vector_store"]["config"]["connection_string"]
    with psycopg.connect(url) as c:
        mutable = [(str(i), str(u)) for i, u in c.execute(
            f"SELECT id::text, payload->>'user_id' FROM {TABLE} WHERE payload->>'user_id' < 'u0100' "
            "AND payload->>'user_id' <> %s ORDER BY id LIMIT 60", (USER,))]
    load = AppLoad(url, mutable, dims=cfg["vector_store"]["config"]["embedding_model_dims"])
    with load.running():
        time.sleep(1.0)  # the app's own latency before the erasure
        yield load
        time.sleep(0.3)


def _lost(srv: Any, cfg: dict[str, Any], load: Any) -> int:
    """The app's inserts missing after, and its updates not holding its last text."""
    import psycopg

    with psycopg.connect(cfg["vector_store"]["config"]["connection_string"]) as c:
        rows = {str(i): str(t) for i, t in c.execute(f"SELECT id::text, payload->>'data' FROM {TABLE}")}
    return sum(m not in rows for m in load.written) + sum(rows.get(m) != t for m, t in load.updated.items())


def _rep(srv: Any, template: Path, dims: int, mine: int, level: str,  # noqa: PLR0913
         physical: list[float], byte_scan: list[float], byte_check: list[float], app: bool) -> dict[str, Any]:
    import traceless

    cfg, path = _copy(srv, template, dims, level)
    row: dict[str, Any] = {"delete_all": _delete_all(cfg)}
    cfg, path = _copy(srv, template, dims, level)
    row["plan"] = _plan(srv, cfg["vector_store"]["config"]["connection_string"].rsplit("/", 1)[1])
    t0 = time.monotonic()
    rep = traceless.scan("mem0", str(path), user=USER)
    row["scan"] = time.monotonic() - t0
    t0 = time.monotonic()
    rep_lit = traceless.scan("mem0", str(path), user=USER, literals=[CANARY])
    row["scan_literal"] = time.monotonic() - t0
    found = sum(1 for h in rep.hits if h.store == "vector_store" and h.owner_match)
    row["found"] = found == mine and sum(1 for h in rep_lit.hits if h.store == "vector_store") == mine
    for spent in (physical, byte_scan, byte_check):
        spent.clear()
    with _app_load(srv, cfg, app) as load:
        t0 = time.monotonic()
        receipt = traceless.forget(system="mem0", config=str(path), user=USER, literals=[CANARY])
        t1 = time.monotonic()
    row["forget"] = t1 - t0
    if load is not None:
        row["app_wait"], row["app_own"] = load.longest(t0, t1), load.longest(0, t0 - 0.01)
        row["app_errors"], row["app_lost"] = len(load.errors), _lost(srv, cfg, load)
    row["physical"], row["byte_scan"] = sum(physical), sum(byte_scan) + sum(byte_check)
    checks = receipt.verification.checks  # plain VACUUM leaves bytes in the pages' free space: files_clean
    row["passed"] = all(v for k, v in checks.items() if k != "files_clean" or level == "full")
    row["notes"] = [n for n in receipt.notes if "pg_wal" in n or "relation files" in n]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--dims", type=int, default=384)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--level", choices=("vacuum", "full"), default="vacuum",
                    help="the physical step (traceless: pg_compaction): vacuum (default, online) or full (blocking)")
    ap.add_argument("--app", action="store_true", help="an application serving other users during the forget "
                    "(tests/integration/test_pgvector_online.py's AppLoad: its own process, 3 threads of mem0's "
                    "PGVector search/list/insert/update, vectors of --dims)")
    ap.add_argument("--no-user-index", action="store_true", help="leave out the index on payload->>'user_id'")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(ROOT / "tests"))
    import _pgvector_server

    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    srv = _pgvector_server.start("maintenance_work_mem = 1GB\nshared_buffers = 512MB\n")
    _TMP.append(Path(tempfile.mkdtemp(prefix="pg-scale-")))  # every file of the run, removed at its end
    template = Path(tempfile.mkdtemp(prefix="tmpl-", dir=_TMP[0]))
    try:
        built = _build(srv, template, args.memories, args.users, args.dims, not args.no_user_index)
        from traceless.systems import _erase_run, _mem0_pgvector
        from traceless.systems._pg_server import PgServer

        # the physical step: the server's VACUUM + CHECKPOINT and the history db's VACUUM; the byte
        # scan: the relation files and pg_wal read for the erased texts, and the kernel's byte check
        timers = _timed(PgServer, "compact"), _timed(PgServer, "count_in")
        _timed(_mem0_pgvector, "_vacuum", timers[0])
        _timed(PgServer, "wal_holding", timers[1])
        byte_check = _byte_check_timer(_erase_run)  # the kernel's byte check of the files, where not hidden
        rows = [_rep(srv, template, args.dims, built["mine"], args.level, timers[0], timers[1], byte_check, args.app)
                for _ in range(args.reps)]
    finally:
        srv.stop()
        shutil.rmtree(_TMP.pop(), ignore_errors=True)
    return _report(args, rows)


def _report(args: argparse.Namespace, rows: list[dict[str, Any]]) -> int:
    def p50(k: str) -> float:
        return statistics.median(r[k] for r in rows)

    base = p50("delete_all")
    print(f"\n{args.memories:,} memories, {args.users:,} users, {args.dims}-d, user index "
          f"{'no' if args.no_user_index else 'yes'}, pg_compaction {args.level}, reps {args.reps}")
    seq = "Seq Scan" in rows[0]["plan"]
    print(f"plan of the user's rows: {rows[0]['plan']} ({'a Seq Scan' if seq else 'no Seq Scan'})")
    print("| operation | p50 s | / mem0 delete_all |\n|---|---|---|")
    for k in ("delete_all", "scan", "scan_literal", "forget", "physical", "byte_scan"):
        print(f"| {k} | {p50(k):.2f} | {p50(k) / base:.2f} |")
    logical = p50("forget") - p50("physical") - p50("byte_scan")
    print(f"forget less the physical step and the byte scan of the server's files: {logical:.2f} s")
    if args.app:
        print(f"the app's longest wait during the forget: {p50('app_wait'):.0f} ms (its own before: "
              f"{p50('app_own'):.0f} ms); errors {sum(r['app_errors'] for r in rows)}, lost writes "
              f"{sum(r['app_lost'] for r in rows)}")
    for n in rows[0]["notes"]:
        print(f"  {n}")
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    ok = all(r["passed"] and r["found"] and not r.get("app_errors") and not r.get("app_lost") for r in rows)
    ok = ok and (args.no_user_index or not seq)  # the user's rows through the index
    met = p50("scan") <= SCAN_TARGET_S and logical <= FORGET_TARGET_S
    print(f"receipts pass and scans find every row: {ok}; targets (scan <= {SCAN_TARGET_S} s, forget less the "
          f"physical step and byte scan <= {FORGET_TARGET_S} s): {'met' if met else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
