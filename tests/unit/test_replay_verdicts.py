"""The replay report judges paper 002's claims with ``claim_verdict``: REPRODUCED / CONTRADICTED /
INCONCLUSIVE (with the n that would decide) / NOT TESTABLE, on paired (suite, episode) units."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from test_replay_study import toy_reply

from traceless.metrics import Verdict
from traceless.report._replay import render_replay, replay_claims
from traceless.runtime import ToyKVBackend
from traceless.studies import ResultRow, run_study
from traceless.studies.replay import ReplayConfig

B1_CLAIM = "Memory deletion leaves leakage unchanged"


def row(suite: str, ep: int, op: str, **m: Any) -> ResultRow:
    metrics = {"any_leak": False, "cad": 0.0, "recomputed_tokens": 100.0, **m}
    return ResultRow(model_tag="t", key=f"main/{suite}/{ep}/{op}", group=f"{suite}/{ep}", config={}, seed=0,
                     model={}, code_version="x", prompt=None, reply=None, timing={"seconds": 1.0}, metrics=metrics,
                     extra={"suite": suite, "episode": f"{suite}/{ep}", "operator": op}, created=0.0)


def verdicts(rows: list[ResultRow]) -> dict[str, Any]:
    claims = replay_claims(rows, sorted({r.extra["suite"] for r in rows}), lambda m, s: bool(m["any_leak"]), {}, 0)
    return {c.claim.split(" (")[0]: c.verdict for c in claims}


def b1_world(b1_leaks: list[bool]) -> list[ResultRow]:
    """B0 leaks in every episode; B1 leaks where told; B5 never; B7 as B5 at a tenth of its tokens."""
    rows = []
    for i, leak in enumerate(b1_leaks):
        rows += [row("s", i, "B0", any_leak=True), row("s", i, "B1", any_leak=leak),
                 row("s", i, "B5", recomputed_tokens=1000.0), row("s", i, "B7", recomputed_tokens=100.0)]
    return rows


def test_b1_claim_takes_each_verdict() -> None:
    assert verdicts(b1_world([True] * 6))[B1_CLAIM].verdict is Verdict.REPRODUCED
    assert verdicts(b1_world([False] * 6))[B1_CLAIM].verdict is Verdict.CONTRADICTED  # deletion stopped every leak
    mixed = verdicts(b1_world([True, True, True, True, False, True]))[B1_CLAIM]
    assert mixed.verdict is Verdict.CONTRADICTED and mixed.n == 6  # "in every cell": one counterexample
    one = verdicts(b1_world([True]))[B1_CLAIM]
    assert one.verdict is Verdict.INCONCLUSIVE and "n=1 < 6 minimum" in one.fmt()
    # an agent that never leaks, even without forgetting: B1 = B0 = 0 holds trivially, so it is no test
    mute = [r.model_copy(update={"metrics": {**r.metrics, "any_leak": False}}) for r in b1_world([False] * 6)]
    v = verdicts(mute)
    assert v[B1_CLAIM].verdict is Verdict.NOT_TESTABLE and "nothing to forget" in v[B1_CLAIM].fmt()
    assert v["Forget-instructions collapse under elicitation"].verdict is Verdict.NOT_TESTABLE


def test_other_claims_pair_by_episode_and_say_when_untestable() -> None:
    v = verdicts(b1_world([True] * 6))
    assert v["Selective replay matches the full reset"].verdict is Verdict.BY_CONSTRUCTION  # greedy: B7 ≡ B5
    assert v["B7 recomputes fewer tokens than B5"].verdict is Verdict.REPRODUCED  # ratio 10 in every episode
    assert v["B3 still acts on a revoked preference without its string"].verdict is Verdict.NOT_TESTABLE
    assert v["Later injection lowers B7 recomputation"].verdict is Verdict.NOT_TESTABLE  # no sweep
    leaky_b7 = b1_world([True] * 6)
    leaky_b7[3] = row("s", 0, "B7", any_leak=True, cad=0.5, recomputed_tokens=100.0)
    assert verdicts(leaky_b7)["Selective replay matches the full reset"].verdict is Verdict.CONTRADICTED  # a bug


def test_report_prints_a_verdict_for_every_claim(tmp_path: Path) -> None:
    cfg = ReplayConfig(suites=["toolsandbox"], episodes=3, steps=4, samples=1, stochastic_episodes=0,
                       operators=["B5", "B0", "B1", "B2", "B3", "B7"], depths=[])
    run_study("replay", tmp_path / "r", cfg, backend=ToyKVBackend(toy_reply), model_tag="toy", progress=False)
    text = render_replay(tmp_path / "r").read_text()
    findings = text.split("### Findings", 1)[1].split("\n### ", 1)[0]
    claims = [ln for ln in findings.splitlines() if re.match(r"\d+\. ", ln)]
    assert len(claims) == 9
    for ln in claims:
        assert re.search(r"\*\*(REPRODUCED|CONTRADICTED|INCONCLUSIVE|NOT TESTABLE)", ln), ln
    # the toy agent leaks whatever it saw: B7 (replayed without the target) matches the reset, by construction
    guarantees = text.split("### Regression guarantees (hold by construction)", 1)[1]
    assert re.search(r"Selective replay matches the full reset .*\*\*BY CONSTRUCTION", guarantees)
