"""Paper 002's 9.3× needs episodes that allow it: the T ≥ 32 long-episode configuration
(``long_steps=32``, ``long_min_ratio=10``, ``long_pad``) places every target so that
T/(T−τ+1) ≥ 10 on every suite, and the default placement (the committed long bundle's) is
unchanged. No model runs: episodes are generated only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from traceless.errors import ConfigError, StudyError
from traceless.report._replay import PAPER_LONG_RATIO, structural_max
from traceless.run import read_bundle_rows
from traceless.studies.replay import ReplayConfig, ReplayStudy, agentdojo_status, long_episodes
from traceless.studies.replay._suites import longmemeval_episodes, read_longmemeval_records

BUNDLE = Path(__file__).resolve().parents[2] / "docs" / "results" / "replay-long-smollm2"
LONG = {"long_episodes": 6, "long_steps": 32, "long_min_ratio": 10.0, "long_pad": True}


def _suites() -> list[str]:
    return ["longmemeval", "toolsandbox"] + (["agentdojo"] if agentdojo_status() is None else [])


@pytest.mark.parametrize("steps", [32, 40])
def test_long_episodes_allow_ten_times_on_every_suite(steps: int) -> None:
    cfg = ReplayConfig(**{**LONG, "long_steps": steps})
    for suite in _suites():
        eps = long_episodes(cfg, suite)
        assert len(eps) == cfg.long_episodes, suite
        for ep in eps:
            n_steps, tau = len(ep.observations), ep.tau
            assert n_steps == steps, ep.episode_id
            assert sum(ep.request.span in o.text for o in ep.observations) >= 1, ep.episode_id  # τ: the first
            assert n_steps / (n_steps - tau + 1) >= 10, (ep.episode_id, n_steps, tau)
        top = structural_max([float(len(e.observations)) for e in eps], [float(e.tau) for e in eps])
        assert top >= PAPER_LONG_RATIO, suite


def test_padded_longmemeval_keeps_the_instance_and_its_evidence() -> None:
    recs = {r["question_id"]: r for r in read_longmemeval_records(None)}
    eps = long_episodes(ReplayConfig(**LONG), "longmemeval")
    padded = 0
    assert len({e.episode_id for e in eps}) == len(eps)
    for ep in eps:
        rec = recs[ep.episode_id.split("/", 1)[1].split("@")[0]]
        assert ep.tasks[0].query == str(rec["question"])
        own = [t["content"] for s in rec["haystack_sessions"] for t in s
               if isinstance(t, dict) and t.get("role") == "user" and str(t.get("content", "")).strip()]
        evid = [t["content"] for s in rec["haystack_sessions"] for t in s
                if isinstance(t, dict) and t.get("role") == "user" and t.get("has_answer")]
        texts = " ".join(o.text for o in ep.observations)
        for e in evid[:3]:  # the instance's evidence survives padding (first 40 words of each turn)
            assert " ".join(str(e).split()[:10]) in texts, ep.episode_id
        assert texts.endswith(ep.observations[-1].text) and len(ep.observations) == 32
        padded += len(own) < 32
    assert padded  # the shipped subset needs padding at T = 32 (one instance has 32 user turns)


def test_without_padding_the_shipped_subset_is_too_short_and_says_how_to_fix() -> None:
    with pytest.raises(StudyError, match="long_pad=true"):
        longmemeval_episodes(6, 32, np.random.default_rng(0))


def test_default_placement_still_gives_the_committed_long_bundle() -> None:
    rows = read_bundle_rows(BUNDLE)
    config = json.loads((BUNDLE / "manifest.json").read_text())["config"]
    man = ReplayConfig(**{k: v for k, v in config.items() if k in ReplayConfig.model_fields})
    assert man.long_min_ratio == 0.0 and not man.long_pad
    got = {}
    for suite in man.suites:
        if suite == "agentdojo" and agentdojo_status() is not None:
            continue
        for i, ep in enumerate(long_episodes(man, suite)):
            got[f"long/{suite}/{i}"] = (ep.episode_id, ep.tau)
    want = {r.key: (r.extra["episode"], r.extra["tau"]) for r in rows if r.key in got}
    assert want and got == {k: got[k] for k in want} == want


def test_a_ratio_no_episode_can_reach_is_a_config_error() -> None:
    cfg = ReplayConfig(main=False, sweep=False, depths=[], long_episodes=1, long_steps=8, long_min_ratio=10)
    with pytest.raises(ConfigError, match="raise long_steps"):
        list(ReplayStudy().cells(cfg))
