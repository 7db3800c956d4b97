"""The serving-cache tier in the audit's residue table and the scorecard (issue 38.3), rendered
from an audit's result rows: the residue cell's ``serving_cache`` (a ``ServingCacheTier``)
read by ``audit_table``; per deletion the verdict as the native deletion left the served
model's cache and after traceless's erasure cleared it, with KS p, median ratio and n; "—"
where traceless served no model; "— (not run by the audit)" where the audit did not run it."""

from __future__ import annotations

from typing import Any

from traceless.audit import CachePhase, ServingCacheTier, audit_table
from traceless.report._systems import SCORECARD_HEAD, _markdown, _scorecard, serving_cache_cell
from traceless.run import ResultRow

COLUMN = SCORECARD_HEAD.index("served model's prompt cache")


def _tier(p_before: float, p_after: float) -> dict[str, Any]:
    def ph(p: float, ratio: float, verdict: str) -> CachePhase:
        return CachePhase(record_s=[0.1] * 8, control_s=[1.0] * 8, ks_p=p, median_ratio=ratio,
                          verdict=verdict)  # type: ignore[arg-type]

    return ServingCacheTier(n=8, tokens=120, alpha=1e-3, before=ph(p_before, 0.08, "cached"),
                            after=ph(p_after, 1.01, "not detected"), clear_seconds=1.1, cleared_by="restart",
                            cache_prompt=True).model_dump(mode="json")


def _residue(phase: str, index: int, **metrics: Any) -> ResultRow:
    return ResultRow(model_tag="m", key=f"residue/{phase}", group=phase, timing={}, extra={"notes": {}}, created=0.0,
                     config={"study": {}, "cell": {"kind": "residue", "mode": phase, "system": "traceless"}}, seed=0,
                     model={}, code_version="x", prompt=None, reply=None,
                     metrics={"copies": {"raw": 0}, "files": {}, "phase_index": index, "views": ["agent"],
                              "inversion": None,
                              **({} if phase == "before" else {"bystanders": {"intact": True, "copies_before": 1,
                                                                              "copies_after": 1}}), **metrics})


def _summary(rows: list[ResultRow]) -> dict[str, Any]:
    t = audit_table(rows)
    return {"system": "traceless", "config": {"model": "m", "seed": 0, "system_config": {}}, "code_version": "x",
            **t.model_dump(include={"table", "copies", "files", "bystanders", "erasure", "inversion",
                                    "serving_cache"})}


def test_the_tier_is_a_column_of_the_residue_table_and_of_the_scorecard() -> None:
    rows = [_residue("before", 0), _residue("full_purge", 1, serving_cache=_tier(1.6e-4, 0.72)),
            _residue("noop", 2, serving_cache=None)]
    t = audit_table(rows)
    assert isinstance(t.serving_cache["full_purge"], ServingCacheTier) and t.serving_cache["noop"] is None
    s = _summary(rows)
    purge, noop = (ln.split(" | ")[COLUMN] for ln in _scorecard(s)[4:] if ln)
    assert purge == ("cached (KS p 1.6e-04, ratio 0.08); after traceless's erasure not detected (p 0.72, ratio 1.01); "
                     "n 8 per group")
    assert noop == "— (no model served by traceless)"
    table = _markdown(s).split("## Files")[0]
    head = next(ln for ln in table.splitlines() if ln.startswith("| deletion"))
    assert "| serving cache |" in head
    assert "| cached (p 1.6e-04) |" in next(ln for ln in table.splitlines() if ln.startswith("| full_purge"))


def test_an_audit_that_did_not_run_the_tier_says_so() -> None:
    rows = [_residue("before", 0), _residue("full_purge", 1)]
    assert audit_table(rows).serving_cache == {}
    s = _summary(rows)
    (cell,) = (ln.split(" | ")[COLUMN] for ln in _scorecard(s)[4:] if ln)
    assert cell == "— (not run by the audit)" == serving_cache_cell(None, recorded=False)
    assert "serving cache" not in _markdown(s).split("## Files")[0]
