"""The free-space scrub policy of a plaintext SQLite store (``_scrub`` holds the page
rewriting): the traceless writer lock held from ``BEGIN`` until a transaction's frames are
scrubbed, the file's ``free_space`` flag followed under that lock, SQLite's own checkpoints
off while scrubbing, and the scrub itself (checkpoint, zero the free space of every page the
WAL held, then truncate the WAL). ``MemoryStore`` holds one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from traceless.errors import MemoryStoreError
from traceless.memory._scrub import ScrubLock, read_wal, scrub_pages

if TYPE_CHECKING:
    from traceless.memory._store import MemoryStore

__all__ = ["FREE_SPACE", "ScrubPolicy"]

FREE_SPACE = "free_space"  # meta key; "zeroed": the store keeps the scrub invariant (``_scrub``)


class ScrubPolicy:
    """Scrub state of one store: ``on`` while it keeps every b-tree page's free space zeroed."""

    def __init__(self, store: MemoryStore, wanted: bool) -> None:
        self._s = store
        self.lock: ScrubLock | None = None  # plaintext files only (``writer``)
        self.depth = 0
        self.wanted, self.busy, self.on = wanted, False, False
        self.page_size = 0

    def init(self, new: bool) -> None:
        """A plaintext file takes part in the writer lock; a store this open created keeps
        the scrub invariant from its first page (an older one gets it after its first VACUUM)."""
        if self._s.path == ":memory:" or not self._s.scannable or self._s.encrypted or self._s.read_only:
            return
        self.lock = ScrubLock.acquire_for(self._s.path)
        self.page_size = int(self._s._exec("PRAGMA page_size").fetchone()[0])
        flag = self._s.get_meta(FREE_SPACE) == "zeroed"
        if (new and self.wanted) or (flag and not self.wanted):
            with self._s.transaction():  # BEGIN drops the flag of a scrub=False open
                if new:
                    self._s.set_meta(FREE_SPACE, "zeroed")
        with self._s._lock, self.writer():
            self.refresh()
        if self.on and self.wal_frames():
            with contextlib.suppress(MemoryStoreError, *self._s._b.errors):
                self._s.checkpoint()  # frames a crashed process left are scrubbed before anything else

    @contextlib.contextmanager
    def writer(self) -> Iterator[None]:
        """The traceless writer lock of a plaintext file (``_scrub.ScrubLock``), held from
        ``BEGIN`` until the frames are scrubbed; reentrant within this store."""
        if self.lock is None or self.depth:
            self.depth += 1
            try:
                yield
            finally:
                self.depth -= 1
            return
        with self.lock.held(self._s._timeout, self._s.path):
            self.depth += 1
            try:
                yield
            finally:
                self.depth -= 1

    def refresh(self) -> None:
        """Follow the file's meta flag (another connection may have set it by its VACUUM).
        While scrubbing, SQLite must never checkpoint on its own: a frame it copied into the
        main file unscrubbed would break the invariant silently."""
        if self.lock is None:
            return
        flag = self._s.get_meta(FREE_SPACE) == "zeroed"
        if flag and not self.wanted and self._s._depth:
            # this connection does not scrub: its frames would reach the main file unscrubbed
            self._s._exec("DELETE FROM meta WHERE key = ?", (FREE_SPACE,))
            self._s.log_event("free_space_scrub_off", "opened with scrub=False; the next forget rebuilds the file")
        self.set(flag and self.wanted)

    def set(self, on: bool) -> None:
        if on != self.on:
            self._s._exec(f"PRAGMA wal_autocheckpoint = {0 if on else 1000}")
            self.on = on

    def wal_frames(self) -> int:
        try:
            size = os.stat(f"{self._s.path}-wal").st_size
        except FileNotFoundError:
            return 0
        return max(size - 32, 0) // (self.page_size + 24)

    def scrub(self) -> bool:
        """Checkpoint, then zero the free space of every page the WAL held (writer lock held,
        no transaction open). Order matters for a crash: PASSIVE copies the frames into the
        main file but leaves the WAL intact, the pages are scrubbed and synced, and only then
        is the WAL truncated; a crash in between leaves the frames for the next open to scrub.
        Returns ``checkpoint()``'s verdict."""
        assert self.lock is not None
        self.busy = True
        try:
            return self.scrub_frames(self.lock.fd)
        finally:
            self.busy = False

    def scrub_frames(self, fd: int) -> bool:
        try:
            wal = read_wal(f"{self._s.path}-wal")
        except ValueError:
            wal = None
            self.drop("the WAL file could not be read")
        busy, log, done = self._s._exec("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        try:
            _, unparsed = scrub_pages(fd, wal.pages if wal else ())
        except OSError as e:
            raise MemoryStoreError(f"{self._s.path}: scrubbing free space failed ({e}); the WAL keeps its frames, "
                                   "so reopening the store retries it") from e
        if unparsed:
            self.drop(f"{unparsed} b-tree page(s) did not parse")
        if int(busy) or int(done) < int(log):
            # a reader holds frames back (or another checkpointer runs): they stay in the WAL,
            # which is not truncated, for a later scrub
            return False
        row = self._s._exec("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return row is None or int(row[0]) == 0

    def drop(self, why: str) -> None:
        """The invariant cannot be proven: the next forget rebuilds the file (VACUUM)."""
        with self._s.transaction():
            self._s._exec("DELETE FROM meta WHERE key = ?", (FREE_SPACE,))
            self._s.log_event("free_space_scrub_off", f"{why}; the next forget rebuilds the file (VACUUM)")
        self.set(False)
