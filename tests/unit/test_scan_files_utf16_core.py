"""Issue 39: ``scan_files`` searches a literal's UTF-16LE and UTF-16BE forms as one (their
shared core, each hit told by its neighbours). Its counts must be the per-form counts, across
chunk boundaries (chunks of 64 bytes here) and for adjacent and overlapping copies."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

from traceless.forget import _erasure, encodings_of, scan_files


@pytest.mark.parametrize("literal", ["CANARY-1", "Zürich-7", "東京-4471", "abcd"])
def test_the_core_search_counts_every_form(monkeypatch: pytest.MonkeyPatch, literal: str) -> None:
    monkeypatch.setattr(_erasure, "_CHUNK", 64)
    rng = random.Random(7)
    forms = encodings_of(literal)
    for trial in range(300):
        parts = []
        for _ in range(rng.randint(0, 40)):
            r = rng.random()
            if r < 0.3:
                parts.append(rng.choice(forms))
            elif r < 0.4:
                parts.append(b"\0")
            else:
                parts.append(bytes(rng.choice([0, 0, 65, 67]) for _ in range(rng.randint(0, 9))))
        data = b"".join(parts)
        per_form = sum(_erasure._counts(io.BufferedReader(io.BytesIO(data)), forms))
        assert _erasure._count(io.BufferedReader(io.BytesIO(data)), forms) == per_form, (trial, data)


def test_both_utf16_forms_are_counted(tmp_path: Path) -> None:
    lit = "IBAN-DE89"
    p = tmp_path / "f"
    p.write_bytes(b"x" + lit.encode("utf-16-le") + b"yy" + lit.encode("utf-16-be") + b"\0" + lit.encode())
    assert scan_files([p], lit) == {str(p): 4}  # LE, BE, the BE copy's NUL + core read as LE too, UTF-8
