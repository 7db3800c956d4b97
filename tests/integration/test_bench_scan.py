"""bench/bench_scan.py on the real packages at a small size: the read-only scan finds every
planted canary in a record and in the files and changes no byte (the bench's own checks), and
a canary missing from the instance makes it fail."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.integration
BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "bench_scan.py", "--memories", "400", "--canaries", "5", "--reps", "1",
                           *args], cwd=BENCH, capture_output=True, text=True, timeout=600)


def _load_bench() -> object:
    spec = importlib.util.spec_from_file_location("bench_scan_under_test", BENCH / "bench_scan.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses resolve their annotations through it
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.parametrize("name, module", [("mem0", "mem0"), ("langgraph", "langgraph"),
                                          ("llamaindex", "llama_index.core"), ("agno", "agno"),
                                          ("openai-agents", "agents")])
def test_the_scan_bench_finds_every_canary_and_writes_nothing(name: str, module: str) -> None:
    pytest.importorskip(module)
    p = _run("--only", name)
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith(f"{name}: "))
    assert line.startswith(f"{name}: 400 memories") and "MISSED" not in line and "WROTE" not in line
    assert int(line.split(" hits")[0].rsplit(" ", 1)[1]) >= 5  # at least one hit per planted canary


def test_the_scan_bench_fails_when_a_canary_is_not_in_the_instance(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("agno")
    bench: Any = _load_bench()
    canaries = [bench.make_canary(np.random.default_rng(i)) for i in range(3)]
    real = bench.SYSTEMS["agno"]
    # the instance gets two of the three canaries: the bench must say the third is in no record
    bench.SYSTEMS["agno"] = bench.Spec(real.module, lambda root, n, cs: real.build(root, n, cs[:2]))
    result = bench.bench("agno", 40, canaries, 1, own=False)
    assert result is not None and result[0] is False
    out = capsys.readouterr().out
    assert "MISSED: ['canary 2 in no record']" in out and out.rstrip().endswith("FAIL")
