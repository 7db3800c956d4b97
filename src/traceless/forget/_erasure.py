"""Physical-erasure checks: scan the raw bytes of every file a store wrote."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from io import BufferedReader
from pathlib import Path

__all__ = ["encodings_of", "scan_bytes", "scan_files"]

_CHUNK = 1 << 24


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
    """One regex for all ``forms`` (an alternation: one pass over a chunk finds whether any occurs)."""
    return re.compile(b"|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))


def _possible(forms: list[bytes], nul: bool) -> list[int]:
    """Indexes of the forms that can occur in a chunk (``nul``: whether it holds a NUL byte; a
    UTF-16 form of an ASCII character holds one, and a JSON or text file none)."""
    return [i for i, f in enumerate(forms) if nul or b"\0" not in f]


def _counts(fh: BufferedReader, forms: list[bytes]) -> list[int]:
    """Occurrences of ``forms`` in a file read in chunks (a store of 10^6 sessions is a
    1 GB file; not mapped: another connection may truncate the WAL meanwhile). Each chunk is
    searched with the previous one's last bytes in front, so a copy across the boundary is
    found once. One buffer is reused (read into, tail moved to its front): no chunk is copied.

    One pass per chunk for all forms: a chunk without a NUL byte skips the forms that hold one,
    and one regex alternation of the rest tells whether any occurs; only a chunk where one does
    is counted form by form (``bytes.count``: the counts are exactly those of a count per form)."""
    keep = max(len(f) for f in forms) - 1
    buf = bytearray(keep + _CHUNK)
    view = memoryview(buf)
    n, have = [0] * len(forms), 0  # ``have``: bytes of the previous chunk's tail at the front of ``buf``
    while got := fh.readinto(view[have:]):
        end = have + got
        live = _possible(forms, buf.find(b"\0", 0, end) >= 0)
        if len(live) > 1 and _matcher(tuple(forms[i] for i in live)).search(buf, 0, end) is None:
            live = []
        # a form inside the tail alone was counted with the previous chunk
        for i in live:
            n[i] += buf.count(forms[i], 0, end) - buf.count(forms[i], 0, have)
        tail = min(keep, end)
        buf[:tail] = buf[end - tail:end]
        have = tail
    return n
