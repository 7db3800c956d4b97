"""The store's one write path for new rows (langgraph's ``BaseStore.batch`` model).

``MemoryStore.add``, ``add_many`` and ``add_edge`` only *put* rows here; ``flush`` sends
what waits, one multi-row statement per table (PostgreSQL: one COPY of the artifacts and one
pipelined batch of lineage upserts; SQLite: ``executemany``). Outside ``bulk()`` each verb
flushes before it returns; inside, rows wait until the block ends or ``BATCH_ROWS`` artifacts
wait. Every statement on stored artifacts or lineage runs through ``MemoryStore._rows``, which
flushes first: a read always sees every earlier write (the flush is explicit, never guessed
from the statement's text)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from traceless.memory._backend import Backend

__all__ = ["BATCH_ROWS", "COLUMNS", "PendingWrites"]

BATCH_ROWS = 20_000  # bulk(): rows held before they are sent (bounds the memory a large load takes)
COLUMNS = ("id", "owner", "tier", "kind", "session_id", "seq", "text", "vector", "digest", "created_at", "meta",
           "sealed")
_EDGE = ("child", "parent", "op", "params")


class PendingWrites:
    """Rows not yet sent: artifacts, lineage edges (by key: a later edge replaces an earlier
    one, as the upsert does) and, inside ``bulk()``, the id counters handed out."""

    def __init__(self) -> None:
        self.artifacts: list[tuple[Any, ...]] = []
        self.lineage: dict[tuple[str, str], tuple[str, str, str, str]] = {}
        self.seq: dict[str, int] = {}

    def put(self, rows: Sequence[tuple[Any, ...]], edges: Sequence[tuple[str, str, str, str]]) -> None:
        self.artifacts += rows
        self.lineage.update(((e[0], e[1]), e) for e in edges)

    @property
    def full(self) -> bool:
        return len(self.artifacts) >= BATCH_ROWS

    def __bool__(self) -> bool:
        return bool(self.artifacts or self.lineage or self.seq)

    def clear(self) -> None:
        self.artifacts, self.lineage, self.seq = [], {}, {}

    def flush(self, b: Backend, set_meta: Callable[[str, str], None], *, bulk: bool) -> None:
        """Send every waiting row (taken out first: a failed send is never sent twice).
        ``bulk``: the backend's bulk insert (PostgreSQL: COPY), and the counters stay cached
        (a ``bulk()`` block reads them once)."""
        arts, edges, seq = self.artifacts, list(self.lineage.values()), dict(self.seq)
        self.artifacts, self.lineage = [], {}
        if not bulk:
            self.seq = {}
        if arts and bulk:
            b.insert_many("artifacts", list(COLUMNS), arts)
        elif arts:
            b.executemany(f"INSERT INTO artifacts({', '.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})", arts)
        if edges:
            b.executemany(b.upsert("lineage", _EDGE, ("child", "parent"), replace=True), edges)
        for key, n in seq.items():
            set_meta(key, str(n))
