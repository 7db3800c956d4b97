"""Both storage backends in one run (issue #14, Performance): forget latency and one
owner's vector search, SQLite and PostgreSQL side by side, both encrypted at rest (the
PostgreSQL default; on SQLite the option that makes the same key_destroyed guarantee).

    eval "$(.ci/start-postgres)"
    python bench/bench_store.py [--forget-sizes 1000,10000] [--search-sizes 10000,100000] [--reps 5]

* forget: a store of N sessions (N/20 users of 20 sessions each, hashing embedder, as in
  bench_forget.py); `reps` literal forgets (full_purge) of one user, p50. Every forget
  must pass its own verification or the bench exits 1.
* search: a store of N artifacts over N/100 owners (50 records + 50 embeddings of 384
  dimensions each, seeded); `reps` searches (k=5) for random owners, p50. The owner's
  vectors are decrypted and ranked in numpy on both backends. PostgreSQL's planner
  statistics are collected (ANALYZE) after the build, as autovacuum would on a live database.

PostgreSQL databases are made on the server of ``--pg`` (default
``$TRACELESS_TEST_PG_URL``) and dropped afterwards.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
from bench_forget import _build, _p50  # same store and forget loop as bench_forget.py (run from bench/)

from traceless.memory import MemoryStore, Tier

PER_OWNER = 100  # artifacts per owner in the search stores (10^6 artifacts / 10^4 owners)
DIM = 384


@contextmanager
def _pg_database(server: str) -> Iterator[str]:
    import psycopg

    name = f"traceless_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    try:
        yield urlsplit(server)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(server, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _forget_store(where: str, n: int) -> MemoryStore:
    return _build(where, n, 0, encrypt=True)


def _search_store(where: str, n: int) -> MemoryStore:
    rng = np.random.default_rng(14)
    store = MemoryStore(where, encrypt=True)
    # bulk(): COPY on PostgreSQL (row-by-row, 10^6 artifacts took over 30 min to build)
    with store.bulk(), store.ungated("bench: synthetic memories"):
        for o in range(max(n // PER_OWNER, 1)):
            for j in range(PER_OWNER // 2):
                rec = store.add(owner=f"o{o}", tier=Tier.RAW, kind="turn", text=f"owner {o} memory {j}")
                store.add(owner=f"o{o}", tier=Tier.EMBEDDING, kind="embedding", parents=[rec.id], op="embed",
                          vector=rng.standard_normal(DIM).astype(np.float32))
    _analyze(where)
    return store


def _analyze(where: str) -> None:
    """Planner statistics, as autovacuum would have them on a live database: measured right
    after a bulk build without them, PostgreSQL picked plans whose search time grew with the
    store (3.9 → 4.8 ms from 3·10^4 to 10^5 artifacts; 1.4 ms at both after ANALYZE)."""
    if where.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(where, autocommit=True) as c:
            c.execute("ANALYZE")


def _search_p50(store: MemoryStore, n: int, reps: int) -> float:
    rng = np.random.default_rng(7)
    owners = max(n // PER_OWNER, 1)
    times = []
    for _ in range(reps):
        q = rng.standard_normal(DIM).astype(np.float32)
        owner = f"o{int(rng.integers(owners))}"
        t0 = time.perf_counter()
        hits = store.search(owner, q, 5)
        times.append(time.perf_counter() - t0)
        assert len(hits) == 5 and all(h.artifact.owner == owner for h in hits)
    return statistics.median(times)


def _side_by_side(label: str, sizes: list[int], run: Callable[[str, int], tuple[float, float]],
                  d: Path, pg: str) -> None:
    print(f"\n{label}\n{'size':>9} {'sqlite p50 ms':>13} {'postgres p50 ms':>15} {'pg/sqlite':>9} "
          f"{'build s (sqlite, pg)':>21}")
    for n in sizes:
        t0 = time.perf_counter()
        s_p50, s_build = run(str(d / f"{label[:6]}-{n}.db"), n)
        print(f"{n:9d} {s_p50 * 1e3:13.1f} ", end="", flush=True)  # a run cut short still shows SQLite's
        with _pg_database(pg) as url:
            p_p50, p_build = run(url, n)
        print(f"{p_p50 * 1e3:15.1f} {p_p50 / s_p50:9.2f} "
              f"{s_build:10.0f} {p_build:10.0f}   ({time.perf_counter() - t0:.0f} s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--forget-sizes", default="1000,10000", help="sessions per store")
    ap.add_argument("--search-sizes", default="10000,100000", help="artifacts per store")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pg", default=os.environ.get("TRACELESS_TEST_PG_URL", ""),
                    help="a PostgreSQL server URL whose user may CREATE DATABASE")
    args = ap.parse_args()
    # `timeout` sends SIGTERM: unwind, so the benchmark databases are dropped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped (SIGTERM): sizes above not reached"))
    if not args.pg:
        sys.exit('no PostgreSQL server: eval "$(.ci/start-postgres)" or pass --pg URL')

    def forget_run(where: str, n: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        store = _forget_store(where, n)
        built = time.perf_counter() - t0
        try:
            return _p50(store, args.reps), built
        finally:
            store.close()

    def search_run(where: str, n: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        store = _search_store(where, n)
        built = time.perf_counter() - t0
        try:
            return _search_p50(store, n, max(args.reps, 20)), built
        finally:
            store.close()

    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("TRACELESS_HOME", str(Path(d) / "home"))
        _side_by_side("forget (sessions; full_purge of a literal, encrypted)",
                      [int(x) for x in args.forget_sizes.split(",") if x], forget_run, Path(d), args.pg)
        _side_by_side(f"search (artifacts; {PER_OWNER} per owner, k=5, {DIM}-dim, encrypted)",
                      [int(x) for x in args.search_sizes.split(",") if x], search_run, Path(d), args.pg)


if __name__ == "__main__":
    main()
