"""Start-up of the commands that load no model (issue #13.4): this checkout against an older
commit of the repository (default: the last commit with eager imports), side by side in one
run, so machine load affects both alike.

    python bench/bench_startup.py [--runs 9] [--before REF]

The older commit is checked out in a temporary ``git worktree`` and both trees are run with
the same interpreter (``PYTHONPATH=<tree>/src``) on the same fixtures: a small real store
(``memory add --embedder hashing``), a real signed receipt of a ``full_purge`` forget on it
and the signer's public key (a temporary ``TRACELESS_HOME``). Repetitions are interleaved
(before, after, before, after, ...). Per command it prints the median wall time, the median
user+sys CPU time of the child (``getrusage(RUSAGE_CHILDREN)``, less sensitive to load than
wall time), their ratios, and the number of modules the command imported (independent of
load). Exits 1 if a command fails or its output differs between the two trees (the differing
rows are printed): the comparison is then void.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EAGER_COMMIT = "a98a7468b1a4b91e52adc60f1ee85005936c5488"
"""The last commit whose ``forget``/``memory`` packages and CLI commands imported eagerly."""
RUN = "import sys; from traceless.cli import main; main(sys.argv[1:])"
# the same entry, then the number of modules imported (printed last, on stderr)
COUNT = ("import sys; from traceless.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
         "print(f'\\nMODULES {len(sys.modules)}', file=sys.stderr)")


def _env(src: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYDANTIC_DISABLE_PLUGINS")}
    return {**env, "PYTHONPATH": str(src), "TRACELESS_HOME": str(home), "HF_HUB_OFFLINE": "1"}


def _run(code: str, args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess[bytes]]:
    """(wall s, user+sys CPU s of the child, the finished process)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=cwd, capture_output=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), p


def _fixtures(d: Path, env: dict[str, str]) -> list[list[str]]:
    """A real store, a real receipt and the public key; returns the commands to time."""
    (d / "s.jsonl").write_text(
        '{"user_id":"u1","session_id":"s1","turns":[{"role":"user","content":"my locker code is QX4-AMBER-1234"}]}\n'
        '{"user_id":"u2","session_id":"s2","turns":[{"role":"user","content":"I swim on Mondays"}]}\n')
    for args in (["memory", "add", "s.jsonl", "--db", "m.db", "--embedder", "hashing"],
                 ["forget", "--db", "m.db", "--mode", "full_purge", "--literal", "QX4-AMBER-1234", "--owner", "u1",
                  "--receipt", "r.json"],
                 ["keys", "export", "--out", "pub.txt"]):
        p = subprocess.run([sys.executable, "-c", RUN, *args], env=env, cwd=d, capture_output=True)
        if p.returncode != 0:
            sys.exit(f"fixture `traceless {' '.join(args)}` failed: {p.stderr.decode()[-400:]}")
    return [["--help"], ["forget", "modes"], ["forget", "verify", "r.json", "--public-key", "pub.txt"],
            ["memory", "show", "--db", "m.db"], ["keys", "export"]]


def _modules(args: list[str], env: dict[str, str], cwd: Path) -> int:
    p = subprocess.run([sys.executable, "-c", COUNT, *args], env=env, cwd=cwd, capture_output=True, text=True)
    return int(p.stderr.rsplit("MODULES ", 1)[1])


def _compare(commands: list[list[str]], envs: dict[str, dict[str, str]], d: Path, runs: int) -> bool:
    print(f"{'command':<22} {'before s':>8} {'after s':>8} {'ratio':>6} {'before cpu':>10} {'after cpu':>9} "
          f"{'ratio':>6} {'modules':>11}")
    ok = True
    for args in commands:
        wall: dict[str, list[float]] = {"before": [], "after": []}
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        out: dict[str, bytes] = {}
        for _ in range(runs):
            for side in ("before", "after"):
                w, c, p = _run(RUN, args, envs[side], d)
                if p.returncode != 0:
                    print(f"`traceless {' '.join(args)}` failed ({side}): {p.stderr.decode()[-400:]}")
                    return False
                wall[side].append(w)
                cpu[side].append(c)
                out[side] = p.stdout
        if out["before"] != out["after"]:
            ok = False
            print(f"OUTPUT DIFFERS for `traceless {' '.join(args)}`:\n--- before\n{out['before'].decode()}"
                  f"--- after\n{out['after'].decode()}")
        wb, wa = statistics.median(wall["before"]), statistics.median(wall["after"])
        cb, ca = statistics.median(cpu["before"]), statistics.median(cpu["after"])
        mods = f"{_modules(args, envs['before'], d)}→{_modules(args, envs['after'], d)}"
        name = " ".join(args[:2]) if args[0] != "--help" else "--help"
        print(f"{name:<22} {wb:8.3f} {wa:8.3f} {wb / wa:5.2f}x {cb:10.3f} {ca:9.3f} {cb / ca:5.2f}x {mods:>11}")
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9, help="Interleaved repetitions per command and tree.")
    ap.add_argument("--before", default=EAGER_COMMIT, help="Commit (or branch) to compare against.")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d, old, home = Path(tmp), Path(tmp) / "before", Path(tmp) / "home"
        home.mkdir(mode=0o700)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(old), a.before], check=True)
        try:
            envs = {"before": _env(old / "src", home), "after": _env(ROOT / "src", home)}
            commands = _fixtures(d, envs["after"])
            load = os.getloadavg()[0]
            print(f"before = {a.before[:12]}, after = this checkout; {a.runs} interleaved runs; "
                  f"load {load:.1f} at start")
            ok = _compare(commands, envs, d, a.runs)
            print(f"load {os.getloadavg()[0]:.1f} at end; {os.cpu_count()} CPUs")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
