"""How many CPU threads the local engines should use: the CPUs actually free to this process.

A llama.cpp server synchronises its threads on every token, so a thread that waits for a core
another job holds stalls all of them (measured, 2 cores beside 2 CPU-bound processes: 2 threads
8.3 tok/s, 1 thread 16.7 tok/s, token-identical replies). So the engines take as many threads
as there are idle CPUs among those this process may run on, sampled from ``/proc/stat`` over a
short window; this process's own CPU time in that window counts as free (its work is what the
engine threads will do). Where ``/proc/stat`` is unreadable: the CPUs of the affinity mask.

The free CPUs change during a run (another job starts or ends), so a running server re-reads
them every second: ``CpuMeter`` measures the free CPUs since its previous reading without
waiting (``/proc/stat`` and the CPU time of this process and of the server's process), and
``ThreadAdapter`` decides, only on a persistent change, when the server's thread count should
follow (``LlamaCppServer`` then restarts it: fewer threads at once, even mid-request; more
between requests, after a cooldown).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Iterable

__all__ = ["ADAPT_MIN_WINDOW", "CpuMeter", "ThreadAdapter", "cpu_limit", "free_cpus", "idle_cpus"]

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


def cpu_limit() -> int:
    """The CPUs this process may run on (its affinity mask; the core count where there is none)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


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


def _self_cpu() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    return s.ru_utime + s.ru_stime


def _pid_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of a live process, from ``/proc/PID/stat``; None if gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)


class CpuMeter:
    """The CPUs free to this process over the time since the previous reading, without
    waiting: idle CPUs of the affinity mask (``/proc/stat``) plus the CPU time this process
    and the live processes ``pids()`` names (the engine's server) used in that window, per
    second of it. A reading costs two small file reads, so it can be taken between requests."""

    def __init__(self, pids: Callable[[], Iterable[int]] = tuple, *, read_stat: Callable[[], str] | None = None,
                 own_cpu: Callable[[], float] | None = None, pid_cpu: Callable[[int], float | None] | None = None,
                 clock: Callable[[], float] = time.perf_counter, cpus: Iterable[int] | None = None,
                 min_window: float = 0.0) -> None:
        self._pids, self._clock = pids, clock
        self.min_window = min_window
        """Seconds a window lasts at least: a reading asked for sooner returns None and the window
        goes on (the kernel counts CPU time in ticks of 10 ms: a window of a few ticks is noise)."""
        self._read_stat = read_stat or _read_stat
        self._own = own_cpu or _self_cpu
        self._pid_cpu = pid_cpu or _pid_cpu
        self.cpus = sorted(cpus) if cpus is not None else (
            sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1)))
        self._last: tuple[float, str, float, dict[int, float]] | None = None

    def _take(self) -> tuple[float, str, float, dict[int, float]] | None:
        try:
            stat = self._read_stat()
        except OSError:
            return None
        used = {p: c for p in self._pids() if (c := self._pid_cpu(p)) is not None}
        return self._clock(), stat, self._own(), used

    def reset(self) -> None:
        """Start a new window now (after the server was restarted: its CPU time starts again)."""
        self._last = self._take()

    def read(self) -> float | None:
        """Free CPUs since the previous reading (or ``reset``), and start the next window;
        None on the first reading, before ``min_window`` seconds (the window goes on) or where
        ``/proc/stat`` is unreadable."""
        prev = self._last
        if prev is not None and self._clock() - prev[0] < self.min_window:
            return None
        cur = self._take()
        self._last = cur
        if prev is None or cur is None or cur[0] <= prev[0] or not _snapshot(cur[1], self.cpus):
            return None
        ours = cur[2] - prev[2] + sum(c - prev[3][p] for p, c in cur[3].items() if p in prev[3])
        return idle_cpus(prev[1], cur[1], self.cpus) + max(0.0, ours) / (cur[0] - prev[0])


ADAPT_INTERVAL = 1.0
"""Seconds between two free-CPU readings of a running server (``ThreadAdapter``; the server's
watcher thread takes them, during requests too)."""
ADAPT_MIN_WINDOW = 0.5
"""Seconds a free-CPU reading covers at least (``CpuMeter.min_window``): the watcher's first
reading after a restart (the prompt cache cleared, a thread change) came 0-17 ms after the
meter's reset, a window of one or two scheduler ticks that read this process's own work and no
idle time. Measured on the full default audit alone (2 cores, nothing else running): 20 of 244
readings below 1.5 free CPUs, every one from such a window, and 8-9 thread changes a run; with
this floor none, and 0-1 changes."""
ADAPT_PERSIST = 2
"""Readings in a row below the current count that lower a running server's threads, at once:
even mid-request (synchronised threads beside busy cores collapse: 3-14x slower, measured)."""
ADAPT_UP_PERSIST = 5
"""Readings in a row above the current count that raise them, between requests only (one
thread is at worst about half as fast: not worth abandoning a request for)."""
ADAPT_COOLDOWN = 10.0
"""Seconds at least after a thread change before the threads go up again (each restarts it)."""


class ThreadAdapter:
    """When a running engine's thread count should change, from free-CPU readings (``observe``:
    at most one per ``interval`` seconds). Down after ``persist`` readings in a row below the
    current count, to the nearest of them, and urgent: the server applies it at once, aborting
    and re-sending the requests in flight (one busy reading does not restart a server). Up after
    ``up_persist`` readings in a row above it and ``cooldown`` seconds after the last change, to
    the nearest of them, applied between requests (``propose``).

    A reading of ``free`` CPUs asks for ``floor(free + 0.25)`` threads, within 1..``max_threads``
    (a thread waiting for a busy core stalls the others every token, so a partly taken core is
    not counted)."""

    def __init__(self, threads: int, sample: Callable[[], float | None], *, max_threads: int,
                 clock: Callable[[], float] = time.monotonic, interval: float | None = None,
                 persist: int | None = None, up_persist: int | None = None, cooldown: float | None = None) -> None:
        interval = ADAPT_INTERVAL if interval is None else interval
        persist = ADAPT_PERSIST if persist is None else persist
        up_persist = ADAPT_UP_PERSIST if up_persist is None else up_persist
        cooldown = ADAPT_COOLDOWN if cooldown is None else cooldown
        if min(threads, max_threads, persist, up_persist) < 1 or interval < 0 or cooldown < 0:
            raise ValueError("threads, max_threads, persist and up_persist must be >= 1, interval and cooldown >= 0")
        self.threads, self.max_threads = threads, max_threads
        self._sample, self._clock = sample, clock
        self.interval, self.persist, self.up_persist, self.cooldown = interval, persist, up_persist, cooldown
        self._next_reading = clock() + interval
        self._last_change = clock() - cooldown  # the first server start is no change: nothing to cool
        self._wanted: list[int] = []
        self.pending: int | None = None
        """The count decided and not yet applied (None: keep)."""

    def want(self, free: float) -> int:
        """The thread count ``free`` CPUs ask for."""
        return max(1, min(self.max_threads, int(free + 0.25)))

    def observe(self) -> int | None:
        """Take a reading when one is due; returns the lower count to switch to at once
        (mid-request), or None (``pending`` may still hold a rise for the next request)."""
        now = self._clock()
        if now >= self._next_reading:
            self._next_reading = now + self.interval
            free = self._sample()
            if free is not None:
                self._decide(self.want(free), now)
        return self.pending if self.pending is not None and self.pending < self.threads else None

    def _decide(self, w: int, now: float) -> None:
        if w == self.threads or (self._wanted and (w > self.threads) != (self._wanted[0] > self.threads)):
            self._wanted, self.pending = ([] if w == self.threads else [w]), None
            return
        self._wanted.append(w)
        up = w > self.threads
        need = self.up_persist if up else self.persist
        del self._wanted[:-need]
        if len(self._wanted) < need or (up and now - self._last_change < self.cooldown):
            return
        self.pending = min(self._wanted) if up else max(self._wanted)

    def propose(self) -> int | None:
        """Called before a request: the thread count to switch to now, or None (keep)."""
        self.observe()
        return self.pending

    def changed(self, threads: int) -> None:
        """The engine now runs ``threads`` threads (the cooldown starts again)."""
        self.threads, self._last_change, self._wanted, self.pending = threads, self._clock(), [], None
        self._next_reading = self._clock() + self.interval
