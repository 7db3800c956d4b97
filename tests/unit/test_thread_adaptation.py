"""A running llama.cpp server's threads follow the CPUs free to the process (issue #27 item 1):
re-read between requests, rate-limited, only on a persistent change, applied by restarting the
server between requests on the same port. No model: the CPU readings are injected and the
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
                           cooldown=0)
    clock.t = 1
    assert a.propose() is None  # 1.7 free: a partly taken core does not count, stays 1
    clock.t = 2
    first = a.propose()
    clock.t = 3
    second = a.propose()  # 7.5 free, capped at the mask: 4; nearest of (2, 4) is 2
    assert (first, second) == (None, 2)


def test_the_cooldown_holds_a_change_back() -> None:
    clock = Clock()
    a = _cpu.ThreadAdapter(2, lambda: 0.5, max_threads=2, clock=clock, interval=1, persist=2, cooldown=30)
    seen = {}
    for t in range(1, 40):
        clock.t = t
        seen[t] = a.propose()
    assert [t for t, v in seen.items() if v is not None][0] == 30


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


def test_the_meter_reads_this_machine(tmp_path: Path) -> None:
    m = _cpu.CpuMeter(lambda: [])
    if m.read() is None and not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat")
    time.sleep(0.05)
    free = m.read()
    assert free is not None and 0.0 <= free <= len(m.cpus) + 1.0


def _serve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Any, FakeStat]:
    """``load_backend('llamacpp:FILE')`` on the stub child, 2 CPUs, free CPUs from a FakeStat."""
    from traceless.models import _load

    stat = FakeStat()
    monkeypatch.setattr(srv_mod, "_CHILD", STUB_CHILD)
    monkeypatch.setattr(_load, "free_cpus", lambda: 2)
    monkeypatch.setattr(_cpu.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(srv_mod, "cpu_limit", lambda: 2, raising=False)
    monkeypatch.setattr(_cpu, "_read_stat", stat)
    monkeypatch.setattr(_cpu, "_pid_cpu", lambda pid: 0.0, raising=False)
    monkeypatch.setattr(_cpu, "_self_cpu", lambda: 0.0, raising=False)
    monkeypatch.setattr(_cpu, "ADAPT_INTERVAL", 0.0, raising=False)
    monkeypatch.setattr(_cpu, "ADAPT_COOLDOWN", 0.0, raising=False)
    gguf = tmp_path / "w.gguf"
    gguf.write_bytes(b"GGUF")
    return _load.load_backend(f"llamacpp:{gguf}"), stat


def _ask(be: Any) -> tuple[str, str]:
    return be.generate([ChatMessage(role="user", content="hi")]).text.split()[0], be.server.address


def test_a_running_server_follows_the_free_cpus_on_the_same_port(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    be, stat = _serve(monkeypatch, tmp_path)
    try:
        text, url = _ask(be)
        assert text == "threads=2"
        stat.idle = [0.0, 0.0]  # two other jobs took both cores
        replies = [_ask(be) for _ in range(3)]
        assert replies[0] == ("threads=2", url)  # one reading is not persistent
        assert replies[-1] == ("threads=1", url)  # restarted with 1 thread, same URL
        stat.idle = [1.0, 1.0]  # they ended
        assert [_ask(be) for _ in range(3)][-1] == ("threads=2", url)
        assert [(o, n) for o, n, _ in be.server.thread_changes] == [(2, 1), (1, 2)]
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


def test_a_restart_waits_for_the_requests_in_flight(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    be, stat = _serve(monkeypatch, tmp_path)
    server = be.server
    assert server.meter is not None
    server.adapter = _cpu.ThreadAdapter(2, server.meter.read, max_threads=2, interval=0, persist=1, cooldown=0)
    seen: list[int] = []
    orig = server._restart
    monkeypatch.setattr(server, "_restart", lambda n: (seen.append(server._in_flight), orig(n)))
    release, b_inside = threading.Event(), threading.Event()

    def b() -> None:
        with server.serving():
            b_inside.set()

    try:
        with server.serving():  # request A in flight (2 free: no change)
            stat.idle = [0.0, 0.0]
            t = threading.Thread(target=b)  # request B: 0 free, wants 1 thread
            t.start()
            time.sleep(0.3)
            assert (seen, b_inside.is_set()) == ([], False)  # B waits: A is still being served
            release.set()
        t.join(10)
        assert b_inside.is_set() and seen == [0] and server.threads == 1
        assert _ask(be)[0] == "threads=1"
    finally:
        be.close()
