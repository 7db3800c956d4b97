"""Paper 000 metrics with hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from traceless.metrics import (
    STOPWORDS,
    aer,
    aer_max,
    agreement,
    bootstrap_ci,
    content_match,
    content_words,
    delta_di,
    delta_s,
    frs_worst,
    pr_judge,
    pr_judge_many,
    pua,
)
from traceless.models import Embedder


class TableEmbedder(Embedder):
    """Returns fixed unit vectors per text (cosine = dot products chosen by the test)."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.dim = 2
        self.name = "table"

    def embed(self, texts: list[str]) -> np.ndarray:  # type: ignore[type-arg]
        out = np.array([self.table[t] for t in texts], dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_pua_hand_computed() -> None:
    # sorted by AER: 0.70 → PR* .42 until .75; .50 until .86; .66 until 1
    pts = [(0.66, 0.86), (0.42, 0.70), (0.50, 0.75)]
    assert pua(pts) == pytest.approx(0.42 * 0.05 + 0.50 * 0.11 + 0.66 * 0.14)
    # a later point with lower PR does not lower the envelope
    assert pua([(0.6, 0.2), (0.5, 0.4)]) == pytest.approx(0.6 * 0.2 + 0.6 * 0.6)
    # k-flat frontier (one operating point): PR × (1 − AER)
    assert pua([(0.56, 0.20)] * 5) == pytest.approx(0.56 * 0.80)
    assert pua([(0.5, 0.0)]) == pytest.approx(0.5)
    assert pua([(0.9, 1.0)]) == 0.0
    assert pua([]) == 0.0
    # PR* is 0 below the smallest AER, so a perfectly private useful point scores highest
    assert pua([(0.5, 0.0)]) > pua([(0.5, 0.3)])


def test_rates_and_deltas() -> None:
    assert aer([True, False, False, True]) == 0.5
    assert aer([]) == 0.0
    assert aer_max({"direct": 0.3, "indirect": 0.5, "jailbreak": 0.1}) == 0.5
    assert delta_s(0.83, 0.20) == pytest.approx(0.63)
    assert delta_di(0.4, 0.56) == pytest.approx(0.16)
    assert frs_worst({"raw": 0.0, "summary": 0.2}) == 0.2


def test_content_words_and_rule() -> None:
    assert "the" in STOPWORDS
    assert content_words("The name of my dog is Biscuit") == ["name", "dog", "biscuit"]
    assert content_words("$420") == ["420"]
    assert content_match("You earned $420 at the market.", "$420")
    assert content_match("biscuit!", "Biscuit")
    assert not content_match("It was 42 km", "42 kilometres")
    # number words count as their digits, both ways
    assert content_match("I currently own four bikes.", "4")
    assert content_match("It took 3 days", "three days")
    assert not content_match("I own one bike.", "4")
    assert content_words("Twenty-one") == ["20", "1"]
    assert not content_match("anything", "the of")  # no content words: rule never fires


def test_pr_rule_threshold_is_strict() -> None:
    emb = TableEmbedder({"a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.5, np.sqrt(0.75)], "d": [0.0, 1.0]})
    j = pr_judge("a", "b", emb)
    assert j.cosine == pytest.approx(0.6) and j.correct and not j.content
    j = pr_judge("a", "c", emb)  # cosine exactly 0.5 is not > 0.5
    assert j.cosine == pytest.approx(0.5, abs=1e-6) and not j.correct
    many = pr_judge_many([("a", "d"), ("d", "d")], emb)
    assert [m.correct for m in many] == [False, True]


def test_bootstrap_is_seeded_and_sane() -> None:
    data = np.array([1, 0, 1, 1, 0, 1, 0, 1, 1, 1], dtype=float)
    a = bootstrap_ci(data, np.mean, np.random.default_rng(3), n_resamples=500)
    b = bootstrap_ci(data, np.mean, np.random.default_rng(3), n_resamples=500)
    assert a == b
    cont = np.random.default_rng(0).normal(size=40)
    c1 = bootstrap_ci(cont, np.mean, np.random.default_rng(4), n_resamples=300)
    c2 = bootstrap_ci(cont, np.mean, np.random.default_rng(5), n_resamples=300)
    assert c1.value == c2.value and (c1.low, c1.high) != (c2.low, c2.high)
    assert a.value == pytest.approx(0.7) and a.low <= 0.7 <= a.high and a.low >= 0.3 and a.high <= 1.0
    assert a.n == 10
    const = bootstrap_ci(np.ones(8), np.mean, np.random.default_rng(0))
    assert (const.value, const.low, const.high) == (1.0, 1.0, 1.0)
    # joint resampling of a composite statistic: max over columns of column means
    m = np.array([[1, 0], [0, 0], [1, 1], [0, 0]], dtype=float)
    ci = bootstrap_ci(m, lambda x: float(x.mean(axis=0).max()), np.random.default_rng(1), n_resamples=200)
    assert ci.value == pytest.approx(0.5) and 0.0 <= ci.low <= 0.5 <= ci.high <= 1.0
    assert ci.fmt() == f"0.50 [{ci.low:.2f}, {ci.high:.2f}]"
    empty = bootstrap_ci(np.zeros((0,)), np.mean, np.random.default_rng(0))
    assert empty.n == 0


def test_agreement_kappa() -> None:
    r = agreement([True, True, False, False], [True, False, False, False])
    assert r["agreement"] == 0.75 and r["kappa"] == pytest.approx(0.5)
    assert r["a_only"] == 1 and r["b_only"] == 0


# ---------------------------------------------------------------- verdicts (issue #12.15)
def test_issue_example_is_inconclusive_not_contradicted() -> None:
    """AER 0.50 → 0.00 under S=1 on two conversations: Δ_S = 0.50 [0.00, 1.00]. The point
    estimate agrees with the paper, the interval cannot decide."""
    from traceless.metrics import CI, Verdict, claim_verdict

    v = claim_verdict(CI(value=0.5, low=0.0, high=1.0, n=2), gt=0.0)
    assert v.verdict is Verdict.INCONCLUSIVE
    assert v.n_needed is not None and v.n_needed > 2
    assert "INCONCLUSIVE" in v.fmt() and "n ≈" in v.fmt()


def test_claim_verdict_four_outcomes() -> None:
    from traceless.metrics import CI, Verdict, claim_verdict

    def ci(v: float, lo: float, hi: float, n: int = 50) -> CI:
        return CI(value=v, low=lo, high=hi, n=n)

    assert claim_verdict(ci(0.6, 0.5, 0.7), gt=0).verdict is Verdict.REPRODUCED
    assert claim_verdict(ci(-0.2, -0.3, -0.1), gt=0).verdict is Verdict.CONTRADICTED
    # a zero-width bootstrap at 0 is widened to what 50 unanimous units show (±0.071): it decides nothing
    assert claim_verdict(ci(0.0, 0.0, 0.0), gt=0).verdict is Verdict.INCONCLUSIVE
    assert claim_verdict(ci(0.0, 0.0, 0.0), le=0.1).verdict is Verdict.REPRODUCED
    assert claim_verdict(ci(0.1, 0.04, 0.16), ge=0, le=0).verdict is Verdict.CONTRADICTED
    v = claim_verdict(ci(0.04, 0.0, 0.1), ge=0, le=0)
    assert v.verdict is Verdict.INCONCLUSIVE and v.n_needed is not None and v.n_needed > 50
    on_edge = claim_verdict(ci(0.0, -0.1, 0.1), gt=0)
    assert on_edge.verdict is Verdict.INCONCLUSIVE and on_edge.n_needed is None
    assert claim_verdict(ci(0.03, 0.0, 0.06), le=0.05).verdict is Verdict.INCONCLUSIVE
    assert claim_verdict(ci(0.03, 0.0, 0.05), le=0.05).verdict is Verdict.REPRODUCED
    assert claim_verdict(None, gt=0).verdict is Verdict.NOT_TESTABLE
    assert claim_verdict(ci(float("nan"), float("nan"), float("nan")), gt=0).verdict is Verdict.NOT_TESTABLE
    nt = claim_verdict(ci(0.5, 0.4, 0.6), gt=0, testable=False, why_not="nothing leaked under noop")
    assert nt.verdict is Verdict.NOT_TESTABLE and "nothing leaked" in nt.fmt()


def test_n_needed_is_an_80_percent_power_calculation() -> None:
    """n needed = ((z_0.975 + z_0.8)·σ/d)² with the per-unit σ behind the interval: at that n an
    interval of the expected width around the true value misses the boundary by z_0.8·σ/√n."""
    from traceless.metrics import CI, Verdict, claim_verdict

    c = CI(value=0.2, low=-0.1, high=0.5, n=10)
    v = claim_verdict(c, gt=0)
    assert v.verdict is Verdict.INCONCLUSIVE and v.n_needed is not None
    sd = 0.6 / (2 * 1.959964) * 10 ** 0.5
    assert v.n_needed == pytest.approx(((1.959964 + 0.841621) * sd / 0.2) ** 2, abs=1)


def test_combine_verdicts() -> None:
    from traceless.metrics import ClaimVerdict, Verdict, combine_verdicts

    R, C, Inc, N, B, _ = (ClaimVerdict(verdict=v, n=5, n_needed=9 if v is Verdict.INCONCLUSIVE else None)
                     for v in Verdict)
    assert combine_verdicts(R, B).verdict is Verdict.REPRODUCED and combine_verdicts(B, B).verdict is B.verdict
    assert combine_verdicts(R, R).verdict is Verdict.REPRODUCED
    assert combine_verdicts(R, Inc).verdict is Verdict.INCONCLUSIVE and combine_verdicts(R, Inc).n_needed == 9
    assert combine_verdicts(Inc, C).verdict is Verdict.CONTRADICTED
    assert combine_verdicts(C, N).verdict is Verdict.CONTRADICTED  # one failed part sinks it (issue 37)
    assert combine_verdicts(R, N).verdict is Verdict.NOT_TESTABLE


def test_either_verdict() -> None:
    from traceless.metrics import ClaimVerdict, Verdict, either_verdict

    R, C, Inc, N, B, _ = (ClaimVerdict(verdict=v, n=5, n_needed=9 if v is Verdict.INCONCLUSIVE else None)
                     for v in Verdict)
    assert either_verdict(C, B).verdict is Verdict.BY_CONSTRUCTION
    assert either_verdict(C, R).verdict is Verdict.REPRODUCED
    assert either_verdict(C, C).verdict is Verdict.CONTRADICTED
    assert either_verdict(C, Inc).verdict is Verdict.INCONCLUSIVE
    assert either_verdict(N, N).verdict is Verdict.NOT_TESTABLE
    assert either_verdict(N, C).verdict is Verdict.NOT_TESTABLE  # the untested part might hold (issue 37)


def test_pr_ignores_missing_answers() -> None:
    import math

    from traceless.metrics import pr

    assert pr([True, False, float("nan"), True]) == pytest.approx(2 / 3)
    assert math.isnan(pr([float("nan")]))


def test_one_unit_gives_no_verdict() -> None:
    from traceless.metrics import CI, Verdict, claim_verdict

    assert claim_verdict(CI(value=0.6, low=0.6, high=0.6, n=1), gt=0).verdict is Verdict.INCONCLUSIVE


def test_aer_columns_equals_aer_of_each_column_bit_for_bit() -> None:
    # the report's bootstrap takes per-column AERs in one call; any other summation order
    # would move a rate in its last bits and, at a rounding edge, a published table digit
    from traceless.metrics import aer, aer_columns

    rng = np.random.default_rng(7)
    for n in (1, 2, 7, 8, 9, 17, 40, 131):
        for shape in ((3,), (4, 5), (2, 3, 3)):
            x = rng.integers(0, 7, size=(n, *shape)) / rng.integers(1, 7, size=(n, *shape))
            x[rng.random(x.shape) < 0.05] = np.nan if n % 2 else 1 / 3
            cols = aer_columns(x)
            assert cols.shape == shape
            for idx in np.ndindex(*shape):
                want = aer(x[(slice(None), *idx)])
                assert (np.isnan(want) and np.isnan(cols[idx])) or cols[idx] == want, (n, shape, idx)
    assert aer_columns(np.zeros((0, 2, 3))).tolist() == [[0.0] * 3] * 2
