"""bench/bench_scan.py on the real mem0 and LangGraph packages at a small size: the scan
finds every planted canary where each system keeps it (the bench's own check), and a wrong
expectation makes it exit 1."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.integration
BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "bench_scan.py", "--memories", "400", "--canaries", "5", "--reps", "1",
                           *args], cwd=BENCH, capture_output=True, text=True, timeout=600)


def test_the_scan_bench_finds_every_canary_in_both_systems() -> None:
    pytest.importorskip("mem0")
    pytest.importorskip("langgraph")
    p = _run()
    assert p.returncode == 0, p.stdout + p.stderr
    assert "mem0: 400 memories" in p.stdout and "'vector_store': 10, 'history': 5" in p.stdout
    assert "langgraph: 400 memories" in p.stdout and "'store_items': 5, 'checkpoints': 15, 'writes': 5" in p.stdout


def test_the_scan_bench_fails_when_a_canary_is_not_where_it_should_be(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("langgraph")
    spec = importlib.util.spec_from_file_location("bench_scan_under_test", BENCH / "bench_scan.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    canaries = [bench.make_canary(np.random.default_rng(1))]
    sessions = bench._langgraph_sessions(8, canaries)
    ok = bench._bench("langgraph", {"summarize": False}, 8, canaries, 1, lambda s: s.write(sessions),
                      {"store_items": 2})  # the canary is in one item, not two
    out = capsys.readouterr().out
    assert ok is False and "WRONG (found, expected): {'store_items': (1, 2)}" in out and out.rstrip().endswith("FAIL")


@pytest.mark.parametrize("name, module, copies", [
    ("agno", "agno", "{'agno_memories': 10, 'agno_runs': 5, 'agno_schema_versions': 0, 'agno_sessions': 0}"),
    ("openai-agents", "agents", "{'agent_messages': 5, 'agent_sessions': 0}")])
def test_the_scan_bench_finds_every_canary_in_the_sqlite_backed_adapters(name: str, module: str, copies: str) -> None:
    pytest.importorskip(module)
    p = _run("--only", name)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{name}: 400 memories" in p.stdout and copies in p.stdout
