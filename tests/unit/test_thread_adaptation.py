"""A running llama.cpp server's threads follow the CPUs free to the process (issue #27 item 1,
issue #39 item 3): read every second by a watcher thread, only on a persistent change, applied
by restarting the server on the same port: fewer threads at once (a request in flight is cut off
and sent again), more only between requests. No model: the CPU readings are injected and the
server child is a loopback HTTP stub that answers with the thread count it was started with."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.unit._stub_llamacpp import STUB_CHILD

from traceless.models import _cpu
from traceless.models import _llamacpp_server as srv_mod
from traceless.models._base import ChatMessage


class FakeStat:
    """``/proc/stat`` of 2 CPUs; each read advances both by 100 jiffies, ``idle`` of them idle."""

    def __init__(self) -> None:
        self.idle = [1.0, 1.0]
        self.jiffies = [[0, 0], [0, 0]]  # busy, idle

    def __call__(self) -> str:
        for j, f in zip(self.jiffies, self.idle, strict=True):
            j[0] += round(100 * (1 - f))
            j[1] += round(100 * f)
        cpus = [f"cpu{i} {b} 0 0 {i_} 0 0 0 0 0 0" for i, (b, i_) in enumerate(self.jiffies)]
        return "\n".join(["cpu  0 0 0 0 0 0 0 0 0 0", *cpus]) + "\n"


def _reader(values: list[float | None]) -> Any:
    it = iter(values)
    return lambda: next(it)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_persistent_drop_in_free_cpus_lowers_the_threads_once() -> None:
    clock = Clock()
    a = _cpu.ThreadAdapter(2, _reader([0.9, 0.9, 0.9]), max_threads=2, clock=clock, interval=5, persist=2,
                           cooldown=0)
    clock.t = 5
    assert a.propose() is None  # one reading is not persistent
    clock.t = 10
    assert a.propose() == 1
    a.changed(1)
    clock.t = 15
    assert a.propose() is None  # 0.9 free asks for 1: already there


def test_readings_are_rate_limited() -> None:
    clock, calls = Clock(), []

    def sample() -> float:
        calls.append(clock.t)
        return 0.5

    a = _cpu.ThreadAdapter(2, sample, max_threads=2, clock=clock, interval=5, persist=2, cooldown=0)
    for t in (0.0, 1.0, 4.9, 5.0, 6.0, 9.0, 10.0):
        clock.t = t
        a.propose()
    assert calls == [5.0, 10.0]


def test_a_burst_or_a_mixed_reading_does_not_switch() -> None:
    clock = Clock()
    a = _cpu.ThreadAdapter(2, _reader([0.8, 2.0, 0.8, 4.0, 0.8]), max_threads=4, clock=clock, interval=1,
                           persist=2, cooldown=0)
    out = []
    for t in range(1, 6):
        clock.t = t
        out.append(a.propose())
    assert out == [None, None, None, None, None]


def test_rising_free_cpus_raise_the_threads_to_the_nearest_reading_within_the_mask() -> None:
    clock = Clock()
    a = _cpu.ThreadAdapter(1, _reader([1.7, 2.0, 7.5, 3.0]), max_threads=4, clock=clock, interval=1, persist=2,
                           up_persist=2, cooldown=0)
    clock.t = 1
    assert a.propose() is None  # 1.7 free: a partly taken core does not count, stays 1
    clock.t = 2
    first = a.propose()
    clock.t = 3
    second = a.propose()  # 7.5 free, capped at the mask: 4; nearest of (2, 4) is 2
    assert (first, second) == (None, 2)


def test_load_arriving_right_after_the_start_lowers_the_threads_within_seconds() -> None:
    """Issue #39.3: with the defaults a drop is urgent (no cooldown after the start, a reading
    a second), so load that arrives just after the server started is followed within ~2 s."""
    clock = Clock()
    a = _cpu.ThreadAdapter(2, lambda: 0.9, max_threads=2, clock=clock)
    seen = {}
    for t in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0):
        clock.t = t
        seen[t] = a.propose()
    assert [t for t, v in seen.items() if v == 1][0] <= 2.0


def test_a_drop_is_urgent_a_rise_waits_for_the_cooldown_and_the_next_request() -> None:
    clock, free = Clock(), [0.5]
    a = _cpu.ThreadAdapter(2, lambda: free[0], max_threads=2, clock=clock, interval=1, persist=2, up_persist=3,
                           cooldown=30)
    clock.t = 1
    assert a.observe() is None
    clock.t = 2
    assert a.observe() == 1  # two readings below: at once, even mid-request
    a.changed(1)
    free[0] = 2.0
    ups = {}
    for t in range(3, 40):
        clock.t = t
        ups[t] = (a.observe(), a.pending)
    assert all(o is None for o, _ in ups.values())  # a rise never cuts a request off
    assert [t for t, (_, p) in ups.items() if p == 2][0] == 32  # 30 s after the change
    assert a.propose() == 2  # the next request applies it


def test_the_meter_counts_the_server_process_time_as_free_and_never_sleeps() -> None:
    stat, clock = FakeStat(), Clock()
    pid_cpu = {7: 0.0}
    stat.idle = [0.0, 0.5]  # cpu0 busy (the server's 1 s of CPU in each 1 s window), cpu1 half idle
    m = _cpu.CpuMeter(lambda: [7], read_stat=stat, own_cpu=lambda: 0.0, pid_cpu=pid_cpu.get, clock=clock,
                      cpus=[0, 1])
    assert m.read() is None  # the first reading starts the window
    clock.t, pid_cpu[7] = 1.0, 1.0
    t0 = time.perf_counter()
    assert m.read() == pytest.approx(1.5)
    assert time.perf_counter() - t0 < 0.1
    m.reset()
    clock.t, pid_cpu[7] = 2.0, 1.2  # 0.2 s of the server's CPU in 1 s
    assert m.read() == pytest.approx(0.7)


def test_a_reading_sooner_than_the_min_window_waits_and_covers_the_whole_window() -> None:
    """Issue 39.3: right after a restart the watcher's reading could cover two scheduler ticks,
    both CPUs busy in them (the audit's own work on one): 1.0 free of 2 on an idle machine,
    and the server dropped to one thread. A window shorter than ``min_window`` is no reading."""
    clock, jiffies, own = Clock(), {0: [0, 0], 1: [0, 0]}, [0.0]

    def stat() -> str:
        return "cpu  0 0 0 0\n" + "".join(f"cpu{c} {b} 0 0 {i} 0 0 0 0\n" for c, (b, i) in jiffies.items())

    def meter(min_window: float) -> _cpu.CpuMeter:
        m = _cpu.CpuMeter(lambda: [], read_stat=stat, own_cpu=lambda: own[0], clock=clock, cpus=[0, 1],
                          min_window=min_window)
        m.reset()
        return m

    short, whole = meter(0.0), meter(0.5)
    clock.t, own[0] = 0.02, 0.02  # 20 ms: both CPUs busy, one of them with this process
    jiffies[0], jiffies[1] = [2, 0], [2, 0]
    assert short.read() == pytest.approx(1.0)  # the noise: half the machine looks taken
    assert whole.read() is None  # too short: the window goes on
    clock.t, own[0] = 1.0, 0.1  # the rest of the second: this process 0.08 s more, both CPUs mostly idle
    jiffies[0], jiffies[1] = [10, 90], [4, 96]
    assert whole.read() == pytest.approx(0.9 + 0.96 + 0.1)


def test_the_meter_reads_this_machine(tmp_path: Path) -> None:
    m = _cpu.CpuMeter(lambda: [])
    if m.read() is None and not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat")
    time.sleep(0.05)
    free = m.read()
    assert free is not None and 0.0 <= free <= len(m.cpus) + 1.0


def _serve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, child: str = STUB_CHILD) -> tuple[Any, FakeStat]:
    """``load_backend('llamacpp:FILE')`` on the stub child, 2 CPUs, free CPUs from a FakeStat."""
    from traceless.models import _load

    stat = FakeStat()
    monkeypatch.setattr(srv_mod, "_CHILD", child)
    monkeypatch.setattr(_load, "free_cpus", lambda: 2)
    monkeypatch.setattr(_cpu.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(srv_mod, "cpu_limit", lambda: 2, raising=False)
    monkeypatch.setattr(_cpu, "_read_stat", stat)
    monkeypatch.setattr(_cpu, "_pid_cpu", lambda pid: 0.0, raising=False)
    monkeypatch.setattr(_cpu, "_self_cpu", lambda: 0.0, raising=False)
    monkeypatch.setattr(_cpu, "ADAPT_INTERVAL", 0.05, raising=False)
    monkeypatch.setattr(_cpu, "ADAPT_COOLDOWN", 0.0, raising=False)
    gguf = tmp_path / "w.gguf"
    gguf.write_bytes(b"GGUF")
    return _load.load_backend(f"llamacpp:{gguf}"), stat


def _ask(be: Any) -> tuple[str, str]:
    return be.generate([ChatMessage(role="user", content="hi")]).text.split()[0], be.server.address


def _until(be: Any, want: str, seconds: float = 10.0) -> tuple[str, str]:
    """Ask until the reply starts with ``want`` (the watcher changes the threads on its own time)."""
    deadline = time.monotonic() + seconds
    while (got := _ask(be))[0] != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


def test_a_running_server_follows_the_free_cpus_on_the_same_port(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    be, stat = _serve(monkeypatch, tmp_path)
    try:
        text, url = _ask(be)
        assert text == "threads=2"
        stat.idle = [0.0, 0.0]  # two other jobs took both cores
        assert _until(be, "threads=1") == ("threads=1", url)  # restarted with 1 thread, same URL
        stat.idle = [1.0, 1.0]  # they ended
        assert _until(be, "threads=2") == ("threads=2", url)
        assert [(o, n) for o, n, _ in be.server.thread_changes] == [(2, 1), (1, 2)]
    finally:
        be.close()


def test_load_arriving_mid_request_cuts_it_off_and_sends_it_again(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    """Issue #39.3: a request in flight when the load arrives is not left to collapse beside it
    (the stub answers after 20 s with 2 threads, at once with 1: the old code, which changed the
    threads only between requests, returned the 2-thread reply after 20 s)."""
    slow = STUB_CHILD.replace("import http.server, json, sys, threading",
                              "import http.server, json, sys, threading, time").replace(
        '        text = "threads=%d', '        time.sleep(20 if cfg["threads"] > 1 else 0)\n        text = "threads=%d')
    assert slow != STUB_CHILD
    be, stat = _serve(monkeypatch, tmp_path, child=slow)
    try:
        url, t0 = be.server.address, time.monotonic()
        threading.Timer(0.3, lambda: setattr(stat, "idle", [0.0, 0.0])).start()  # load arrives mid-request
        assert _ask(be) == ("threads=1", url)
        assert time.monotonic() - t0 < 10
        assert [(o, n) for o, n, _ in be.server.thread_changes] == [(2, 1)]
        assert [cut for _, _, cut in be.server.thread_log] == [True]
    finally:
        be.close()


def test_a_shared_server_or_fixed_threads_are_never_restarted(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    be, stat = _serve(monkeypatch, tmp_path)
    try:
        be.endpoint()  # a memory system will call it over HTTP itself
        stat.idle = [0.0, 0.0]
        assert {_ask(be)[0] for _ in range(4)} == {"threads=2"}
    finally:
        be.close()
    from traceless.models import _load

    fixed = _load.load_backend(f"llamacpp:{tmp_path / 'w.gguf'}", num_threads=2)
    try:
        assert fixed.server.adapter is None
        assert {_ask(fixed)[0] for _ in range(4)} == {"threads=2"}
    finally:
        fixed.close()


def test_a_rise_waits_for_the_requests_in_flight(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    be, stat = _serve(monkeypatch, tmp_path)
    server = be.server
    stat.idle = [0.0, 0.0]
    assert _until(be, "threads=1")[0] == "threads=1"
    seen: list[int] = []
    orig = server._restart
    monkeypatch.setattr(server, "_restart", lambda n, **kw: (seen.append(server._in_flight), orig(n, **kw)))
    b_inside = threading.Event()

    def b() -> None:
        with server.serving():
            b_inside.set()

    try:
        with server.serving():  # request A in flight
            stat.idle = [1.0, 1.0]  # the load left
            assert server.adapter is not None
            deadline = time.monotonic() + 10
            while server.adapter.pending != 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            t = threading.Thread(target=b)  # request B: wants 2 threads
            t.start()
            time.sleep(0.3)
            assert (seen, b_inside.is_set(), server.threads) == ([], False, 1)  # B waits: A is being served
        t.join(10)
        assert b_inside.is_set() and seen == [0] and server.threads == 2
        assert _ask(be)[0] == "threads=2"
    finally:
        be.close()
