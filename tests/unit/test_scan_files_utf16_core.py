"""The byte scan's one pass (``forget._erasure``): an Aho–Corasick gate over a window of each form
(where the file's first bytes hold its 3 bytes least, never a NUL first), then the exact automaton over the windows around what the gate reports.
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


@pytest.mark.parametrize("gating", ["small file", "heads", "rarest"])
@pytest.mark.parametrize(("chunk", "slice_", "crowded"), [(64, 16, 4), (64, 1 << 18, 1 << 12), (7, 3, 1), (1 << 24, 5, 2)])
@pytest.mark.parametrize("literals", [["CANARY-1"], ["Zürich-7", "abcd"], ["東京-4471", "aCa", "CaC"]])
def test_the_gated_pass_counts_what_bytes_count_does(monkeypatch: pytest.MonkeyPatch, chunk: int, slice_: int,  # noqa: PLR0913
                                                     crowded: int, literals: list[str], gating: str) -> None:
    """Every way ``_plan`` can gate, forced: a file under ``_PLAN_FROM`` bytes (the forms' heads);
    of a bigger one (here, 8 bytes) the heads' gates or the windows chosen on its first bytes."""
    monkeypatch.setattr(_erasure, "_CHUNK", chunk)
    monkeypatch.setattr(_erasure, "_PLAN_FROM", 1 << 20 if gating == "small file" else 8)
    monkeypatch.setattr(_erasure, "_SAMPLE", 8)
    sign = -1 if gating == "rarest" else 1  # the gates with the latest window start, or the earliest
    monkeypatch.setattr(_erasure, "_took", lambda g, trial: sign * max(x[3] for x in g))
    monkeypatch.setattr(_erasure, "_SLICE", slice_)
    monkeypatch.setattr(_erasure, "_CROWDED", crowded)
    rng = random.Random(7)
    forms = [f for lit in literals for f in encodings_of(lit)]
    forms += [b"\0\0" + forms[0], forms[0]]  # a form with two leading NULs; a repeated form
    for trial in range(200):
        data = _random_data(rng, forms)
        _erasure._PLANS.clear()  # each trial's windows chosen on its own bytes
        got = _erasure._counts(io.BufferedReader(io.BytesIO(data)), forms) if data else [0] * len(forms)
        assert got == _per_form(data, forms), (trial, data)


@pytest.mark.parametrize("gated", ["batched", "whole"])
def test_more_forms_than_one_gate_holds(monkeypatch: pytest.MonkeyPatch, gated: str) -> None:
    """Past ``_BATCH`` forms the gate is split, or one gate holds every window (``_plan`` keeps
    the faster on the first bytes; each is forced here): every form counted, none dropped."""
    monkeypatch.setattr(_erasure, "_CHUNK", 256)
    monkeypatch.setattr(_erasure, "_PLAN_FROM", 64)
    monkeypatch.setattr(_erasure, "_SAMPLE", 64)
    monkeypatch.setattr(_erasure, "_PLANS", {})
    monkeypatch.setattr(_erasure, "_took", lambda g, trial: len(g) if gated == "whole" else -len(g))
    rng = random.Random(11)
    forms = [bytes([0] * rng.randint(0, 2)) + rng.randbytes(rng.randint(2, 12)) for _ in range(150)]
    data = b"".join(rng.choice(forms) + rng.randbytes(rng.randint(0, 5)) for _ in range(400))
    assert _erasure._counts(io.BufferedReader(io.BytesIO(data)), forms) == _per_form(data, forms)
    assert len(next(iter(_erasure._PLANS.values()))) == (1 if gated == "whole" else 3)


def test_both_utf16_forms_are_counted(tmp_path: Path) -> None:
    lit = "IBAN-DE89"
    p = tmp_path / "f"
    p.write_bytes(b"x" + lit.encode("utf-16-le") + b"yy" + lit.encode("utf-16-be") + b"\0" + lit.encode())
    assert scan_files([p], lit) == {str(p): 4}  # LE, BE, the BE copy's NUL + core read as LE too, UTF-8


def _starts(data: bytes, forms: list[bytes]) -> list[int]:
    """Every start of every distinct form (overlapping ones too), by brute force."""
    return sorted(i for f in set(forms) for i in range(len(data)) if data.startswith(f, i))


@pytest.mark.parametrize("gating", ["heads", "rarest"])
@pytest.mark.parametrize(("slice_", "crowded"), [(16, 4), (1 << 18, 1 << 12), (3, 1)])
@pytest.mark.parametrize("literals", [["CANARY-1"], ["Zürich-7", "abcd"], ["東京-4471", "aCa", "CaC"]])
def test_occurrences_are_every_start_of_every_form(monkeypatch: pytest.MonkeyPatch, slice_: int, crowded: int,
                                                   literals: list[str], gating: str) -> None:
    """``occurrences`` (mem0's points searched as the byte scan searches a file) gives every
    start of every form, overlapping and repeated ones, through every way of gating and the
    crowded path (the exact automaton over all the bytes)."""
    monkeypatch.setattr(_erasure, "_SAMPLE", 8)
    sign = -1 if gating == "rarest" else 1
    monkeypatch.setattr(_erasure, "_took", lambda g, trial: sign * max(x[3] for x in g))
    monkeypatch.setattr(_erasure, "_SLICE", slice_)
    monkeypatch.setattr(_erasure, "_CROWDED", crowded)
    rng = random.Random(5)
    forms = [f for lit in literals for f in encodings_of(lit)]
    forms += [b"\0\0" + forms[0], forms[0], forms[0][:3]]  # leading NULs, a repeat, a prefix of another
    for trial in range(150):
        data = _random_data(rng, forms)
        _erasure._PLANS.clear()
        assert sorted(_erasure.occurrences(data, forms)) == _starts(data, forms), (trial, data)
    assert _erasure.occurrences(b"", forms) == [] and _erasure.occurrences(b"abc", []) == []
