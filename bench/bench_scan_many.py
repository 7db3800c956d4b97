"""The byte scan of a large file for many forms (an erasure's rows: thousands of texts and
vectors), by each matcher side by side in one run: the gated automata in the erasure's order of
forms (stop 58), the same with the windows batched sorted (stop 59), Hyperscan, and the choice
``scan_bytes`` makes per file (issue 39).

    python bench/bench_scan_many.py [--mb 512] [--reps 3]

The file (``--mb`` MB, in a temp dir) is laid out as a LanceDB data file is: nine tenths 256-d
float32 vectors, one tenth texts "filler N k about the weather" (every row's head and tail
alike). Two needle sets are searched: 2,000 texts of that form (one user's 500 rows, left out
of the file among rows numbered alike) and the same texts with 2,000 8-byte needles cut from
random floats (a 2-d vector's bytes). Printed per set: seconds (p50 of ``--reps``) of each
matcher and its ratio to the automata in the erasure's order, and the load before and after.
Exits 1 when two matchers' counts differ.

Stop 59, idle (load 1.2 before, 1.4 after), 506 MB: the texts 0.24 s (erasure's order), 0.23 s
(sorted), Hyperscan 4.10 s, the choice 0.33 s; with the 8-byte needles 5.06, 4.87, 4.89 and
3.80 s. This synthetic file does not reproduce the sorted batches' gain measured on a real
LanceDB file of 10^6 CrewAI memories (2.6 → 0.77 s, docs/memory-systems.md): there the texts
sit among ids, scopes and metadata the rarest windows are chosen on.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from traceless.forget import _erasure, scan_bytes


def build(path: Path, mb: int, rng: np.random.Generator) -> list[bytes]:
    """Vectors then texts, in blocks (a data file's column pages), ``mb`` MB in all; returns the
    texts of 500 rows (4 memories each) left out of it: an erased user's, among rows numbered
    alike."""
    rows_per_block = 7_500
    blocks = (mb << 20) // (9 * 2**20 + rows_per_block * 4 * 34) + 1
    held = {int(r) for r in rng.choice(blocks * rows_per_block, 500, replace=False)}
    with open(path, "wb") as f:
        for b in range(blocks):
            f.write(rng.standard_normal(256 * 1000, dtype=np.float32).tobytes() * 9)  # 9 MB of vectors
            rows = range(b * rows_per_block, (b + 1) * rows_per_block)
            f.write("".join(f"filler {r} {k} about the weather" for r in rows if r not in held for k in range(4))
                    .encode())
    return [f"filler {r} {k} about the weather".encode() for r in held for k in range(4)]


def needle_sets(texts: list[bytes], rng: np.random.Generator) -> dict[str, list[bytes]]:
    order = rng.permutation(len(texts))  # the erasure's order: by record id, not by text
    texts = [texts[i] for i in order]
    short = [rng.standard_normal(2, dtype=np.float32).tobytes() for _ in range(2000)]
    return {"2,000 texts": texts, "2,000 texts + 2,000 8-byte": [*texts, *short]}


def timed(fn: Callable[[], list[int]], reps: int) -> tuple[float, list[int]]:
    times, out = [], []
    for _ in range(reps):
        _erasure._PLANS.clear()
        _erasure._gates.cache_clear()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def matchers(path: Path, needles: list[bytes]) -> dict[str, Callable[[], list[int]]]:
    def gated(sort: bool) -> list[int]:
        real = _erasure._gates.__wrapped__

        def unsorted_gates(forms: tuple[bytes, ...], starts: tuple[int, ...], size: int) -> _erasure.Gates:
            return real(forms, starts, size) if sort else _in_order(real, forms, starts, size)

        old = _erasure._gates, _erasure._many_first
        _erasure._gates, _erasure._many_first = unsorted_gates, (lambda fh, forms: False)  # type: ignore[assignment]
        try:
            return scan_bytes([path], needles)[str(path)]
        finally:
            _erasure._gates, _erasure._many_first = old  # type: ignore[assignment]

    def many() -> list[int]:
        old = _erasure._many_first
        _erasure._many_first = lambda fh, forms: True  # type: ignore[assignment]
        try:
            return scan_bytes([path], needles)[str(path)]
        finally:
            _erasure._many_first = old  # type: ignore[assignment]

    return {"automata, erasure's order": lambda: gated(False), "automata, sorted": lambda: gated(True),
            "Hyperscan": many, "scan_bytes' choice": lambda: scan_bytes([path], needles)[str(path)]}


def _in_order(real: Callable[..., _erasure.Gates], forms: tuple[bytes, ...], starts: tuple[int, ...],
              size: int) -> _erasure.Gates:
    """The gates as stop 58 made them: each batch's windows in the forms' order (the module's
    ``sorted`` shadowed by one that keeps the order, for this call only)."""
    setattr(_erasure, "sorted", lambda xs, **_: list(xs))  # noqa: B010 - a global the module reads
    try:
        return real(forms, starts, size)
    finally:
        delattr(_erasure, "sorted")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    print("load before", os.getloadavg())
    rng = np.random.default_rng(39)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.lance"
        held = build(path, args.mb, rng)
        print(f"file: {path.stat().st_size / 2**20:.0f} MB")
        for label, needles in needle_sets(held, rng).items():
            rows = {name: timed(fn, args.reps) for name, fn in matchers(path, needles).items()}
            base = rows["automata, erasure's order"][0]
            print(f"\n{label} ({len(needles)} needles)")
            for name, (secs, counts) in rows.items():
                print(f"  {name:28s} {secs:7.2f} s   {secs / base:5.2f}x")
                failed |= counts != rows["automata, erasure's order"][1]
    print("load after", os.getloadavg())
    if failed:
        print("the matchers' counts differ", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
