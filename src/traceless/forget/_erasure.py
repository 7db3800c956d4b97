"""Physical-erasure checks: scan the raw bytes of every file a store wrote."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

__all__ = ["encodings_of", "scan_files"]


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


def scan_files(files: Iterable[Path], literal: str) -> dict[str, int]:
    """Occurrences of ``literal``'s bytes (any encoding above) per file."""
    forms = [f for f in encodings_of(literal) if f]
    out: dict[str, int] = {}
    for f in files:
        try:
            data = f.read_bytes()
        except FileNotFoundError:
            continue
        out[str(f)] = sum(data.count(form) for form in forms)
    return out
