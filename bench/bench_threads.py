"""Are the audit's replies the same whatever the llama.cpp server's thread count? (issue #27 item 1)

    python bench/bench_threads.py                          # the full default audit, 1 vs 2 threads
    python bench/bench_threads.py --profiles 1 --modes none --threads 1,2,3
    python bench/bench_threads.py --threads 1 --keep DIR1           # one count per process, compared
    python bench/bench_threads.py --threads 2 --reference DIR1      #   by the rows of the results dirs

The threads are not part of the model identity (``EngineOptions.threads``: "changes no reply"),
and the engine now switches them during a run as the free CPUs change, so a results dir may
hold rows decoded with different counts. That is only sound if every reply is token-identical
across thread counts. This bench runs ``traceless audit``'s engine (``audit_model``: one slot,
prompt cache off; defaults: 3 synthetic users, S=1, k=3, every forget mode, 40-token replies)
once per thread count (fixed, no adaptation), records every request the model gets (summaries
and probes) and compares each reply's text and decoded-token count with the first count's run.
Exit 1 on any difference, each listed with the canaries masked. ``--keep DIR`` keeps each
run's results dir (DIR/THREADS); ``--reference DIR`` also compares every result row of each run
(probe replies, redacted as stored, and their decoded-token counts) with the rows of a results
dir kept by an earlier run (the summaries are not rows: only their effect on the probes shows). Load average printed (the
machine may be shared: only the identity is checked, the walls are context).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench_decode import Recorder, _audit, _stats, add_audit_args, differences  # noqa: E402

from traceless.models import load_embedder  # noqa: E402


def rows(out: Path) -> dict[str, tuple[str | None, int | None]]:
    """A results dir's rows: key -> (stored reply, decoded tokens)."""
    with sqlite3.connect(f"file:{out / 'results.sqlite'}?mode=ro", uri=True) as db:
        got = db.execute("SELECT key, reply, timing FROM cells").fetchall()
    return {k: (r, json.loads(t).get("completion_tokens") if t else None) for k, r, t in got}


def row_differences(reference: Path, out: Path) -> list[str]:
    """Rows whose reply or decoded-token count differ, or that only one dir holds."""
    a, b = rows(reference), rows(out)
    return [f"{k}: {a.get(k)!r:.120} vs {b.get(k)!r:.120}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_audit_args(ap)
    ap.add_argument("--threads", default="1,2", help="comma list of server thread counts; the first is the reference")
    ap.add_argument("--keep", type=Path, help="keep each run's results dir as KEEP/THREADS")
    ap.add_argument("--reference", type=Path, help="a results dir kept by an earlier run: compare rows with it")
    a = ap.parse_args(argv)
    counts = [int(x) for x in a.threads.split(",") if x.strip()]
    load0 = os.getloadavg()
    load_embedder()
    res: dict[int, tuple[float, Recorder, float]] = {}
    row_diffs: dict[int, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        for n in counts:
            rec, la = Recorder(), os.getloadavg()[0]
            a.threads = n
            out = (a.keep or Path(tmp)) / str(n)
            res[n] = (_audit("none", a, out, rec), rec, la)
            if a.reference:
                row_diffs[n] = row_differences(a.reference, out)
    print(f"\n## audit (profiles {a.profiles}, S={a.S}, modes {a.modes}, {a.max_new_tokens}-token replies), "
          "server threads fixed per run\n")
    print("| threads | load avg at start | wall s | requests | decoded tok | decode tok/s | replies = first |")
    print("|---|---|---|---|---|---|---|")
    ref = res[counts[0]][1]
    failed = 0
    for n, (wall, rec, la) in res.items():
        s = _stats(rec.replies)
        rate = s["decoded"] / s["decode_s"] if s["decode_s"] else float("nan")
        diffs = differences(ref.replies, rec.replies, ref.canaries | rec.canaries)
        failed |= bool(diffs)
        print(f"| {n} | {la:.1f} | {wall:.1f} | {s['requests']} | {s['decoded']} | {rate:.1f} | "
              f"{'yes' if not diffs else f'NO ({len(diffs)})'} |")
        for d in diffs:
            print(f"    threads={n}: {d}")
    for n, diffs in row_diffs.items():
        failed |= bool(diffs)
        print(f"\nthreads={n} against the rows of {a.reference}: "
              + ("every row identical" if not diffs else f"{len(diffs)} rows DIFFER"))
        for d in diffs:
            print(f"    {d}")
    print(f"\nload average (1/5/15 min): {'/'.join(f'{x:.1f}' for x in load0)} before, "
          f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())} after, on {os.cpu_count()} cores")
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
