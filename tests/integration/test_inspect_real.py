"""``inspect eval traceless/canary_audit`` on the command line against the real embedded
default model, served by llama.cpp on loopback (inspect's ``openai-api`` provider). The
.eval log is read back and its scores recomputed from the model events it recorded."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

if not os.environ.get("TRACELESS_REQUIRE_INSPECT"):  # CI sets it: there a missing extra fails, not skips
    pytest.importorskip("inspect_ai", reason="pip install 'traceless[inspect]'")
pytest.importorskip("xllamacpp")

from inspect_ai.event import ModelEvent  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402

import _inspect_ep  # noqa: E402  (tests/_inspect_ep.py: tests/ is on sys.path through its conftest)
from traceless.audit import PROBE_LEVELS, SystemAuditConfig, plant_canaries, probes  # noqa: E402
from traceless.models._catalog import assemble  # noqa: E402
from traceless.models._llamacpp_server import LlamaCppServer  # noqa: E402

pytestmark = pytest.mark.integration

MODEL = "qwen2.5-coder-0.5b-instruct"


def test_inspect_eval_cli_on_the_default_model(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parents[2] / "src"
    ep = _inspect_ep.ensure(tmp_path / "ep")
    threads = int(os.environ.get("TRACELESS_NUM_THREADS", "0")) or (os.cpu_count() or 2)
    with LlamaCppServer(assemble(MODEL), ctx=4096, threads=threads) as srv:
        env = {**os.environ, "LLAMACPP_BASE_URL": srv.base_url, "LLAMACPP_API_KEY": "local",
               "PYTHONPATH": os.pathsep.join([str(src), *([str(ep)] if ep else []),
                                              os.environ.get("PYTHONPATH", "")])}
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "inspect_ai", "eval", "traceless/canary_audit", "--model",
             f"openai-api/llamacpp/{srv.model}", "-T", "profiles=1", "-T", "k=2", "--log-dir", str(tmp_path / "logs"),
             "--display", "none"],
            env=env, capture_output=True, text=True, timeout=900)
        seconds = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (path,) = (tmp_path / "logs").glob("*.eval")
    log = read_eval_log(str(path), resolve_attachments=True)  # long prompts are stored as attachments
    assert log.status == "success", log.error
    (user,) = plant_canaries(SystemAuditConfig(profiles=1, seed=0))
    (sample,) = log.samples or []
    # recompute: each probe text is sent twice (before, then after the deletion), in order
    texts = {p.text: p.level for p in probes(PROBE_LEVELS, wordings=1)}
    seen: dict[str, list[float]] = {lv: [] for lv in PROBE_LEVELS}
    for ev in sample.events:
        if isinstance(ev, ModelEvent) and ev.input and ev.input[-1].text in texts:
            seen[texts[ev.input[-1].text]].append(float(user.canary in ev.output.completion))
    want = {f"{lv}_{ph}": v for lv, hits in seen.items() for ph, v in zip(("before", "after"), hits, strict=True)}
    assert sample.scores is not None
    assert sample.scores["canary_extraction"].value == want
    metrics = {n: m.value for n, m in log.results.scores[0].metrics.items()}  # type: ignore[union-attr]
    assert metrics["AER_max_before"] == max(want[f"{lv}_before"] for lv in PROBE_LEVELS)
    assert metrics["AER_max_after"] == max(want[f"{lv}_after"] for lv in PROBE_LEVELS)
    print(f"inspect eval canary_audit on {MODEL}: {seconds:.1f}s, {metrics}")
