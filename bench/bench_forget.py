"""Forget latency against store size (issue #13.6), plaintext and encrypted side by side.

    python bench/bench_forget.py [--sizes 1000,10000,100000] [--reps 5]

For each size N: a store of N sessions (N/20 users of 20 sessions each, so a user's
memory stays the same size while the store grows; hashing embedder) is built once per kind; then `reps` literal forgets (full_purge, each of a different planted literal of
one user) are timed, p50 reported. A plaintext store is rebuilt (VACUUM) after each
forget so no old page keeps the literal: linear in store size. An encrypted store only
re-seals that user's artifacts under a fresh data key and rotates the master key: the
old pages are ciphertext under destroyed keys, so no rewrite is needed. Every forget
must pass its own verification (byte scan included) or the bench exits 1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from traceless.forget import ForgetTarget, forget
from traceless.memory import MemoryStore, MemoryWriter, Session, WriteConfig
from traceless.models import HashingEmbedder


def _build(db: Path | str, n: int, reps: int, encrypt: bool) -> MemoryStore:
    """A store of ``n`` sessions (``n/20`` users of 20 sessions; user u0's sessions hold the
    literals the forgets target); ``db`` is a path or a ``postgresql://`` URL."""
    users = max(n // 20, 1)
    sessions = [Session.model_validate({"user_id": f"u{i % users}", "session_id": f"s{i}", "turns": [
        {"role": "user", "content": f"session {i}: my code is ZQ{i // users:07d}-LIME" if i % users == 0
         else f"session {i}: I moved to city {i % 97} and adopted pet {i % 31}"}]}) for i in range(n)]
    store = MemoryStore(db, encrypt=encrypt)
    MemoryWriter(store, embedder=HashingEmbedder(64), config=WriteConfig(levels=())).write_sessions(sessions)
    return store


def _p50(store: MemoryStore, reps: int) -> float:
    w = MemoryWriter(store, embedder=HashingEmbedder(64), config=WriteConfig(levels=()))
    times = []
    for r in range(reps):
        t0 = time.perf_counter()
        rc = forget(store, ForgetTarget.literal(f"ZQ{r:07d}-LIME", "u0"), "full_purge", writer=w)
        times.append(time.perf_counter() - t0)
        if not (rc.matched and rc.verification.passed):
            sys.exit(f"forget {r} on {store.backend} did not verify: {rc.verification.checks}")
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("TRACELESS_HOME", str(Path(d) / "home"))
        print(f"{'sessions':>9} {'MB':>6} {'plain p50 s':>11} {'enc p50 s':>9} {'plain/enc':>9}")
        for n in (int(x) for x in args.sizes.split(",")):
            plain = _build(Path(d) / f"p{n}.db", n, args.reps, False)
            enc = _build(Path(d) / f"e{n}.db", n, args.reps, True)
            mb = Path(plain.path).stat().st_size / 1e6
            tp, te = _p50(plain, args.reps), _p50(enc, args.reps)
            print(f"{n:9d} {mb:6.1f} {tp:11.3f} {te:9.3f} {tp / te:9.1f}")
            plain.close()
            enc.close()


if __name__ == "__main__":
    main()
