"""The local engines' threads follow the CPUs free to the process; n-gram speculation is an
opt-in server setting recorded in the model identity (issue #27 items 1, 2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from traceless.errors import BackendError, ConfigError
from traceless.models import _cpu, parse_speculation
from traceless.models import _llamacpp_server as srv_mod
from traceless.models._llamacpp_server import LlamaCppServer


def _stat(*cpus: tuple[int, int]) -> str:
    """A /proc/stat text: per CPU (busy jiffies, idle jiffies)."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{i} {busy} 0 0 {idle} 0 0 0 0 0 0" for i, (busy, idle) in enumerate(cpus)]
    return "\n".join([*lines, "intr 1 2 3", "ctxt 5"]) + "\n"


def test_idle_cpus_counts_idle_time_of_the_given_cpus_only() -> None:
    before = _stat((100, 100), (100, 100), (0, 0))
    after = _stat((200, 100), (150, 150), (0, 100))  # cpu0 busy, cpu1 half idle, cpu2 idle
    assert _cpu.idle_cpus(before, after, [0, 1]) == pytest.approx(0.5)
    assert _cpu.idle_cpus(before, after, [0, 1, 2]) == pytest.approx(1.5)


def _fake(monkeypatch: pytest.MonkeyPatch, busy: list[bool], own: float = 0.0) -> int:
    """free_cpus on a 4-CPU affinity mask whose CPUs are busy or idle as given."""
    monkeypatch.setattr(_cpu.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    snaps = iter([_stat(*[(0, 0)] * 4), _stat(*[(100, 0) if b else (0, 100) for b in busy])])
    cpu, wall = iter([0.0, own]), iter([0.0, 1.0])
    return _cpu.free_cpus(0.0, read_stat=lambda: next(snaps), own_cpu=lambda: next(cpu), clock=lambda: next(wall))


def test_free_cpus_takes_the_idle_cpus_not_the_core_count(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _fake(monkeypatch, [False] * 4) == 4
    assert _fake(monkeypatch, [True, True, True, False]) == 1
    assert _fake(monkeypatch, [True] * 4) == 1  # never 0


def test_free_cpus_counts_this_process_own_cpu_as_free(monkeypatch: pytest.MonkeyPatch) -> None:
    # 1 s of own CPU in the 1 s window: the CPU the engine will take over
    assert _fake(monkeypatch, [True, True, False, False], own=1.0) == 3


def _server_started_by_load_backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **kw: Any) -> LlamaCppServer:
    """The LlamaCppServer ``load_backend('llamacpp:FILE')`` builds, without starting it."""
    from traceless.models import _load, _served

    gguf = tmp_path / "w.gguf"
    gguf.write_bytes(b"GGUF")
    built: list[LlamaCppServer] = []
    monkeypatch.setattr(LlamaCppServer, "start", lambda self: built.append(self) or self)

    class _Backend:
        def __init__(self, server: LlamaCppServer, **_: Any) -> None:
            self.server = server

    monkeypatch.setattr(_served, "ServedBackend", _Backend)
    _load.load_backend(f"llamacpp:{gguf}", **kw)
    return built[0]


def test_llamacpp_threads_default_to_the_free_cpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from traceless.models import _load

    monkeypatch.delenv("TRACELESS_NUM_THREADS", raising=False)
    monkeypatch.setattr(_load.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(_load, "free_cpus", lambda: 1, raising=False)
    assert _server_started_by_load_backend(monkeypatch, tmp_path).threads == 1
    assert _server_started_by_load_backend(monkeypatch, tmp_path, num_threads=3).threads == 3


def test_speculation_goes_to_the_server_child_and_into_the_identity(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    srv = _server_started_by_load_backend(monkeypatch, tmp_path, speculation="ngram-map-k:8", num_threads=1)
    assert (srv.speculation, srv.draft_max) == ("ngram-map-k", 8)
    assert srv.engine()["speculation"] == {"type": "ngram-map-k", "draft_max": 8, "ngram_size": 3}
    plain = _server_started_by_load_backend(monkeypatch, tmp_path, num_threads=1)
    assert "speculation" not in plain.engine()

    argv: list[list[str]] = []

    def popen(args: list[str], **_: Any) -> subprocess.Popen[str]:
        argv.append(args)
        raise OSError("not started in a unit test")

    monkeypatch.undo()
    monkeypatch.setattr(srv_mod.subprocess, "Popen", popen)
    with pytest.raises(BackendError):
        srv.start()
    cfg = json.loads(argv[0][-1])
    assert (cfg["speculation"], cfg["draft_max"], cfg["ngram_size"]) == ("ngram-map-k", 8, 3)


def test_the_child_sets_llama_cpp_speculative_params() -> None:
    xlc = pytest.importorskip("xllamacpp")
    block = srv_mod._CHILD.split("    spec = cfg.get")[1].split("    if cfg.get(\"alias\")")[0]
    p = xlc.CommonParams()
    exec("spec = cfg.get" + block.replace("\n    ", "\n"), {"cfg": {"speculation": "ngram-simple", "draft_max": 5,
                                                                   "ngram_size": 2}, "xlc": xlc, "p": p})
    assert p.speculative.types == [xlc.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
    assert (p.speculative.ngram_simple.size_m, p.speculative.ngram_simple.size_n) == (5, 2)


@pytest.mark.parametrize("bad", ["ngram", "ngram-map-k:0", "ngram-map-k:x", "draft-simple"])
def test_a_bad_speculation_is_a_config_error_naming_the_choices(bad: str) -> None:
    with pytest.raises(ConfigError, match="ngram-map-k"):
        parse_speculation(bad)
    assert parse_speculation("none") == ("none", 16)
    assert parse_speculation("NGRAM-MOD:32") == ("ngram-mod", 32)


def test_cli_audit_refuses_a_bad_speculation_before_anything_runs(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.cli import main

    with pytest.raises(SystemExit) as e:
        main(["audit", "--speculation", "ngram-bogus", "--model", "scripted", "--embedder", "hashing",
              "--out", str(tmp_path / "a")])
    assert e.value.code == 2
    assert "use TYPE[:DRAFT_MAX]" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
