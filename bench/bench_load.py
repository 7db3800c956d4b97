"""The audit on a busy machine: alone and beside N CPU-bound background processes, side by side
in one run (issue #27 item 1).

    python bench/bench_load.py                                 # 1 user, before-row only (the slice)
    python bench/bench_load.py --profiles 3 --modes all        # the full default audit
    python bench/bench_load.py --loads 2,4 --fixed-threads     # also the old default: threads = cores
    python bench/bench_load.py --loads 2 --late                # also: the load starts after the server did
    python bench/bench_load.py --loads 2,4 --late --leave      # also: the load leaves mid-run
    python bench/bench_load.py --loads 2 --late --start-threads 2   # a shared machine: start as if idle
    python bench/bench_load.py --profiles 3 --modes all --loads 2 --late --late-after 20 --late-only
                                                               # the full audit, load arriving 20 s in

Each run is ``traceless audit``'s engine (``audit_model``: llama.cpp, one slot, prompt cache off;
threads from ``free_cpus`` when the server starts, i.e. after the background processes started,
then following the free CPUs, mid-request when they drop: ``LlamaCppServer(adapt_threads=True)``)
on the same slice. ``--late`` adds, per load, a run whose background processes start just after
the server started (with the threads the machine had free then); ``--leave`` one whose processes
run when the server starts and end ``--leave-after`` seconds into the run (default: half the
alone run's wall): the run then depends on the server changing its threads mid-run (the
"server threads" column: the count at the start, then each change with its second in the run,
"cut" where a request in flight was cut off and sent again). The background processes are bounded busy loops (pure Python,
each ends by itself after ``--limit`` seconds and is killed when its run ends). With N of them
on C cores (the affinity mask), printed: wall(loaded) / wall(alone) against the bound
1.5 × (N + C) / C (no worse than 1.5 times the slowdown a fair share of the CPU implies), the
server's threads, and whether every reply (summaries and probes) equals the alone run's, text
and decoded-token count (exit 1 on a difference or a broken bound). ``--fixed-threads`` adds,
per load, the server with threads = C (the old default) for comparison (not checked against
the bound). The machine's load average before and after is printed: other jobs count as load
too, so "alone" is this process with no background processes of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench_decode import Recorder, _audit, add_audit_args, differences  # noqa: E402

from traceless.models import _load, load_embedder  # noqa: E402
from traceless.models._llamacpp_server import LlamaCppServer  # noqa: E402

_BUSY = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


@contextmanager
def busy(n: int, limit: float, settle: float = 1.0) -> Iterator[Callable[[], None]]:
    """``n`` CPU-bound processes, each ending after ``limit`` seconds (or when the block ends);
    yields a no-op (the trigger ``busy_later`` yields)."""
    procs = [subprocess.Popen([sys.executable, "-c", _BUSY.format(limit=limit)]) for _ in range(n)]
    time.sleep(settle if n else 0.0)  # running before the server picks its threads
    try:
        yield lambda: None
    finally:
        for p in procs:
            p.kill()
            p.wait()


@contextmanager
def busy_later(n: int, limit: float, after: float) -> Iterator[Callable[[], None]]:
    """Yields a trigger that starts ``n`` busy processes ``after`` seconds later (a timer); they
    end after ``limit`` seconds or when the block ends (the timer is cancelled then)."""
    procs: list[subprocess.Popen[bytes]] = []
    timer = threading.Timer(after, lambda: procs.extend(
        subprocess.Popen([sys.executable, "-c", _BUSY.format(limit=limit)]) for _ in range(n)))
    try:
        yield timer.start
    finally:
        timer.cancel()
        if timer.is_alive():
            timer.join()
        for p in procs:
            p.kill()
            p.wait()


@contextmanager
def threads_seen(seen: list[LlamaCppServer], on_first: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Records the server of the run with the threads it started with (``seen``); ``on_first``
    runs once the first server is up."""
    orig = LlamaCppServer.start

    def start(self: LlamaCppServer) -> LlamaCppServer:
        first = not seen
        if first:
            seen.append(self)
            self.first_threads = self.threads  # type: ignore[attr-defined]
        out = orig(self)
        if first:
            self.started_at = time.monotonic()  # type: ignore[attr-defined]
            on_first()
        return out

    LlamaCppServer.start = start  # type: ignore[method-assign]
    try:
        yield
    finally:
        LlamaCppServer.start = orig  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_audit_args(ap, profiles=1, modes="none")
    ap.add_argument("--loads", default="2,4", help="numbers of background processes")
    ap.add_argument("--limit", type=float, default=1200.0, help="seconds a background process runs at most")
    ap.add_argument("--fixed-threads", action="store_true", help="also threads = cores (the old default) per load")
    ap.add_argument("--late", action="store_true", help="also, per load, the processes started after the server")
    ap.add_argument("--late-after", type=float, default=0.0, help="seconds after the server started that a --late "
                    "run's processes start (default 0: at once)")
    ap.add_argument("--leave", action="store_true", help="also, per load, the processes ending mid-run")
    ap.add_argument("--leave-after", type=float, default=0.0,
                    help="seconds into a --leave run the processes end (default: half the alone wall)")
    ap.add_argument("--late-only", action="store_true",
                    help="with --late/--leave: skip the runs whose load starts before the server (the full audit's time)")
    ap.add_argument("--start-threads", type=int, default=0,
                    help="the server's threads at start instead of the CPUs free then (still adapted during the run): "
                         "on a machine other jobs already load, to see the mid-run changes")
    a = ap.parse_args(argv)
    if a.start_threads:
        setattr(_load, "free_cpus", functools.partial(int, a.start_threads))  # noqa: B010
    cores = len(os.sched_getaffinity(0))
    runs: list[tuple[str, int, int | None]] = [("alone", 0, None)]
    for n in (int(x) for x in a.loads.split(",") if x.strip()):
        if not a.late_only:
            runs.append((f"{n} busy", n, None))
        if a.late:
            runs.append((f"{n} busy, started {a.late_after:g} s after the server", n, None))
        if a.leave:
            runs.append((f"{n} busy, leaving mid-run", n, None))
        if a.fixed_threads:
            runs.append((f"{n} busy, threads={cores} (old default)", n, cores))
    load0 = os.getloadavg()
    load_embedder()
    res: dict[str, tuple[float, Recorder, str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        for i, (label, n, fixed) in enumerate(runs):
            rec, seen = Recorder(), list[LlamaCppServer]()
            la = os.getloadavg()[0]
            late, leave = "after the server" in label, "leaving" in label
            limit = (a.leave_after or res["alone"][0] / 2) if leave else a.limit
            with contextlib.ExitStack() as stack:
                start_load = stack.enter_context(busy_later(n, limit, a.late_after) if late else busy(n, limit))
                stack.enter_context(threads_seen(seen, start_load))
                a.threads = fixed
                wall = _audit("none", a, Path(tmp) / str(i), rec)
            res[label] = (wall, rec, _changes(seen), (la, os.getloadavg()[0]))
            if leave:
                res[label] = (wall, rec, f"{res[label][2]}; load ended {limit:.0f} s into the run",
                              res[label][3])
    return _report(a, runs, res, cores, load0)


def _changes(seen: list[LlamaCppServer]) -> str:
    """``2 → 1 @3s cut → 2 @41s``: the threads at the start, then each change and when (seconds
    after the server first answered; cut: mid-request)."""
    if not seen:
        return "?"
    srv = seen[0]
    t0 = getattr(srv, "started_at", 0.0)
    out = [str(getattr(srv, "first_threads", srv.threads))]
    out += [f"{n} @{t - t0:.0f}s{' cut' if cut else ''}" for t, n, cut in srv.thread_log]
    return " → ".join(out)


def _report(a: argparse.Namespace, runs: list[tuple[str, int, int | None]],
            res: dict[str, tuple[float, Recorder, str, tuple[float, float]]], cores: int,
            load0: tuple[float, float, float]) -> int:
    print(f"\n## audit slice (profiles {a.profiles}, S={a.S}, modes {a.modes}) on C = {cores} cores\n")
    print("| run | N | server threads | load avg before/after | wall s | wall / alone | bound 1.5(N+C)/C | within | "
          "replies = alone |")
    print("|---|---|---|---|---|---|---|---|---|")
    alone_wall, alone = res["alone"][0], res["alone"][1]
    failed = 0
    for (label, n, fixed), (wall, rec, changes, la) in zip(runs, res.values(), strict=True):
        bound = 1.5 * (n + cores) / cores
        diffs = differences(alone.replies, rec.replies, alone.canaries | rec.canaries)
        ok = wall / alone_wall <= bound
        failed |= bool(diffs) or (not ok and fixed is None)
        print(f"| {label} | {n} | {changes} | {la[0]:.1f}/{la[1]:.1f} | {wall:.1f} | {wall / alone_wall:.2f} | "
              f"{bound:.2f} | {'yes' if ok else 'NO'} | {'yes' if not diffs else f'NO ({len(diffs)})'} |")
        for d in diffs:
            print(f"    {label}: {d}")
    print(f"\n{len(alone.replies)} replies per run; load average (1/5/15 min) "
          f"{'/'.join(f'{x:.1f}' for x in load0)} before, {'/'.join(f'{x:.1f}' for x in os.getloadavg())} after")
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
