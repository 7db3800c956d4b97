"""`memory add` throughput against store size (issue #13.5), plaintext and encrypted side
by side in one run (issue #14: encryption costs ≤ 30 % of add throughput), and the same
curve with the all-MiniLM-L6-v2 embedder.

    python bench/bench_add.py [--sizes 1000,10000,100000] [--minilm-sizes 1000,10000,30000]
                              [--before REF] [--plot docs/img/add_curve.png]

For each size N: one `memory add` of N sessions (2 turns each, 50 users, extractive
consolidation) into a fresh store, through the public API, timed in a fresh child process
(the embedder is loaded before the clock starts). Hashing embedder: plaintext and
encrypted; MiniLM: plaintext (its cost is the embedding). Prints seconds, µs per session,
the per-session cost relative to the smallest size (a linear pipeline stays near 1.0) and
encrypted/plaintext, and the child's CPU time (user+sys: less sensitive to machine load
than wall time); ``--plot`` draws both curves into a PNG.

``--before REF`` also runs the hashing sizes on an older commit (checked out in a temporary
``git worktree``, same interpreter, runs interleaved) and prints the before/after ratios of
wall time and CPU time (plaintext) and of wall time (encrypted); the
two trees must store the same artifacts and lineage (compared row by row; ``created_at``
and the random keyed digests of an encrypted store excluded), else the differing rows are
printed and the comparison is void.

Exits 1 when a per-session cost grows more than 2× from the smallest size, the encrypted
overhead exceeds 30 %, 10^5 hashing sessions take over 60 s, or the trees' rows differ.
``TRACELESS_NUM_THREADS`` sets MiniLM's torch threads (default: every CPU).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
USERS = 50
FLOOR_S = 60.0
"""Issue #13.5: 10^5 sessions with the hashing embedder in at most this many seconds."""


def _sessions(n: int) -> list[Any]:
    from traceless.memory import Session

    return [Session.model_validate({"user_id": f"u{i % USERS}", "session_id": f"s{i}", "turns": [
        {"role": "user", "content": f"session {i}: I moved to city {i % 97} and adopted pet {i % 31}"},
        {"role": "assistant", "content": "Noted."}]}) for i in range(n)]


def _embedder(name: str) -> Any:
    if name == "hashing":
        from traceless.models import HashingEmbedder

        return HashingEmbedder(64)
    import torch

    torch.set_num_threads(int(os.environ.get("TRACELESS_NUM_THREADS") or 0) or os.cpu_count() or 1)
    from traceless.models import load_embedder

    emb = load_embedder("all-MiniLM-L6-v2")
    emb.embed(["warm up"])
    return emb


def _rows(db: Path, out: Path) -> None:
    """One line per stored artifact and lineage edge: its key and a hash of its content (read
    through the public API, so an encrypted store is compared decrypted)."""
    from traceless.memory import MemoryStore

    def h(obj: Any) -> str:
        return hashlib.sha256(json.dumps(obj, sort_keys=True, default=bytes.hex).encode()).hexdigest()[:20]

    with MemoryStore(db) as store, out.open("w") as f:
        keyed = store.encrypted
        for owner in store.owners():
            for a in store.artifacts(owner=owner):
                meta = {**a.meta, "sources": sorted(a.meta["sources"])} if keyed and "sources" in a.meta else a.meta
                content = [a.owner, a.tier, a.kind, a.session_id, a.seq, a.text, a.vector, meta,
                           None if keyed else a.digest]
                f.write(f"{a.id}\t{h(content)}\n")
                for e in store.parents(a.id):
                    f.write(f"{e.child}<-{e.parent}\t{h([e.op, e.params])}\n")


def child(n: int, encrypt: bool, embedder: str, folder: Path, rows: str) -> None:
    """One timed `memory add` (the child process's whole job); prints its result as JSON."""
    from traceless.memory import MemoryStore, MemoryWriter, WriteConfig

    sessions, emb = _sessions(n), _embedder(embedder)
    db = folder / f"{embedder}-{'enc' if encrypt else 'plain'}-{n}.db"
    t0, c0 = time.perf_counter(), time.process_time()
    with MemoryStore(db, encrypt=encrypt) as store:
        MemoryWriter(store, embedder=emb, config=WriteConfig(levels=(), extractive=True)).write_sessions(sessions)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if rows:
        _rows(db, Path(rows))
    size = sum(p.stat().st_size for p in folder.glob(db.name + "*"))
    for p in folder.glob(db.name + "*"):
        p.unlink()
    print(json.dumps({"seconds": wall, "cpu": cpu, "mb": size / 1e6}))


def _run(tree: Path, n: int, encrypt: bool, embedder: str, folder: Path, rows: Path | None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(n), str(int(encrypt)), embedder,
           str(folder), str(rows or "")]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"`memory add` of {n} sessions ({embedder}, {tree}) failed:\n{p.stderr[-3000:]}")
    out: dict[str, float] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


def _differing(a: Path, b: Path, limit: int = 10) -> list[str]:
    la, lb = a.read_text().splitlines(), b.read_text().splitlines()
    da, db = dict(x.split("\t") for x in la), dict(x.split("\t") for x in lb)
    keys = sorted(k for k in da.keys() | db.keys() if da.get(k) != db.get(k))
    return [f"{k}: before {da.get(k, 'absent')} after {db.get(k, 'absent')}" for k in keys[:limit]] + (
        [f"… {len(keys) - limit} more"] if len(keys) > limit else [])


def _hashing(sizes: list[int], folder: Path, before: Path | None) -> tuple[list[dict[str, Any]], bool]:
    """The hashing curve, plaintext and encrypted (and on the older tree, interleaved)."""
    rows, ok, base = [], True, None
    print(f"{'sessions':>9} {'plain s':>8} {'CPU s':>6} {'µs/sess':>8} {'growth':>7} {'enc s':>8} {'enc/plain':>9} "
          f"{'MB':>6}" + (f" {'before s':>9} {'CPU s':>6} {'before/after':>12} {'CPU':>6} {'enc':>6}" if before else ""))
    for n in sizes:
        r: dict[str, Any] = {"n": n}
        for enc in (False, True):
            kind = "enc" if enc else "plain"
            files = {t: folder / f"rows-{t}-{kind}-{n}.tsv" for t in ("before", "after")} if before else {}
            if before:
                res = _run(before, n, enc, "hashing", folder, files["before"])
                r[f"before_{kind}"], r[f"before_{kind}_cpu"] = res["seconds"], res["cpu"]
            res = _run(ROOT, n, enc, "hashing", folder, files.get("after"))
            r[kind], r[f"{kind}_cpu"], r["mb"] = res["seconds"], res["cpu"], res["mb"]
            if before:
                diff = _differing(files["before"], files["after"])
                if diff:
                    ok = False
                    print(f"rows differ between the trees ({kind}, {n} sessions):\n  " + "\n  ".join(diff))
        per = r["plain"] / n * 1e6
        base = base or per
        r["growth"], r["ratio"] = per / base, r["enc"] / r["plain"]
        line = (f"{n:9d} {r['plain']:8.2f} {r['plain_cpu']:6.2f} {per:8.0f} {r['growth']:7.2f} {r['enc']:8.2f} "
                f"{r['ratio']:9.2f} {r['mb']:6.1f}")
        if before:
            line += (f" {r['before_plain']:9.2f} {r['before_plain_cpu']:6.2f} {r['before_plain'] / r['plain']:11.2f}x"
                     f" {r['before_plain_cpu'] / r['plain_cpu']:5.2f}x {r['before_enc'] / r['enc']:5.2f}x")
        print(line, flush=True)
        rows.append(r)
        if n >= 100_000 and r["plain"] * 100_000 / n > FLOOR_S:
            ok = False
            print(f"over the floor: {n} sessions took {r['plain']:.1f} s (target ≤ {FLOOR_S:.0f} s per 10^5)")
    ok = ok and all(r["growth"] <= 2.0 and r["ratio"] <= 1.30 for r in rows)
    return rows, ok


def _minilm(sizes: list[int], folder: Path) -> tuple[list[dict[str, Any]], bool]:
    rows, base = [], None
    print(f"\nall-MiniLM-L6-v2 (torch threads: {os.environ.get('TRACELESS_NUM_THREADS') or os.cpu_count()})")
    print(f"{'sessions':>9} {'plain s':>8} {'µs/sess':>8} {'growth':>7}")
    for n in sizes:
        res = _run(ROOT, n, False, "minilm", folder, None)
        per = res["seconds"] / n * 1e6
        base = base or per
        rows.append({"n": n, "plain": res["seconds"], "growth": per / base})
        print(f"{n:9d} {res['seconds']:8.2f} {per:8.0f} {per / base:7.2f}", flush=True)
    return rows, all(r["growth"] <= 2.0 for r in rows)


def _plot(path: Path, hashing: list[dict[str, Any]], minilm: list[dict[str, Any]], note: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    curves = [("hashing, plaintext", hashing, "plain"), ("hashing, encrypted", hashing, "enc"),
              ("all-MiniLM-L6-v2, plaintext", minilm, "plain")]
    for label, rows, key in curves:
        if rows:
            ns = [r["n"] for r in rows]
            left.plot(ns, [r[key] for r in rows], "o-", label=label)
            right.plot(ns, [r[key] / r["n"] * 1e6 for r in rows], "o-", label=label)
    left.set(xscale="log", yscale="log", xlabel="sessions in one `memory add`", ylabel="seconds",
             title="wall time (log-log: slope 1 = linear)")
    right.set(xscale="log", yscale="log", xlabel="sessions in one `memory add`", ylabel="µs per session",
              title="per-session cost (flat = linear)")
    left.legend(fontsize=8)
    fig.suptitle(note, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give session counts separated by commas, e.g. 1000,10000") from None
    if any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: every size must be at least 1")
    return sizes


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        n, enc, emb, where, rows = sys.argv[2:7]
        child(int(n), enc == "1", emb, Path(where), rows)
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=_sizes, default=_sizes("1000,10000"), help="Hashing-embedder sizes.")
    ap.add_argument("--minilm-sizes", type=_sizes, default=[], help="MiniLM sizes (none by default).")
    ap.add_argument("--before", help="Commit (or branch) to compare the hashing sizes against.")
    ap.add_argument("--plot", type=Path, help="Write both curves to this PNG.")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ.setdefault("TRACELESS_HOME", str(folder / "home"))
        before = folder / "before" if a.before else None
        if before is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(before), a.before],
                           check=True)
        try:
            load0 = os.getloadavg()
            print(f"load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; {os.cpu_count()} CPUs"
                  + (f"; before = {a.before}" if a.before else ""))
            hashing, ok = _hashing(a.sizes, folder, before)
            minilm, ok_m = _minilm(a.minilm_sizes, folder) if a.minilm_sizes else ([], True)
            load1 = os.getloadavg()
            print(f"load average at end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
        finally:
            if before is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=True)
    if a.plot:
        _plot(a.plot, hashing, minilm, f"bench/bench_add.py, {os.cpu_count()} CPUs, load average "
                                       f"{load0[0]:.1f} at start, {load1[0]:.1f} at end")
        print(f"plot: {a.plot}")
    sys.exit(0 if ok and ok_m else 1)


if __name__ == "__main__":
    main()
