"""CLI literal forget against store size (issue #27 item 8), side by side in one run.

    python bench/bench_forget_cli.py [--sizes 1000,50000] [--reps 3] [--target 0.5]

For each size N a plaintext store of N sessions is built once (the builder of
``bench_forget.py``: N/20 users of 20 sessions, user u0's sessions hold the literals), then
``reps`` times, on a fresh copy of that file, ``traceless forget --db COPY --mode full_purge
--literal L --owner u0`` runs as a real subprocess (interpreter start-up included, the same
at every size) and its wall time is taken; p50 reported. Printed: p50 per size, and the
extra seconds of the largest size over the smallest. Exits 1 when a forget fails or the
extra exceeds ``--target`` (default 0.5 s: issue #27's floor).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_forget import _build  # noqa: E402  (the same store builder)

_TRACELESS = [sys.executable, "-c", "from traceless.cli import main; main()"]


def _one(db: Path, literal: str, receipt: Path) -> float:
    t0 = time.perf_counter()
    res = subprocess.run([*_TRACELESS, "forget", "--db", str(db), "--mode", "full_purge", "--literal", literal,
                          "--owner", "u0", "--no-gate", "--receipt", str(receipt)],
                         capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"forget failed (exit {res.returncode}): {res.stderr.strip().splitlines()[-1:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,50000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--target", type=float, default=0.5, help="max extra seconds of the largest size")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    p50: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            src = Path(tmp) / f"s{n}.db"
            _build(src, n, args.reps, encrypt=False).close()
            users = max(n // 20, 1)
            times = []
            for r in range(args.reps):
                copy = Path(tmp) / f"c{n}-{r}.db"
                shutil.copy(src, copy)
                times.append(_one(copy, f"ZQ{r:07d}-LIME", Path(tmp) / f"r{n}-{r}.json"))
                for f in Path(tmp).glob(f"c{n}-{r}.db*"):
                    f.unlink()
            p50[n] = statistics.median(times)
            print(f"{n:>7} sessions ({users} users, {src.stat().st_size / 1e6:.1f} MB): CLI literal forget "
                  f"p50 {p50[n]:.2f} s  ({', '.join(f'{t:.2f}' for t in times)})")
    extra = p50[sizes[-1]] - p50[sizes[0]]
    print(f"extra at {sizes[-1]} over {sizes[0]}: {extra:+.2f} s (target ≤ {args.target:.2f} s); "
          f"load {os.getloadavg()[0]:.1f}")
    if extra > args.target:
        sys.exit(1)


if __name__ == "__main__":
    main()
