"""Forget latency against store size (issue #13.6): plaintext scrub, plaintext VACUUM and
encrypted side by side in one run.

    python bench/bench_forget.py [--sizes 1000,10000,100000] [--reps 5] [--keep DIR] [--plot PNG]

For each size N: a store of N sessions (N/20 users of 20 sessions each, so a user's memory
stays the same size while the store grows; hashing embedder) is built once with the bulk
path (``--keep DIR`` reuses it across runs). Each plaintext path works on its own copy of
the same file: *scrub* (the default store: the forget rewrites the pages it touched with
their free space zeroed) and *vacuum* (``scrub=False``: every forget rebuilds the file, the
behaviour before #13.6). An encrypted store is built afresh in every run (its forgets
destroy the master key a kept copy would need). On each, ``reps`` literal
forgets (full_purge, a different planted literal of user u0 each) and ``reps`` user forgets
(full_purge of users u1, u2, ...) are timed; p50 reported. ``scan s`` is one byte scan of
the plaintext files (part of every plaintext literal forget's verification: linear in the
file). Every forget must pass its own verification (byte scan included) or the bench exits 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from traceless.forget import ForgetTarget, forget, scan_files
from traceless.memory import MemoryStore, MemoryWriter, Session, WriteConfig
from traceless.models import HashingEmbedder

PATHS = ("scrub", "vacuum", "encrypted")


def _sessions(n: int) -> list[Session]:
    users = max(n // 20, 1)
    return [Session.model_validate({"user_id": f"u{i % users}", "session_id": f"s{i}", "turns": [
        {"role": "user", "content": f"session {i}: my code is ZQ{i // users:07d}-LIME" if i % users == 0
         else f"session {i}: I moved to city {i % 97} and adopted pet {i % 31}"}]}) for i in range(n)]


def _writer(store: MemoryStore) -> MemoryWriter:
    return MemoryWriter(store, embedder=HashingEmbedder(64), config=WriteConfig(levels=()))


def _build(db: Path | str, n: int, reps: int, encrypt: bool) -> MemoryStore:
    """A store of ``n`` sessions (``n/20`` users of 20 sessions; user u0's sessions hold the
    literals the literal forgets target); ``db`` is a path or a ``postgresql://`` URL.
    (``reps`` is kept for bench_store.py, which shares this builder.)"""
    store, sessions = MemoryStore(db, encrypt=encrypt), _sessions(n)
    w = _writer(store)
    for at in range(0, n, 50_000):  # bulk path, in slices: 10^6 sessions do not fit one transaction's RAM
        w.write_sessions(sessions[at:at + 50_000])
    return store


def _p50(store: MemoryStore, reps: int, kind: str = "literal") -> float:
    w, times = _writer(store), []
    for r in range(reps):
        target = ForgetTarget.literal(f"ZQ{r:07d}-LIME", "u0") if kind == "literal" else ForgetTarget.user(f"u{r + 1}")
        t0 = time.perf_counter()
        rc = forget(store, target, "full_purge", writer=w)
        times.append(time.perf_counter() - t0)
        if not (rc.matched and rc.verification.passed):
            sys.exit(f"{kind} forget {r} on {store.backend} did not verify: {rc.verification.checks}")
    return statistics.median(times)


def _base(keep: Path, n: int) -> Path:
    """The built plaintext store of ``n`` sessions under ``keep`` (built once, then reused)."""
    db = keep / f"p{n}.db"
    if not db.exists():
        t0 = time.perf_counter()
        _build(db, n, 0, False).close()
        print(f"# built {db.name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return db


def _measure(keep: Path, work: Path, n: int, reps: int, paths: list[str]) -> dict[str, float]:
    row: dict[str, float] = {f"{p} {k}": float("nan") for p in PATHS for k in ("literal", "user")}
    for path in paths:
        db = work / f"{path}.db"
        for f in work.glob(f"{path}.db*"):
            f.unlink()
        if path == "encrypted":  # built afresh: a forget destroys the master key a copy would share
            t0 = time.perf_counter()
            _build(db, n, 0, True).close()
            print(f"# built {path} {n}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        else:
            shutil.copyfile(_base(keep, n), db)
        with MemoryStore(db, scrub=path != "vacuum") as store:
            if path != "encrypted":
                row["MB"] = db.stat().st_size / 1e6
                t0 = time.perf_counter()
                scan_files(store.files(), "ZQ9999999-LIME")
                row["scan"] = time.perf_counter() - t0
            row[f"{path} literal"] = _p50(store, reps, "literal")
            row[f"{path} user"] = _p50(store, reps, "user")
    return row


def _plot(rows: dict[int, dict[str, float]], png: Path, load: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    sizes = sorted(rows)
    for path, style in zip(PATHS, ("o-", "s--", "^:"), strict=True):
        for kind, alpha in (("literal", 1.0), ("user", 0.55)):
            pts = [(n, rows[n][f"{path} {kind}"]) for n in sizes if rows[n][f"{path} {kind}"] == rows[n][f"{path} {kind}"]]
            ax.plot(*zip(*pts, strict=True), style, alpha=alpha, label=f"{path}, {kind}")
    ax.plot(sizes, [rows[n]["scan"] for n in sizes], "k-", lw=0.8, alpha=0.5, label="byte scan of the files (inside every literal forget)")
    ax.axhline(0.5, color="grey", lw=0.8)
    ax.set(xscale="log", yscale="log", xlabel="sessions in the store", ylabel="forget p50 (s)",
           title=f"Forget latency against store size (2 cores, load {load})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="folder that keeps the built stores (and their keys) across runs")
    ap.add_argument("--plot", type=Path, help="write the curve as a PNG here")
    ap.add_argument("--paths", default=",".join(PATHS), help="a subset of scrub,vacuum,encrypted (the largest "
                    "sizes may only fit the scrub path in the time at hand)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        keep = args.keep or Path(d) / "keep"
        keep.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("TRACELESS_HOME", str(keep / "home"))
        work = Path(d) / "work"
        work.mkdir()
        cols = [f"{p} {k}" for k in ("literal", "user") for p in PATHS]
        print(f"{'sessions':>9} {'MB':>7} {'scan s':>7} " + " ".join(f"{c:>16}" for c in cols)
              + f" {'vac/scrub lit':>13} {'vac/scrub user':>14}", flush=True)
        rows: dict[int, dict[str, float]] = {}
        for n in (int(x) for x in args.sizes.split(",")):
            r = rows[n] = _measure(keep, work, n, args.reps, args.paths.split(","))
            print(f"{n:9d} {r['MB']:7.1f} {r['scan']:7.3f} " + " ".join(f"{r[c]:16.3f}" for c in cols)
                  + f" {r['vacuum literal'] / r['scrub literal']:13.1f} {r['vacuum user'] / r['scrub user']:14.1f}",
                  flush=True)
        load = "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
        print(f"# load average at the end: {load}")
        if args.plot:
            _plot(rows, args.plot, load.split()[1])


if __name__ == "__main__":
    main()
