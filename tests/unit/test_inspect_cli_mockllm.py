"""``inspect eval traceless/canary_audit --model mockllm/model`` exactly as a user types it,
offline. inspect's mockllm counts its default reply's tokens with tiktoken's ``o200k_base``,
which tiktoken otherwise downloads on first use; the test points ``TIKTOKEN_CACHE_DIR`` at
the copy the ``litellm`` wheel ships (a test dependency, never imported here)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

if not os.environ.get("TRACELESS_REQUIRE_INSPECT"):  # CI sets it: there a missing extra fails, not skips
    pytest.importorskip("inspect_ai", reason="pip install 'traceless[inspect]'; CI sets TRACELESS_REQUIRE_INSPECT=1")

from inspect_ai.event import ModelEvent  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402

import _inspect_ep  # noqa: E402
from traceless.audit import PROBE_LEVELS, SystemAuditConfig, plant_canaries  # noqa: E402

O200K = "fb374d419588a4632f3f557e76b4b70aebbca790"  # tiktoken's cache name: sha1 of the o200k_base URL


def _tiktoken_cache() -> Path:
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.origin, "the test extra installs litellm (for tiktoken's o200k_base file)"
    d = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    assert (d / O200K).is_file(), f"{d} lacks tiktoken's o200k_base file"
    return d


def test_inspect_eval_cli_with_mockllm_runs_offline(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parents[2] / "src"
    ep = _inspect_ep.ensure(tmp_path / "ep")
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(_tiktoken_cache()), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(src), *([str(ep)] if ep else []), os.environ.get("PYTHONPATH", "")])}
    env.pop("INSPECT_TELEMETRY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "inspect_ai", "eval", "traceless/canary_audit", "--model", "mockllm/model",
         "-T", "profiles=2", "-T", "embedder=hashing", "--log-dir", str(tmp_path / "logs"), "--display", "none"],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (path,) = (tmp_path / "logs").glob("*.eval")
    log = read_eval_log(str(path))
    assert log.status == "success", log.error
    assert log.eval.model == "mockllm/model"
    users = plant_canaries(SystemAuditConfig(profiles=2, seed=0))
    assert len(log.samples or []) == len(users) == 2
    # recomputed from the model events: mockllm's fixed reply holds no canary, so every AER is 0
    # — derived from what the model said, not assumed
    for sample in log.samples or []:
        replies = [ev.output.completion for ev in sample.events if isinstance(ev, ModelEvent)]
        assert replies and all(u.canary not in r for u in users for r in replies)
        assert sample.scores is not None
        assert set(sample.scores["canary_extraction"].value) == {  # type: ignore[arg-type]
            f"{lv}_{ph}" for lv in PROBE_LEVELS for ph in ("before", "after")}
    metrics = {n: m.value for n, m in log.results.scores[0].metrics.items()}  # type: ignore[union-attr]
    assert metrics["AER_max_before"] == metrics["AER_max_after"] == 0.0
