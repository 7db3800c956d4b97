"""Physical-erasure checks: scan the raw bytes of every file a store wrote."""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from io import BufferedReader
from pathlib import Path

import numpy as np

__all__ = ["encodings_of", "scan_bytes", "scan_files"]

_CHUNK = 1 << 24
_FEW = 16
"""Up to this many forms a chunk is searched by one regex alternation (it tries every form at a
position whose byte starts one); more (an erasure's vectors: hundreds of 1536-byte needles) by
their 4-byte anchors (``_anchored``)."""
_REGEX_FROM = 6
"""Forms from which one regex pass over a text chunk (no NUL) beats a ``bytes.count`` per form:
the alternation reads ~400 MB/s whatever the count of forms, ``bytes.count`` ~1.7 GB/s a form
(195 MB of LlamaIndex JSON: 2 forms 0.23 vs 0.50 s, 6 forms 0.50 vs 0.50 s, 20 forms 2.36 vs
0.49 s). On binary chunks (NUL bytes: SQLite pages, qdrant's pickles) the alternation is slower
still (a 4 GB qdrant ``storage.sqlite``, 9 forms: 51 s against 15 s counted), so never there."""
_BITS = 20
_MULT = np.uint64(0x9E3779B97F4A7C15)
_W = 8
"""Bytes of an anchor: a form of ``_W`` bytes or more is found by one window of its own."""
_CROWDED = 1 << 16
"""Marked positions per chunk past which the anchors marked most are dropped (``_anchored``)."""
_HOT = 1 << 10
"""Marks of one anchor in a crowded chunk past which its forms are counted one by one."""


def _json_escaped(literal: str, upper: bool) -> bytes:
    out = []
    for c in literal:
        if ord(c) < 128:
            out.append(json.dumps(c)[1:-1])
        else:
            units = c.encode("utf-16-be")
            for i in range(0, len(units), 2):
                h = units[i : i + 2].hex()
                out.append("\\u" + (h.upper() if upper else h))
    return "".join(out).encode("ascii")


def encodings_of(literal: str) -> list[bytes]:
    """The byte forms a literal can take on disk: UTF-8, UTF-16LE, UTF-16BE, and (for a
    non-ASCII literal) JSON's ``\\uXXXX`` escapes in lower and upper hex."""
    forms = [literal.encode("utf-8"), literal.encode("utf-16-le"), literal.encode("utf-16-be")]
    if any(ord(c) >= 128 for c in literal):
        forms += [_json_escaped(literal, False), _json_escaped(literal, True)]
    return list(dict.fromkeys(forms))


def scan_files(files: Iterable[Path], literal: str | Sequence[str]) -> dict[str, int]:
    """Occurrences of ``literal``'s bytes (any encoding above) per file; given several
    literals, the sum of their occurrences, each file read once (not once per literal)."""
    forms = [f for lit in ([literal] if isinstance(literal, str) else literal) for f in encodings_of(lit) if f]
    out: dict[str, int] = {}
    for f in files:
        try:
            with open(f, "rb") as fh:
                out[str(f)] = _count(fh, forms)
        except FileNotFoundError:
            continue
    return out


def scan_bytes(files: Iterable[Path], needles: Sequence[bytes]) -> dict[str, list[int]]:
    """Occurrences of each of ``needles`` (raw bytes: a vector's float32 form) per file, in
    the order given; each file read once, in chunks, as ``scan_files``."""
    forms = [n for n in needles if n]
    if len(forms) != len(needles):
        raise ValueError("scan_bytes: an empty needle matches everywhere; give only non-empty byte strings")
    out: dict[str, list[int]] = {}
    for f in files:
        try:
            with open(f, "rb") as fh:
                out[str(f)] = _counts(fh, forms) if forms else []
        except FileNotFoundError:
            continue
    return out


def _count(fh: BufferedReader, forms: list[bytes]) -> int:
    return sum(_counts(fh, forms))


@functools.lru_cache(maxsize=64)
def _matcher(forms: tuple[bytes, ...]) -> re.Pattern[bytes]:
    """One regex that matches wherever one of ``forms`` occurs (an alternation: one pass over a
    chunk finds whether any does). A form's leading NUL bytes are left out (a UTF-16BE form of
    ASCII starts with one, and NUL is everywhere in a binary file: the regex would try every
    form there); the regex then matches a little more often, never less."""
    heads = {f.lstrip(b"\0") or f for f in forms}
    return re.compile(b"|".join(re.escape(f) for f in sorted(heads, key=lambda f: (-len(f), f))))


def _possible(forms: list[bytes], nul: bool) -> list[int]:
    """Indexes of the forms that can occur in a chunk (``nul``: whether it holds a NUL byte; a
    UTF-16 form of an ASCII character holds one, and a JSON or text file none)."""
    return [i for i, f in enumerate(forms) if nul or b"\0" not in f]


def _hash(words: np.ndarray) -> np.ndarray:
    """An 8-byte word's slot in the anchors' table (multiplicative hash, ``_BITS`` bits)."""
    return (words * _MULT) >> np.uint64(64 - _BITS)


def _windows(form: bytes) -> set[bytes]:
    return {form[k:k + _W] for k in range(min(len(form) - _W, 256) + 1)}


def _anchors(forms: list[bytes]) -> dict[bytes, int]:
    """Each form's anchor offset: of its ``_W``-byte windows (the first 256), the one fewest of
    the other forms share (a text's common words, a sparse vector's zero floats are in most
    rows of a file: never those when another is at hand), then the one of most distinct bytes."""
    shared = Counter(w for f in set(forms) for w in _windows(f))

    def rank(f: bytes, k: int) -> tuple[int, int, int]:
        return shared[f[k:k + _W]], -len(set(f[k:k + _W])), k

    return {f: min(range(min(len(f) - _W, 256) + 1), key=lambda k: rank(f, k)) for f in set(forms)}


_Plan = tuple[dict[bytes, dict[tuple[int, int], dict[bytes, list[int]]]], dict[int, int], np.ndarray]


@functools.lru_cache(maxsize=4)
def _plan(forms: tuple[bytes, ...], idx: tuple[int, ...]) -> _Plan:
    """(anchor window → (offset, length) → form → indexes, index → its anchor's slot, the table
    of slots) of ``forms[i]`` for ``i`` in ``idx``: made once per file set, not per chunk."""
    by_anchor: dict[bytes, dict[tuple[int, int], dict[bytes, list[int]]]] = {}
    offsets = _anchors([forms[i] for i in idx])
    slot: dict[int, int] = {}
    for i in idx:
        f = forms[i]
        k = offsets[f]
        by_anchor.setdefault(f[k:k + _W], {}).setdefault((k, len(f)), {}).setdefault(f, []).append(i)
        slot[i] = int(_hash(np.frombuffer(f[k:k + _W], dtype="<u8"))[0])
    table = np.zeros(1 << _BITS, dtype=bool)
    table[_hash(np.frombuffer(b"".join(by_anchor), dtype="<u8"))] = True
    return by_anchor, slot, table


def _anchored(buf: bytearray, end: int, forms: list[bytes], idx: list[int],
              ) -> tuple[dict[int, list[int]], list[int]] | None:
    """Every start (below ``end``) of every ``forms[i]`` (``i`` in ``idx``, each of ``_W`` bytes or
    more) in ``buf``: each 8-byte word at each alignment looked up at once (NumPy) in a table of
    the forms' anchors (``_anchors``), and only the positions it marks compared in Python, once
    per (anchor offset, length) of the forms anchored so. Past ``_CROWDED`` marked positions an
    anchor marked more than ``_HOT`` times (a window most rows share) is dropped: its forms are
    returned apart, to be counted one by one; None when still crowded."""
    by_anchor, slot, table = _plan(tuple(forms), tuple(idx))
    slots, starts = [], []
    for a in range(_W):
        words = np.frombuffer(buf, dtype="<u8", count=max(0, (end - a) // _W), offset=a)
        h = _hash(words)
        m = np.flatnonzero(table[h])
        slots.append(h[m])
        starts.append(m * _W + a)
        del words, h  # the view released: ``buf`` is written again by the caller
    marked, where = np.concatenate(slots), np.concatenate(starts)
    hot: set[int] = set()
    if len(where) > _CROWDED:
        values, counts = np.unique(marked, return_counts=True)
        hot = set(values[counts > _HOT].tolist())
        where = where[~np.isin(marked, values[counts > _HOT])]
        if len(where) > _CROWDED:
            return None
    out: dict[int, list[int]] = {i: [] for i in idx if slot[i] not in hot}
    for q in where.tolist():
        for (k, size), same in by_anchor.get(bytes(buf[q:q + _W]), {}).items():
            p = q - k
            for i in same.get(bytes(buf[p:p + size]), ()) if p >= 0 and p + size <= end else ():
                out[i].append(p)
    return out, [i for i in idx if slot[i] in hot]


def _greedy(starts: list[int], size: int, limit: int) -> int:
    """What ``bytes.count`` counts from these starts: non-overlapping, leftmost first, ending by ``limit``."""
    n, free = 0, 0
    for p in sorted(starts):
        if p + size > limit:
            break
        if p >= free:
            n, free = n + 1, p + size
    return n


def _chunk_counts(buf: bytearray, have: int, end: int, forms: list[bytes], live: list[int], n: list[int], *,
                  text: bool) -> None:
    """Add to ``n`` each live form's occurrences in ``buf[:end]`` not inside ``buf[:have]`` (the
    previous chunk's tail, counted with it): few forms counted one by one, in a ``text`` chunk
    (no NUL byte) after a regex of all found one; many, found by their anchors (``_anchored``),
    a short one counted."""
    if len(live) <= _FEW:
        if text and len(live) >= _REGEX_FROM and _matcher(tuple(forms[i] for i in live)).search(buf, 0, end) is None:
            return
        for i in live:
            n[i] += buf.count(forms[i], 0, end) - buf.count(forms[i], 0, have)
        return
    long = [i for i in live if len(forms[i]) >= _W]
    got = _anchored(buf, end, forms, long)
    found, hot = got if got is not None else ({}, long)
    for i in [i for i in live if len(forms[i]) < _W] + hot:
        n[i] += buf.count(forms[i], 0, end) - buf.count(forms[i], 0, have)
    for i, starts in found.items():
        if starts:
            n[i] += _greedy(starts, len(forms[i]), end) - _greedy(starts, len(forms[i]), have)


def _counts(fh: BufferedReader, forms: list[bytes]) -> list[int]:
    """Occurrences of ``forms`` in a file read in chunks (a store of 10^6 sessions is a
    1 GB file; not mapped: another connection may truncate the WAL meanwhile). Each chunk is
    searched with the previous one's last bytes in front, so a copy across the boundary is
    found once. One buffer is reused (read into, tail moved to its front): no chunk is copied.

    One pass per chunk for all forms, not one per form: a chunk without a NUL byte skips the
    forms that hold one (a UTF-16 form of ASCII), then ``_chunk_counts``; the counts are
    exactly those of ``bytes.count`` per form (tested)."""
    keep = max(len(f) for f in forms) - 1
    buf = bytearray(keep + _CHUNK)
    view = memoryview(buf)
    n, have = [0] * len(forms), 0  # ``have``: bytes of the previous chunk's tail at the front of ``buf``
    cores = _shared_cores(forms)
    while got := fh.readinto(view[have:]):
        end = have + got
        nul = buf.find(b"\0", 0, end) >= 0
        live = _possible(forms, nul)
        if nul:  # neither form of a pair is here when their core is not
            absent = {i for core, pair in cores if buf.find(core, 0, end) < 0 for i in pair}
            live = [i for i in live if i not in absent]
        _chunk_counts(buf, have, end, forms, live, n, text=not nul)
        tail = min(keep, end)
        buf[:tail] = buf[end - tail:end]
        have = tail
    return n


def _shared_cores(forms: list[bytes]) -> list[tuple[bytes, tuple[int, int]]]:
    """Pairs of forms that hold one common core: an ASCII literal's UTF-16LE form less its
    last byte is its UTF-16BE form less its first. A chunk without the core holds neither
    form: one search for two (a third of the scan of an ASCII literal's three forms)."""
    out = []
    for i, le in enumerate(forms):
        for j, be in enumerate(forms):
            if i != j and len(le) == len(be) > 2 and le[:-1] == be[1:] and le[-1:] == be[:1] == b"\0":
                out.append((le[:-1], (i, j)))
    return out
