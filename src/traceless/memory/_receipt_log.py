"""The store's receipt log: every signed forget receipt, stored in the transaction of the
forget it describes (bodies name owners only by keyed pseudonym, ``forget._receipt``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from traceless.errors import MemoryStoreError

if TYPE_CHECKING:
    from traceless.memory._store import MemoryStore

__all__ = ["ReceiptLog"]


class ReceiptLog:
    """The ``receipts`` table of one store."""

    def __init__(self, store: MemoryStore) -> None:
        self._s = store

    def add(self, receipt_id: str, body: str) -> None:
        self._s._require_tx()
        self._s._exec("INSERT INTO receipts(id, created_at, body) VALUES (?,?,?)", (receipt_id, time.time(), body))

    def update(self, receipt_id: str, body: str) -> None:
        self._s._require_tx()
        self._s._exec("UPDATE receipts SET body = ? WHERE id = ?", (body, receipt_id))

    def all(self) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in self._s._exec("SELECT id, body FROM receipts ORDER BY created_at, id")]

    def get(self, receipt_id: str) -> str:
        row = self._s._exec("SELECT body FROM receipts WHERE id = ?", (receipt_id,)).fetchone()
        if row is None:
            path = self._s.path
            raise MemoryStoreError(
                f"no receipt {receipt_id!r} in {path}; list them with `traceless forget receipts --db {path}`"
            )
        return str(row[0])
