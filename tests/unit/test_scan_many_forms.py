"""Past ``_BATCH`` distinct forms (an erasure's rows: thousands of vectors and texts) the byte
scan searches with Hyperscan on worker threads (``_many_counts``): exactly ``bytes.count`` per
form, for forms across every chunk end, repeated, overlapping themselves, holding NUL bytes,
one byte long and absent; and a crowded file goes back to the gated automata, same counts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from traceless.forget import _erasure, scan_bytes


def _planted(rng: random.Random, chunk: int) -> tuple[bytes, list[bytes]]:
    vecs = [rng.randbytes(rng.choice((8, 40, 1536))) for _ in range(120)]
    texts = [f"filler {k} 2 about the weather".encode() for k in range(60)]  # heads and tails shared
    needles = [*vecs, *texts, b"abab" * 3, b"q", vecs[0], b"\x00\x00\x00ab", texts[3][:9]]
    data = bytearray(rng.randbytes(9 * chunk + 333))
    for k in range(40):  # some across a chunk's end (the form longer than the gap to it)
        form = rng.choice(needles[:180])
        pos = rng.choice((rng.randrange(len(data) - 1600), (k % 9 + 1) * chunk - len(form) // 2))
        data[pos:pos + len(form)] = form
    data[700:713] = b"abababababab" + b"a"  # overlapping self-matches
    data[900:905] = b"\x00\x00\x00ab"
    return bytes(data), needles


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_many_forms_count_what_a_count_per_form_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     seed: int) -> None:
    chunk = 4096
    monkeypatch.setattr(_erasure, "_MANY_CHUNK", chunk)  # 10 chunks, several on the workers at once
    raw, needles = _planted(random.Random(seed), chunk)
    f = tmp_path / "data.lance"
    f.write_bytes(raw)
    expected = [raw.count(x) for x in needles]
    assert sum(expected[:180]) >= 15 and expected[-5] == 1  # the planted copies (the overlapping run counts once, as bytes.count)

    def automata(*_: object) -> list[int]:
        raise AssertionError("the many-forms search gave the file back")

    with monkeypatch.context() as m:
        m.setattr(_erasure, "_gated_counts", automata)
        m.setattr(_erasure, "_many_first", lambda fh, forms: True)
        assert scan_bytes([f], needles) == {str(f): expected}
    with monkeypatch.context() as m:  # the automata alone count the same
        m.setattr(_erasure, "_many", lambda _forms: None)
        assert scan_bytes([f], needles) == {str(f): expected}


def test_a_crowded_file_is_counted_by_the_automata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_erasure, "_MANY_CHUNK", 1 << 17)
    rng = random.Random(7)
    raw = bytes(1 << 19) + rng.randbytes(5000)
    needles = [*(rng.randbytes(16) for _ in range(100)), bytes(8)]  # zeros: 2^17 matches a chunk
    f = tmp_path / "zeros.lance"
    f.write_bytes(raw)
    monkeypatch.setattr(_erasure, "_many_first", lambda fh, forms: True)
    calls = []
    gated = _erasure._gated_counts
    monkeypatch.setattr(_erasure, "_gated_counts", lambda fh, forms: calls.append(1) or gated(fh, forms))
    assert scan_bytes([f], needles) == {str(f): [raw.count(x) for x in needles]}
    assert calls == [1]


def test_each_large_file_is_searched_by_the_faster_on_its_samples(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``_many_first``: below ``_PLAN_FROM`` bytes the automata; a file that large by whichever
    searched its spread samples faster, timed for each file; both counts exact."""
    rng = random.Random(11)
    monkeypatch.setattr(_erasure, "_PLAN_FROM", 1 << 16)
    raw, needles = _planted(rng, 1 << 15)
    small, large = tmp_path / "small.bin", tmp_path / "large.bin"
    small.write_bytes(raw[:1000])
    large.write_bytes(raw)
    times = {"many": 1.0, "gated": 2.0}
    monkeypatch.setattr(_erasure, "_took_many", lambda db, trial: times["many"])
    monkeypatch.setattr(_erasure, "_took", lambda gates, trial: times["gated"])
    forms = tuple(needles)
    for fast, slow, want in (("many", "gated", True), ("gated", "many", False), ("many", "gated", True)):
        times[fast], times[slow] = 1.0, 2.0
        with open(small, "rb") as fh:
            assert _erasure._many_first(fh, forms) is False
        with open(large, "rb") as fh:
            assert _erasure._many_first(fh, forms) is want
        assert scan_bytes([small, large], needles) == {str(small): [raw[:1000].count(x) for x in needles],
                                                      str(large): [raw.count(x) for x in needles]}


def test_a_search_projected_quick_by_hyperscan_is_taken_without_planning_the_automata(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hyperscan's samples project the whole file's search at or under ``_HS_SURE`` seconds: it
    is taken, and the automata (whose plan alone took longer) are not planned to compare; over
    it, they are; both counts exact."""
    rng = random.Random(12)
    monkeypatch.setattr(_erasure, "_PLAN_FROM", 1 << 16)
    raw, needles = _planted(rng, 1 << 15)
    large = tmp_path / "large.bin"
    large.write_bytes(raw)
    planned: list[int] = []
    plan = _erasure._plan
    monkeypatch.setattr(_erasure, "_plan", lambda forms, view: planned.append(1) or plan(forms, view))
    monkeypatch.setattr(_erasure, "_took", lambda gates, trial: 0.0)  # the automata quicker on the samples
    share = len(raw) / _erasure._SPREAD  # the samples: _PIECES pieces of _SPREAD bytes together
    for took, want in ((0.9 * _erasure._HS_SURE / share, True), (1.1 * _erasure._HS_SURE / share, False)):
        monkeypatch.setattr(_erasure, "_took_many", lambda db, trial, t=took: t)
        planned.clear()
        with open(large, "rb") as fh:
            assert _erasure._many_first(fh, tuple(needles)) is want
        assert planned == ([] if want else [1])
        assert scan_bytes([large], needles) == {str(large): [raw.count(x) for x in needles]}


def test_a_few_forms_on_a_large_file_are_searched_by_the_matcher_its_samples_chose(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three forms (not past ``_BATCH``) over a large file: Hyperscan where the samples chose it
    (two float32 vectors that are mostly zeros took the automata 8.8 s over a 1.2 GB file of such
    vectors and Hyperscan 0.6 s), else the automata; both counts exact."""
    rng = random.Random(13)
    monkeypatch.setattr(_erasure, "_PLAN_FROM", 1 << 16)
    raw, needles = _planted(rng, 1 << 15)
    large = tmp_path / "large.bin"
    large.write_bytes(raw)
    few = [needles[0], needles[1], needles[-3]]
    calls: list[int] = []
    many = _erasure._many_counts
    monkeypatch.setattr(_erasure, "_many_counts", lambda fh, forms, db: calls.append(len(forms)) or many(fh, forms, db))
    for chosen, used in ((True, [3]), (False, [])):
        monkeypatch.setattr(_erasure, "_many_first", lambda fh, forms, c=chosen: c)
        calls.clear()
        assert scan_bytes([large], few) == {str(large): [raw.count(x) for x in few]}
        assert calls == used
