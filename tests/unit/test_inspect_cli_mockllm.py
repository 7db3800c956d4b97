"""``inspect eval traceless/canary_audit --model mockllm/model`` exactly as a user types it,
offline, with an empty tiktoken cache and no tiktoken setting. inspect's mockllm counts its
default reply's tokens with tiktoken's ``o200k_base``, which tiktoken otherwise downloads on
first use; the task seeds tiktoken's cache from the copy an installed wheel ships (the
``test`` extra's ``litellm``, never imported)."""

from __future__ import annotations

import hashlib
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
from traceless._inspect._offline import (  # noqa: E402
    O200K_CACHE_NAME,
    O200K_SHA256,
    bundled_o200k,
    seed_tiktoken_cache,
    tiktoken_cache_dir,
)
from traceless.audit import PROBE_LEVELS, SystemAuditConfig, plant_canaries  # noqa: E402


def test_seed_tiktoken_cache(tmp_path: Path) -> None:
    assert bundled_o200k() is not None, "the test extra installs litellm (for tiktoken's o200k_base file)"
    target = seed_tiktoken_cache({"TIKTOKEN_CACHE_DIR": str(tmp_path / "c")})
    assert target == tmp_path / "c" / O200K_CACHE_NAME
    assert hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256
    target.write_bytes(b"damaged")  # a damaged cache file is replaced, as tiktoken would re-fetch it
    assert seed_tiktoken_cache({"DATA_GYM_CACHE_DIR": str(tmp_path / "c")}) == target
    assert hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256
    assert seed_tiktoken_cache({"TIKTOKEN_CACHE_DIR": ""}) is None  # caching off: nothing written
    assert tiktoken_cache_dir({}) is not None


def test_inspect_eval_cli_with_mockllm_runs_offline(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parents[2] / "src"
    ep = _inspect_ep.ensure(tmp_path / "ep")
    tmp = tmp_path / "tmp"  # tiktoken's default cache dir is TMPDIR/data-gym-cache: empty here
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(src), *([str(ep)] if ep else []), os.environ.get("PYTHONPATH", "")])}
    for name in ("INSPECT_TELEMETRY", "TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        env.pop(name, None)
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
    assert {f"AER_{lv}_{ph}_stderr" for lv in PROBE_LEVELS for ph in ("before", "after")} <= set(metrics)
    assert (tmp / "data-gym-cache" / O200K_CACHE_NAME).is_file()  # seeded, not downloaded
