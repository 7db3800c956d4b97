"""`memory add` costs the same in a big store as in a small one (issue #13.5).

Not a timing test: SQLite counts the virtual-machine instructions a write executes
(``set_progress_handler`` with a period of 1). Writing one session must take the same
number in a store of 4,000 sessions as in one of 400; a statement that scans a table
or index that grows with the store (a full scan of the owners, a per-owner walk through
the wrong index) makes that number grow with the store. The extractive consolidation is
off here: it rebuilds from all of the owner's records by design (paper 001), so it grows
with the owner's history.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Literal

import pytest
from _forget_helpers import session

from traceless.memory import MemoryStore, MemoryWriter, WriteConfig
from traceless.models import HashingEmbedder

pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _store(path: Path, n: int) -> tuple[MemoryStore, MemoryWriter]:
    store = MemoryStore(path)
    w = MemoryWriter(store, embedder=HashingEmbedder(16), config=WriteConfig(levels=(), extractive=False))
    w.write_sessions([session(f"u{i % 5}", f"s{i}", [f"note {i}"]) for i in range(n)])
    return store, w


def _steps(store: MemoryStore, run: Callable[[], object]) -> int:
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0

    conn: sqlite3.Connection = store._conn
    conn.set_progress_handler(tick, 1)
    try:
        run()
    finally:
        conn.set_progress_handler(None, 1)
    return count[0]


@pytest.mark.parametrize("on_duplicate", ["error", "skip"])
def test_one_write_costs_the_same_in_a_tenfold_store(tmp_path: Path, on_duplicate: Literal["error", "skip"]) -> None:
    cost: dict[int, int] = {}
    for n in (400, 4000):
        store, w = _store(tmp_path / f"{n}.db", n)
        with store:
            # a new session of an existing owner, one of a new owner and (skip) a duplicate
            batch = [session("u1", "new", ["a new note"]), session("newcomer", "n1", ["hello"])]
            if on_duplicate == "skip":
                batch.append(session("u2", "s7", ["already there"]))
            cost[n] = _steps(store, partial(w.write_sessions, batch, on_duplicate=on_duplicate))
    assert cost[4000] <= cost[400] * 1.05 + 20, cost


def test_session_lookup_seeks_the_owner_session_index(tmp_path: Path) -> None:
    store, _ = _store(tmp_path / "m.db", 50)
    with store:
        conn: sqlite3.Connection = store._conn
        for ids in (["s1"], ["s1", "s2", "nope"]):
            sql: list[str] = []
            conn.set_trace_callback(sql.append)
            found = store.present_sessions([("u1", i) for i in ids])
            conn.set_trace_callback(None)
            assert found == {("u1", "s1")}  # s2 is u2's
            (query,) = sql
            plan = " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + query))
            assert "USING INDEX ix_artifacts_owner_session (owner=? AND session_id=?)" in plan, plan
        assert store.owners() == ["u0", "u1", "u2", "u3", "u4"]
