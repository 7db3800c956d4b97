"""Physical-erasure checks: scan the raw bytes of every file a store wrote."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["encodings_of", "scan_files"]


def encodings_of(literal: str) -> list[bytes]:
    """The byte forms a literal can take on disk: UTF-8, UTF-16LE, UTF-16BE."""
    return [literal.encode("utf-8"), literal.encode("utf-16-le"), literal.encode("utf-16-be")]


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
