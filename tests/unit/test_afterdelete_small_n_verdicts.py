"""Module-B claims are conditional on forget-world R=1: a split whose few profiles gave no R=1
unit is too small (INCONCLUSIVE with the units needed), not "no data" NOT TESTABLE for the whole
claim, and the no-write ≡ gate-blocked guarantee is judged on the splits that have R=1 units."""

from __future__ import annotations

from typing import Any

from traceless.metrics import MIN_UNITS, ClaimVerdict, Verdict
from traceless.report._afterdelete import BRANCH_NAMES, _findings_writediag, _nc

IID = {"split": "iid", "n": 1, "R1": 1, "identical_units": 1, "nondeterministic_pairs": 0, "separate": True,
       "A_no_write": 0, "A_write_allowed": 1, "diff_conditional": "1.000 (observed)",
       "diff_conditional_nc": _nc([1], [0])}
OOD = {**IID, "split": "ood", "R1": 0, "identical_units": 0, "A_no_write": 0, "A_write_allowed": 0,
       "diff_conditional_nc": _nc([], [])}


def _t10(split: str, r1: int) -> dict[str, Any]:
    rec: dict[str, Any] = {"split": split, "n": 1, "R1": r1}
    for b in BRANCH_NAMES:
        rec[f"legacy_minus_aligned_{b}"] = "-1.000 (observed)" if r1 else "0.000 (observed)"
        rec[f"lma_nc_{b}"] = _nc([0] * r1, [1] * r1)
    return rec


def _verdicts(t9: list[dict[str, Any]], t10: list[dict[str, Any]]) -> dict[str, ClaimVerdict]:
    got: dict[str, ClaimVerdict] = {}

    def add(key: str, claim: str, paper: str, ours: str, v: ClaimVerdict, guarantee: bool = False) -> None:
        got[claim.split(" ")[0] + ("/g" if guarantee else "")] = v

    _findings_writediag({"table9_writediag": t9, "table10_legacy_activation": t10}, add)
    return got


def test_a_split_without_r1_units_is_too_small_not_untestable() -> None:
    v = _verdicts([IID, OOD], [_t10("iid", 1), _t10("ood", 0)])
    table10, writeback, ident = v["Table"], v["Writing"], v["No-write/g"]
    for c in (table10, writeback):
        assert c.verdict is Verdict.INCONCLUSIVE, c
        assert c.n_needed is not None and c.n_needed >= MIN_UNITS and "no n decides" not in c.fmt()
    assert ident.verdict is Verdict.BY_CONSTRUCTION  # the iid unit is identical; ood has none to check


def test_no_r1_anywhere_is_still_not_testable_for_the_guarantee_and_a_violation_still_counts() -> None:
    v = _verdicts([{**OOD, "split": "iid"}, OOD], [_t10("iid", 0), _t10("ood", 0)])
    assert v["No-write/g"].verdict is Verdict.NOT_TESTABLE and "R=1" in v["No-write/g"].reason
    bad = _verdicts([{**IID, "identical_units": 0}, OOD], [])
    assert bad["No-write/g"].verdict is Verdict.CONTRADICTED
