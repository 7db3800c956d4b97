"""Free-space scrubbing of a plaintext SQLite store: zero the bytes a b-tree page does not
use, on exactly the pages a write transaction touched.

Why: ``secure_delete`` zeroes a deleted cell and a freed page, but when SQLite rebalances a
b-tree page (btree.c ``rebuildPage``/``editPage``) it lays the cells out afresh and does
not zero the unallocated gap, so bytes of cells that lived there earlier survive in it (and
in freeblock bodies and fragments). A later delete of the live copy elsewhere never touches
that page. The store keeps the invariant *every b-tree page in the main file has zero free
space*: every traceless write lands in the WAL first (``wal_autocheckpoint=0``), and the
only checkpoint is ``MemoryStore.checkpoint``, which reads the page numbers of the WAL
frames, checkpoints, and rewrites exactly those pages with their free space zeroed. A forget
then costs the pages it touched, not the file (docs/erasure.md).

The page format is SQLite's file format (https://www.sqlite.org/fileformat2.html, 1.6): a
page that does not parse as a well-formed b-tree page is never written (``scrub_page``
returns ``None``); the caller treats that as "cannot prove it" and falls back to VACUUM.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from traceless.errors import StoreLockedError

__all__ = ["ScrubLock", "WalFrames", "read_wal", "scrub_page", "scrub_pages"]

_WAL_MAGIC = (0x377F0682, 0x377F0683)
_WAL_HEADER, _FRAME_HEADER = 32, 24
_BTREE_FLAGS = {2: 12, 5: 12, 10: 8, 13: 8}  # page type -> header size (interior pages add a child pointer)


@dataclass
class WalFrames:
    """The page numbers of the frames a WAL file holds."""

    page_size: int
    """The page size the WAL header records."""
    pages: list[int] = field(default_factory=list)
    """Page number of every frame in the file, in file order (every generation: frames of an
    older one beyond the current end are harmless to scrub again)."""


def read_wal(path: str) -> WalFrames | None:
    """The frames of the WAL at ``path``; ``None`` when there is none (missing or empty).
    Raises ``ValueError`` for a file that is not a WAL (the caller falls back to VACUUM)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size < _WAL_HEADER:
            return None
        magic, _version, page_size = struct.unpack(">III", os.pread(fd, 12, 0))
        if magic not in _WAL_MAGIC or page_size < 512 or page_size & (page_size - 1):
            raise ValueError(f"{path} is not a SQLite WAL file")
        out = WalFrames(page_size)
        step = _FRAME_HEADER + page_size
        for off in range(_WAL_HEADER, size - step + 1, step):
            out.pages.append(struct.unpack(">I", os.pread(fd, 4, off))[0])
        return out
    finally:
        os.close(fd)


def _varint(b: bytes | bytearray, i: int) -> tuple[int, int]:
    """SQLite's big-endian varint at ``i``: (value, offset after it)."""
    v = 0
    for k in range(8):
        c = b[i + k]
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            return v, i + k + 1
    return (v << 8) | b[i + 8], i + 9


def _cell_size(b: bytearray, off: int, flag: int, usable: int) -> int:
    """Bytes the cell at ``off`` occupies on its page (btree.c ``cellSizePtr``)."""
    i = off + (4 if flag in (2, 5) else 0)  # interior pages: 4-byte left child first
    if flag == 5:
        return _varint(b, i)[1] - off
    payload, i = _varint(b, i)
    if flag == 13:
        i = _varint(b, i)[1]  # rowid
    max_local = usable - 35 if flag == 13 else (usable - 12) * 64 // 255 - 23
    if payload <= max_local:
        return max(i + payload - off, 4)
    min_local = (usable - 12) * 32 // 255 - 23
    local = min_local + (payload - min_local) % (usable - 4)
    return i + (local if local <= max_local else min_local) + 4 - off


def scrub_page(page: bytearray, pgno: int, usable: int) -> bool | None:
    """Zero the free space of a b-tree page in place: the gap between the cell-pointer array
    and the cell content, each freeblock's body (its 4-byte header stays: it chains the free
    list) and the fragments. Returns whether a byte changed; ``None`` when the page is not a
    b-tree page (overflow, freelist: ``secure_delete`` owns those) or does not parse exactly.
    Only bytes SQLite never reads are written, so a concurrent reader sees the same page."""
    h = 100 if pgno == 1 else 0
    flag = page[h]
    if flag not in _BTREE_FLAGS:
        return None
    first_free, ncells, start, nfrag = struct.unpack_from(">HHHB", page, h + 1)
    start = start or 65536
    ptr_end = h + _BTREE_FLAGS[flag] + 2 * ncells
    if not ptr_end <= start <= usable:
        return None
    used: list[tuple[int, int]] = []
    for k in range(ncells):
        off = struct.unpack_from(">H", page, ptr_end - 2 * ncells + 2 * k)[0]
        if not start <= off < usable:
            return None
        used.append((off, off + _cell_size(page, off, flag, usable)))
    zero = [(ptr_end, start)]
    off = first_free
    while off:
        nxt, size = struct.unpack_from(">HH", page, off) if off + 4 <= usable else (0, 0)
        if off < start or size < 4 or off + size > usable or (nxt and nxt < off + size):
            return None
        used.append((off, off + 4))
        zero.append((off + 4, off + size))
        used.append((off + 4, off + size))
        off = nxt
    used.sort()
    at, frag = start, 0
    for lo, hi in used:
        if lo < at or hi > usable:
            return None  # overlapping or out-of-page cells: not what we think it is
        if lo > at:
            zero.append((at, lo))
            frag += lo - at
        at = hi
    if at < usable:  # bytes after the last cell are a fragment too
        zero.append((at, usable))
        frag += usable - at
    if frag != nfrag:
        return None  # every byte must be a cell, a freeblock or a counted fragment
    changed = False
    for lo, hi in zero:
        if any(page[lo:hi]):
            page[lo:hi] = bytes(hi - lo)
            changed = True
    return changed


def scrub_pages(fd: int, pages: Iterable[int]) -> tuple[int, int]:
    """Scrub ``pages`` of the main database file open at ``fd`` and fsync it. Returns
    (pages written, b-tree pages that did not parse). The caller holds the store's scrub
    lock and has checkpointed, so nothing else writes these pages meanwhile."""
    header = os.pread(fd, 100, 0)
    if len(header) < 100:
        return 0, 0
    page_size = struct.unpack_from(">H", header, 16)[0]
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - header[20]
    n_pages = os.fstat(fd).st_size // page_size
    written = unparsed = 0
    for pgno in sorted(set(pages)):
        if not 1 <= pgno <= n_pages:
            continue  # a page the file no longer has (truncated by a later transaction)
        page = bytearray(os.pread(fd, page_size, (pgno - 1) * page_size))
        changed = scrub_page(page, pgno, usable)
        if changed is None:
            unparsed += page[100 if pgno == 1 else 0] in _BTREE_FLAGS
        elif changed:
            os.pwrite(fd, page, (pgno - 1) * page_size)
            written += 1
    if written:
        os.fsync(fd)
    return written, unparsed


class ScrubLock:
    """The traceless writer lock of one plaintext SQLite file, shared by every store this
    process opens on it: a thread lock plus ``flock`` on one descriptor of the main file.

    A write transaction holds it from ``BEGIN`` until its frames are scrubbed, so no other
    traceless writer can append frames between a scrub's reading of the WAL and its
    checkpoint (those frames would reach the main file unscrubbed). The descriptor stays
    open until the last store on the file closes: closing any descriptor of a file drops
    every POSIX lock this process holds on it, SQLite's included."""

    _open: dict[tuple[int, int], ScrubLock] = {}
    _registry = threading.Lock()

    def __init__(self, fd: int, key: tuple[int, int]) -> None:
        self.fd, self._key, self._refs = fd, key, 0
        self._thread = threading.Lock()

    @classmethod
    def acquire_for(cls, path: str) -> ScrubLock:
        """The lock of the file at ``path`` (one per inode), with a reference taken."""
        st = os.stat(path)
        key = (st.st_dev, st.st_ino)
        with cls._registry:
            lock = cls._open.get(key)
            if lock is not None and os.fstat(lock.fd).st_nlink == 0:
                lock = None  # that file was deleted and its inode number reused by this one
            if lock is None:
                # only the first store opens a descriptor: a second one, closed later, would
                # drop the POSIX locks of the connections already open
                lock = cls._open[key] = cls(os.open(path, os.O_RDWR), key)
            lock._refs += 1
        return lock

    def release_ref(self) -> None:
        """Drop a reference; the last one closes the descriptor (after the stores' connections)."""
        with self._registry:
            self._refs -= 1
            if self._refs == 0:
                if self._open.get(self._key) is self:
                    del self._open[self._key]
                os.close(self.fd)

    @contextlib.contextmanager
    def held(self, timeout: float, where: str) -> Iterator[None]:
        """Hold the lock, waiting at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        if not self._thread.acquire(timeout=max(timeout, 0.0)):
            raise StoreLockedError(f"{where} is locked by another writer in this process; wait for it to "
                                   "finish or close it. Nothing was changed.")
        try:
            while True:
                try:
                    fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise StoreLockedError(f"{where} is locked by another process; wait for it to finish "
                                               "or close it. Nothing was changed.") from None
                    time.sleep(0.005)
            try:
                yield
            finally:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            self._thread.release()
