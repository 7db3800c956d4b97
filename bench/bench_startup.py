"""Start-up time of commands that load no model (issue #13.4): each command's wall time
(median of N runs, measured side by side in this one run) against the old eager path,
which imported every command module (torch, scipy, the studies) before doing anything.

    python bench/bench_startup.py [--runs 5]

Prints one row per command and the ratio eager/lazy. Exits 1 if a lazy command is
slower than its eager twin (the comparison failed) or a command fails.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAZY = "from traceless.cli import main; import sys; main(sys.argv[1:])"
# the old behaviour: every command module imported before dispatch
EAGER = ("import traceless.cli as c, importlib, sys; [importlib.import_module(m) for m, *_ in c.COMMANDS.values()]; "
         "c.main(sys.argv[1:])")


def _time(code: str, args: list[str], runs: int) -> float:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True)
        out.append(time.perf_counter() - t0)
        if p.returncode != 0:
            sys.exit(f"{' '.join(args)} failed: {p.stderr.decode()[-400:]}")
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "m.db"
        src = Path(d) / "s.jsonl"
        src.write_text('{"user_id":"u1","session_id":"s1","turns":[{"role":"user","content":"hi"}]}\n')
        subprocess.run([sys.executable, "-c", LAZY, "memory", "add", str(src), "--db", str(db), "--embedder",
                        "hashing"], check=True, capture_output=True)
        commands = [["--help"], ["forget", "modes"], ["memory", "show", "--db", str(db)], ["keys", "export"]]
        bad = False
        print(f"{'command':<28} {'lazy s':>8} {'eager s':>8} {'ratio':>6}")
        for args in commands:
            lazy, eager = _time(LAZY, args, runs), _time(EAGER, args, runs)
            bad |= lazy > eager
            print(f"{' '.join(args)[:28]:<28} {lazy:8.3f} {eager:8.3f} {eager / lazy:6.1f}x")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
