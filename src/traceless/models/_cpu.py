"""How many CPU threads the local engines should use: the CPUs actually free to this process.

A llama.cpp server synchronises its threads on every token, so a thread that waits for a core
another job holds stalls all of them (measured, 2 cores beside 2 CPU-bound processes: 2 threads
8.3 tok/s, 1 thread 16.7 tok/s, token-identical replies). So the engines take as many threads
as there are idle CPUs among those this process may run on, sampled from ``/proc/stat`` over a
short window; this process's own CPU time in that window counts as free (its work is what the
engine threads will do). Where ``/proc/stat`` is unreadable: the CPUs of the affinity mask.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Iterable

__all__ = ["free_cpus", "idle_cpus"]

Snapshot = dict[int, tuple[int, int]]
"""CPU number -> (idle jiffies incl. iowait, total jiffies)."""


def _snapshot(text: str, cpus: Iterable[int]) -> Snapshot:
    want, out = set(cpus), {}
    for line in text.splitlines():
        head, _, rest = line.partition(" ")
        if not head.startswith("cpu") or head == "cpu" or not head[3:].isdigit() or int(head[3:]) not in want:
            continue
        vals = [int(v) for v in rest.split()]
        # user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
        out[int(head[3:])] = (vals[3] + (vals[4] if len(vals) > 4 else 0), sum(vals[:8]))
    return out


def idle_cpus(before: str, after: str, cpus: Iterable[int]) -> float:
    """Idle CPUs (0..len(cpus)) between two ``/proc/stat`` texts, over the given CPUs."""
    cpus = list(cpus)
    a, b = _snapshot(before, cpus), _snapshot(after, cpus)
    idle = 0.0
    for c in cpus:
        if c in a and c in b and b[c][1] > a[c][1]:
            idle += (b[c][0] - a[c][0]) / (b[c][1] - a[c][1])
    return idle


def _own_cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _read_stat() -> str:
    with open("/proc/stat", encoding="ascii") as f:
        return f.read()


def free_cpus(sample_seconds: float = 0.25, *, read_stat: Callable[[], str] = _read_stat,
              own_cpu: Callable[[], float] = _own_cpu, clock: Callable[[], float] = time.perf_counter) -> int:
    """CPUs free to this process now (at least 1, at most its affinity mask): idle CPUs plus
    the CPUs this process itself used, sampled over ``sample_seconds``, rounded."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    try:
        t0, c0, s0 = clock(), own_cpu(), read_stat()
        time.sleep(sample_seconds)
        s1, c1, t1 = read_stat(), own_cpu(), clock()
    except OSError:
        return len(cpus)
    if not _snapshot(s0, cpus):
        return len(cpus)
    free = idle_cpus(s0, s1, cpus) + (c1 - c0) / max(t1 - t0, 1e-3)
    return max(1, min(len(cpus), round(free)))
