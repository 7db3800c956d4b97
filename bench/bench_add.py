"""`memory add` throughput against store size (issue #13.5), plaintext and encrypted side
by side in one run (issue #14: encryption costs ≤ 30 % of add throughput).

    python bench/bench_add.py [--sizes 1000,10000,100000]

For each size N: one `memory add` of N sessions (2 turns each, 50 users, hashing
embedder, extractive consolidation) into a fresh store, through the public API, timed.
Prints seconds, µs per session, the per-session cost relative to the smallest size (a
linear pipeline stays near 1.0) and encrypted/plaintext. Exits 1 when the encrypted
overhead exceeds 30 % or the per-session cost grows more than 2× from the smallest size.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from traceless.memory import MemoryStore, MemoryWriter, Session, WriteConfig
from traceless.models import HashingEmbedder


def _sessions(n: int) -> list[Session]:
    return [Session.model_validate({"user_id": f"u{i % 50}", "session_id": f"s{i}", "turns": [
        {"role": "user", "content": f"session {i}: I moved to city {i % 97} and adopted pet {i % 31}"},
        {"role": "assistant", "content": "Noted."}]}) for i in range(n)]


def _add(n: int, encrypt: bool, folder: Path) -> float:
    sessions = _sessions(n)
    db = folder / f"{'enc' if encrypt else 'plain'}-{n}.db"
    t0 = time.perf_counter()
    with MemoryStore(db, encrypt=encrypt) as store:
        MemoryWriter(store, embedder=HashingEmbedder(64),
                     config=WriteConfig(levels=(), extractive=True)).write_sessions(sessions)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000")
    sizes = [int(x) for x in ap.parse_args().sizes.split(",")]
    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("TRACELESS_HOME", str(Path(d) / "home"))
        rows, base = [], None
        print(f"{'sessions':>9} {'plain s':>8} {'µs/sess':>8} {'growth':>7} {'enc s':>8} {'enc/plain':>9}")
        for n in sizes:
            plain, enc = _add(n, False, Path(d)), _add(n, True, Path(d))
            per = plain / n * 1e6
            base = base or per
            rows.append((per / base, enc / plain))
            print(f"{n:9d} {plain:8.2f} {per:8.0f} {per / base:7.2f} {enc:8.2f} {enc / plain:9.2f}")
    bad = any(g > 2.0 for g, _ in rows) or any(r > 1.30 for _, r in rows)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
