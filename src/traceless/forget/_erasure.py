"""Physical-erasure checks: scan the raw bytes of every file a store wrote."""

from __future__ import annotations

import json
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
    """The occurrences of ``forms`` in a file, summed. A literal's UTF-16LE and UTF-16BE forms
    whose high bytes are zero (ASCII, Latin-1: ``C\\0A\\0…Y\\0`` and ``\\0C\\0A…\\0Y``) are
    searched as one (their shared core), each hit told LE and/or BE by its neighbours: one pass
    fewer over the file, the same count."""
    cores = [f[:-1] for f in forms if f[-1:] == b"\0" and len(f) > 2 and b"\0" + f[:-1] in forms]
    if not cores:
        return sum(_counts(fh, forms))
    paired = {c + b"\0" for c in cores} | {b"\0" + c for c in cores}
    return _count_cores(fh, [f for f in forms if f not in paired], cores)


def _count_cores(fh: BufferedReader, forms: list[bytes], cores: list[bytes]) -> int:
    """``_counts`` summed, with each of ``cores`` standing for its UTF-16LE (core + NUL) and BE
    (NUL + core) forms. The tail kept between chunks holds a whole form and one byte more, so a
    core's neighbours are always read; a form ending inside the tail was counted with the
    previous chunk."""
    keep = max([len(f) for f in forms] + [len(c) + 2 for c in cores])
    buf = bytearray(keep + _CHUNK)
    view = memoryview(buf)
    n, have = 0, 0
    while got := fh.readinto(view[have:]):
        end = have + got
        for f in forms:
            n += buf.count(f, 0, end) - buf.count(f, 0, have)
        for c in cores:
            size = len(c)
            p = buf.find(c, 0, end)
            while p >= 0:
                if p + size < end and buf[p + size] == 0 and p + size + 1 > have:  # LE: core + NUL
                    n += 1
                if p >= 1 and buf[p - 1] == 0 and p + size > have:  # BE: NUL + core
                    n += 1
                p = buf.find(c, p + 1, end)
        tail = min(keep, end)
        buf[:tail] = buf[end - tail:end]
        have = tail
    return n


def _counts(fh: BufferedReader, forms: list[bytes]) -> list[int]:
    """Occurrences of ``forms`` in a file read in chunks (a store of 10^6 sessions is a
    1 GB file; not mapped: another connection may truncate the WAL meanwhile). Each chunk is
    searched with the previous one's last bytes in front, so a copy across the boundary is
    found once. One buffer is reused (read into, tail moved to its front): no chunk is copied."""
    keep = max(len(f) for f in forms) - 1
    buf = bytearray(keep + _CHUNK)
    view = memoryview(buf)
    n, have = [0] * len(forms), 0  # ``have``: bytes of the previous chunk's tail at the front of ``buf``
    cores = _shared_cores(forms)
    while got := fh.readinto(view[have:]):
        end = have + got
        absent = {i for core, pair in cores if buf.find(core, 0, end) < 0 for i in pair}  # neither form is here
        # a form inside the tail alone was counted with the previous chunk
        for i, f in enumerate(forms):
            if i not in absent:
                n[i] += buf.count(f, 0, end) - buf.count(f, 0, have)
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
