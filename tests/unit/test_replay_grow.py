"""Growing a replay run on resume (``--resume --set episodes=N`` / ``long_episodes=N``): the
first n episodes of a larger count are the n episodes of the smaller one on every suite (so
stored cells keep their meaning), and a resumed run keeps every stored cell and adds only the
new episodes' cells. Other config changes are still refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_replay_study import lme_fixture, long_lme_fixture, toy_reply

from traceless.errors import ResumeError
from traceless.runtime import ToyKVBackend
from traceless.studies import derive_seed, read_rows, run_study
from traceless.studies.replay import SUITES, ReplayConfig, agentdojo_status, long_episodes


def _suites() -> list[str]:
    return ["longmemeval", "toolsandbox"] + (["agentdojo"] if agentdojo_status() is None else [])


def _sig(ep: object) -> tuple[object, ...]:
    return (ep.episode_id, ep.tau, tuple(o.text for o in ep.observations))  # type: ignore[attr-defined]


def _main(suite: str, n: int) -> list[tuple[object, ...]]:
    rng = np.random.default_rng(derive_seed(0, "episodes", suite))
    return [_sig(e) for e in SUITES.get(suite)(n, 4, rng)]


@pytest.mark.parametrize(("small", "large"), [(1, 3), (2, 6)])
def test_the_first_episodes_of_a_larger_count_are_the_smaller_counts(small: int, large: int) -> None:
    for suite in _suites():
        assert _main(suite, large)[:small] == _main(suite, small), suite
        cfg = ReplayConfig(main=False, long_episodes=small, long_steps=32, long_min_ratio=10, long_pad=True)
        grown = cfg.model_copy(update={"long_episodes": large})
        assert ([_sig(e) for e in long_episodes(grown, suite)][:small]
                == [_sig(e) for e in long_episodes(cfg, suite)]), suite


def test_resume_grows_episodes_and_keeps_the_stored_cells(tmp_path: Path) -> None:
    be = ToyKVBackend(toy_reply)
    cfg = ReplayConfig(suites=["longmemeval", "toolsandbox"], episodes=1, steps=4, samples=2, sweep=False, depths=[],
                       stochastic_episodes=0, operators=["B5", "B0", "B7"], long_episodes=1, oracle_fractions=[0.0],
                       longmemeval=str(long_lme_fixture(tmp_path / "lme.json")))
    out = tmp_path / "r"
    run_study("replay", out, cfg, backend=be, model_tag="toy", progress=False)
    before = {r.key: (r.metrics, r.extra["episode"]) for r in read_rows(out)}
    s = run_study("replay", out, cfg.model_copy(update={"episodes": 2, "long_episodes": 2}), resume=True,
                  backend=be, model_tag="toy", progress=False)
    assert s.finished and s.cells_skipped == len(before) == 8
    after = {r.key: (r.metrics, r.extra["episode"]) for r in read_rows(out)}
    assert {k: after[k] for k in before} == before and len(after) == 16
    assert {k for k in after if k.startswith("long/")} == {f"long/{s}/{i}" for s in cfg.suites for i in (0, 1)}


def test_resume_still_refuses_other_changes(tmp_path: Path) -> None:
    cfg = ReplayConfig(suites=["toolsandbox"], episodes=1, steps=4, samples=2, sweep=False, depths=[],
                       stochastic_episodes=0, operators=["B5", "B0"], longmemeval=str(lme_fixture(tmp_path / "l.json")))
    out = tmp_path / "r"
    run_study("replay", out, cfg, backend=ToyKVBackend(toy_reply), model_tag="toy", progress=False)
    with pytest.raises(ResumeError, match="steps: stored 4, now 5"):
        run_study("replay", out, cfg.model_copy(update={"episodes": 2, "steps": 5}), resume=True,
                  backend=ToyKVBackend(toy_reply), model_tag="toy", progress=False)
