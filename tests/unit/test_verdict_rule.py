"""The one verdict rule (``traceless.metrics``) of the three paper reports: no verdict from two
equal units, NOT TESTABLE at a ceiling, BY CONSTRUCTION for the engine's guarantees, and an
"n needed" that matches what a seeded simulation of the same rule gives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from traceless.metrics import (
    CI,
    MIN_UNITS,
    Verdict,
    claim_verdict,
    combine_verdicts,
    construction_verdict,
    count_verdict,
    decides,
    n_needed,
    paired_ci,
    pinned,
    proportion_ci,
)
from traceless.report._replay import long_ratio_verdict, structural_max


def test_two_equal_units_decide_nothing() -> None:
    for ci in (CI(value=1.0, low=1.0, high=1.0, n=2), CI(value=0.0, low=0.0, high=0.0, n=2),
               paired_ci([0, 0], [0, 0]), paired_ci([1, 1], [0, 0]), proportion_ci(2, 2)):
        for region in ({"gt": 0.0}, {"ge": 0.0, "le": 0.0}, {"le": 0.05}):
            v = claim_verdict(ci, **region)
            assert v.verdict is Verdict.INCONCLUSIVE, (ci, region, v)
    # the paired interval of two all-equal units is not zero-width (a bootstrap's would be [0, 0])
    ci = paired_ci([0, 0], [0, 0])
    assert ci.high - ci.low > 1.0
    # three equal units no longer reproduce; six do (the stated minimum)
    assert claim_verdict(paired_ci([1] * 3, [0] * 3), gt=0).verdict is Verdict.INCONCLUSIVE
    assert claim_verdict(paired_ci([1] * MIN_UNITS, [0] * MIN_UNITS), gt=0).verdict is Verdict.REPRODUCED
    assert count_verdict(0, 2).verdict is Verdict.INCONCLUSIVE and count_verdict(1, 2).verdict is Verdict.CONTRADICTED
    # a 0/2 cell whose exact interval is [0, 0.84] contradicts nothing
    assert claim_verdict(paired_ci([0, 0], [0, 0]), gt=0).verdict is Verdict.INCONCLUSIVE


def test_ceiling_and_floor_are_not_testable() -> None:
    why = pinned("AER(k=1)", 1.0, "rise")
    assert why is not None and "ceiling" in why
    v = claim_verdict(CI(value=0.0, low=0.0, high=0.0, n=50), gt=0, testable=why is None, why_not=why or "")
    assert v.verdict is Verdict.NOT_TESTABLE and "ceiling" in v.fmt()
    assert "floor" in (pinned("AER(S=0)", 0.0, "drop") or "")
    assert pinned("AER(k=1)", 0.7, "rise") is None and pinned("AER(S=0)", 0.3, "drop") is None


def test_construction_checks_are_their_own_label() -> None:
    ok = construction_verdict(0, 4, "full_purge removes every tier")
    assert ok.verdict is Verdict.BY_CONSTRUCTION and "full_purge" in ok.fmt()
    broken = construction_verdict(1, 4, "full_purge removes every tier")
    assert broken.verdict is Verdict.CONTRADICTED and "violated" in broken.reason
    assert construction_verdict(0, 0, "x").verdict is Verdict.NOT_TESTABLE
    # a guarantee part never turns a measured claim into a reproduction, and a broken one is reported
    measured = claim_verdict(paired_ci([1] + [0] * 9, [0] * 10), gt=0)
    assert combine_verdicts(ok, measured).verdict is Verdict.INCONCLUSIVE
    assert combine_verdicts(ok, ok).verdict is Verdict.BY_CONSTRUCTION
    assert combine_verdicts(broken, measured).verdict is Verdict.CONTRADICTED


def _frontier_guarantees() -> list[str]:
    from traceless.metrics import bootstrap_ci
    from traceless.report._frontier import FrontierNumbers, findings, guarantees

    rng = np.random.default_rng(0)
    zero = bootstrap_ci(np.zeros(4), lambda a: float(np.mean(a)), rng)
    one = bootstrap_ci(np.ones(4), lambda a: float(np.mean(a)), rng)
    x = FrontierNumbers("m", {}, 4, 0, [0, 1], [1, 25], ["direct", "indirect"], ["noop", "raw_only", "full_purge",
                                                                                 "tombstone"])
    x.has_primary_frs = True
    x.aer = {0: one, 1: zero}
    x.pr = {0: zero, 1: zero}
    x.pua = {0: zero, 1: zero}
    x.delta_s = {1: one}
    x.pr_drop = {1: zero}
    x.delta_di = {0: one, 1: zero}
    x.aer_level = {0: {"direct": one, "indirect": zero}, 1: {"direct": zero, "indirect": zero}}
    x.aer_k = {0: {1: 1.0, 25: 1.0}, 1: {1: 0.0, 25: 0.0}}
    x.pr_k = {0: {1: 0.0, 25: 0.0}, 1: {1: 0.0, 25: 0.0}}
    x.in_context_k = {0: {1: 1.0, 25: 1.0}, 1: {1: 0.0, 25: 0.0}}
    x.claim_ci = {"pr_rise_k": zero, "aer_rise_k": zero, "kflat@1": zero, "kflat@0": zero, "di_drop": one}
    x.frs_worst = {m: {0: one if m == "noop" else zero, 1: zero} for m in x.modes}
    x.held = {m: {"raw": 4 if m == "noop" else 0, "summary@S=1": 0} for m in x.modes}
    x.kept_raw_only = {1: 0}
    found = findings(x)
    assert any(ln.startswith("**NOT TESTABLE (AER = 1.00 at every k (ceiling)") for ln in found), found
    assert not any("BY CONSTRUCTION" in ln for ln in found)
    return guarantees(x)


def test_frontier_construction_checks() -> None:
    g = _frontier_guarantees()
    for claim in ("full_purge drives", "tombstone drives", "S=0: raw_only deletion", "AER is flat across k",
                  "Δ_DI collapses"):
        assert any(claim in ln and ln.startswith("**BY CONSTRUCTION") for ln in g), (claim, g)


def _replay_row(suite: str, ep: int, op: str, **m: Any) -> Any:
    from traceless.studies import ResultRow

    metrics = {"any_leak": False, "cad": 0.0, "recomputed_tokens": 100.0, **m}
    return ResultRow(model_tag="t", key=f"main/{suite}/{ep}/{op}", group=f"{suite}/{ep}", config={}, seed=0,
                     model={}, code_version="x", prompt=None, reply=None, timing={"seconds": 1.0}, metrics=metrics,
                     extra={"suite": suite, "episode": f"{suite}/{ep}", "operator": op}, created=0.0)


def test_replay_construction_checks() -> None:
    from traceless.report._replay import replay_claims

    rows = []
    for i in range(3):
        for suite, mem in (("agentdojo", 0), ("toolsandbox", 1)):
            rows += [_replay_row(suite, i, "B0", any_leak=True, copies_after={"memory": mem}),
                     _replay_row(suite, i, "B1", any_leak=True), _replay_row(suite, i, "B5", recomputed_tokens=1000.0),
                     _replay_row(suite, i, "B7")]
    claims = {c.claim: c for c in replay_claims(rows, ["agentdojo", "toolsandbox"], lambda m, s: bool(m["any_leak"]),
                                                {}, 0)}
    b7 = claims["Selective replay matches the full reset (B7: any-leak and CAD as B5's)"]
    assert b7.guarantee and b7.verdict.verdict is Verdict.BY_CONSTRUCTION
    b1 = claims["B1 ≡ B0 where the target was never written to memory"]
    assert b1.guarantee and b1.verdict.verdict is Verdict.BY_CONSTRUCTION and b1.verdict.n == 3
    measured = claims["Memory deletion leaves leakage unchanged (B1 = B0 in every cell)"]
    assert not measured.guarantee and measured.verdict.verdict is Verdict.INCONCLUSIVE  # 3 written units < 6


def test_ratio_fixed_by_the_design_is_set_by_design() -> None:
    assert structural_max([16.0], [14.0]) == pytest.approx(16 / 3)
    short = [{"steps": 16, "tau": 14, "B5_tokens": 1000.0, "B7_tokens": 200.0} for _ in range(8)]
    v, text = long_ratio_verdict(short)
    assert v.verdict is Verdict.SET_BY_DESIGN and "out of reach by design" in v.reason and "5.3" in v.reason
    long = [{"steps": 64, "tau": 62, "B5_tokens": 4000.0 + 10 * i, "B7_tokens": 200.0} for i in range(8)]
    v, text = long_ratio_verdict(long)
    # a ratio within reach is still our design's number, never REPRODUCED; the maximum is shown beside it
    assert v.verdict is Verdict.SET_BY_DESIGN and "21.3" in v.reason and "structural maximum 21.3×" in text


def _power(draw: Callable[[np.random.Generator, int], CI], region: dict[str, float], n: int,
           rng: np.random.Generator, reps: int) -> float:
    return float(np.mean([decides(draw(rng, n), **region) is not None for _ in range(reps)]))


def _simulated_n(draw: Callable[[np.random.Generator, int], CI], region: dict[str, float], lo: int, hi: int) -> int:
    """Smallest n in [lo, hi] where the rule decides in ≥ 80% of seeded simulated samples (bisection)."""
    rng = np.random.default_rng(20261201)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _power(draw, region, mid, rng, 300) >= 0.8:
            hi = mid
        else:
            lo = mid
    return hi


def _paired_draw(p_first: float) -> Callable[[np.random.Generator, int], CI]:
    def draw(rng: np.random.Generator, n: int) -> CI:
        return paired_ci(rng.random(n) < p_first, np.zeros(n, dtype=bool))
    return draw


def _prop_draw(p: float) -> Callable[[np.random.Generator, int], CI]:
    def draw(rng: np.random.Generator, n: int) -> CI:
        return proportion_ci(int(rng.binomial(n, p)), n)
    return draw


@pytest.mark.parametrize("observed,region,draw", [
    (paired_ci([1] + [0] * 9, [0] * 10), {"gt": 0.0}, _paired_draw(0.1)),       # 1/10 forget, 0/10 clean: ΔRec > 0
    (proportion_ci(5, 10), {"gt": 0.3}, _prop_draw(0.5)),                       # 5/10 against a rate above 0.3
    (proportion_ci(0, 2), {"le": 0.05}, _prop_draw(0.0)),                       # 0/2 against a floor of 0.05
])
def test_n_needed_matches_simulation(observed: CI, region: dict[str, float],
                                     draw: Callable[[np.random.Generator, int], CI]) -> None:
    v = claim_verdict(observed, **region)
    assert v.verdict is Verdict.INCONCLUSIVE and v.n_needed is not None
    sim = _simulated_n(draw, region, 2, 200)
    assert abs(v.n_needed - sim) <= 0.2 * sim, (v.n_needed, sim)


def test_n_needed_at_the_boundary_and_old_bug() -> None:
    # 1/10 vs 0/10 used to print n ≈ 11 (n + 1 whenever the interval touched 0); ~70 are needed at 80% power
    assert n_needed(paired_ci([1] + [0] * 9, [0] * 10), gt=0) > 50
    assert n_needed(paired_ci([0, 0], [0, 0]), gt=0) is None  # the estimate sits on the boundary
    assert n_needed(proportion_ci(0, 2), le=0.05) == 72  # 1 − 0.025^(1/72) ≤ 0.05 < 1 − 0.025^(1/71)


def test_a_combined_verdict_with_a_part_of_no_units_says_which_part() -> None:
    """Two splits, one with no unit at all: the combined INCONCLUSIVE is n=0, and it says why
    (not a bare "n=0" next to the other split's observed effect)."""
    from traceless.metrics import ClaimVerdict, Verdict, combine_verdicts

    some = ClaimVerdict(verdict=Verdict.INCONCLUSIVE, n=1, min_n=6, n_needed=9, reason="1 units are fewer than 6")
    none = ClaimVerdict(verdict=Verdict.INCONCLUSIVE, n=0, min_n=6, n_needed=6, reason="ood: no R=1 unit among 1 profiles")
    text = combine_verdicts(some, none).fmt()
    assert text.startswith("INCONCLUSIVE (n=0 < 6 minimum") and text.endswith("; ood: no R=1 unit among 1 profiles)")
    assert "fewer than" not in combine_verdicts(some, some).fmt()
