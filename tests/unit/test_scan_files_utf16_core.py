"""The byte scan's one pass (``forget._erasure``): an Aho–Corasick gate over the forms less
their leading NULs, then the exact automaton over the windows around what the gate reports.
Its counts must be ``bytes.count``'s per form, for adjacent, overlapping and repeated copies,
forms with leading NULs (UTF-16BE of ASCII, sparse vectors), across chunk boundaries and the
gate's slices, and in a crowded chunk (counted per form): chunks, slices and the crowding
threshold made tiny here so every path runs on small data."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

from traceless.forget import _erasure, encodings_of, scan_files


def _per_form(data: bytes, forms: list[bytes]) -> list[int]:
    return [data.count(f) for f in forms]


def _random_data(rng: random.Random, forms: list[bytes]) -> bytes:
    parts = []
    for _ in range(rng.randint(0, 40)):
        r = rng.random()
        if r < 0.3:
            parts.append(rng.choice(forms))
        elif r < 0.4:
            parts.append(b"\0" * rng.randint(1, 3))
        else:
            parts.append(bytes(rng.choice([0, 0, 65, 67, 97]) for _ in range(rng.randint(0, 9))))
    return b"".join(parts)


@pytest.mark.parametrize(("chunk", "slice_", "crowded"), [(64, 16, 4), (64, 1 << 18, 1 << 12), (7, 3, 1), (1 << 24, 5, 2)])
@pytest.mark.parametrize("literals", [["CANARY-1"], ["Zürich-7", "abcd"], ["東京-4471", "aCa", "CaC"]])
def test_the_gated_pass_counts_what_bytes_count_does(monkeypatch: pytest.MonkeyPatch, chunk: int, slice_: int,
                                                     crowded: int, literals: list[str]) -> None:
    monkeypatch.setattr(_erasure, "_CHUNK", chunk)
    monkeypatch.setattr(_erasure, "_SLICE", slice_)
    monkeypatch.setattr(_erasure, "_CROWDED", crowded)
    rng = random.Random(7)
    forms = [f for lit in literals for f in encodings_of(lit)]
    forms += [b"\0\0" + forms[0], forms[0]]  # a form with two leading NULs; a repeated form
    for trial in range(200):
        data = _random_data(rng, forms)
        got = _erasure._counts(io.BufferedReader(io.BytesIO(data)), forms) if data else [0] * len(forms)
        assert got == _per_form(data, forms), (trial, data)


def test_more_forms_than_one_gate_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``_BATCH`` forms the gate is split: every batch counted, none dropped."""
    monkeypatch.setattr(_erasure, "_CHUNK", 256)
    rng = random.Random(11)
    forms = [bytes([0] * rng.randint(0, 2)) + rng.randbytes(rng.randint(2, 12)) for _ in range(150)]
    data = b"".join(rng.choice(forms) + rng.randbytes(rng.randint(0, 5)) for _ in range(400))
    assert _erasure._counts(io.BufferedReader(io.BytesIO(data)), forms) == _per_form(data, forms)


def test_both_utf16_forms_are_counted(tmp_path: Path) -> None:
    lit = "IBAN-DE89"
    p = tmp_path / "f"
    p.write_bytes(b"x" + lit.encode("utf-16-le") + b"yy" + lit.encode("utf-16-be") + b"\0" + lit.encode())
    assert scan_files([p], lit) == {str(p): 4}  # LE, BE, the BE copy's NUL + core read as LE too, UTF-8
