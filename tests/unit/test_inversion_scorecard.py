"""The scorecard's "recoverable from surviving vectors" column (issue 38.2), rendered from an
audit's result rows: the residue cell's ``inversion`` (an ``InversionReport``) read by
``audit_table`` and shown per native deletion as top-1 k/n, rate and exact interval; "—" where
the system's files hold no vectors traceless reads; "— (not run by the audit)" in rows that
predate the check."""

from __future__ import annotations

from typing import Any

from traceless.audit import InversionReport, audit_table
from traceless.metrics import proportion_ci
from traceless.report._systems import SCORECARD_HEAD, _scorecard, inversion_cell
from traceless.run import ResultRow

COLUMN = SCORECARD_HEAD.index("recoverable from surviving vectors")


def _report(top1: int, topk: int, n: int = 4, vectors: int = 57) -> dict[str, Any]:
    return InversionReport(vectors=vectors, claiming=3, candidates=10_000 + n, planted=n, k=10,
                           top1=proportion_ci(top1, n), topk=proportion_ci(topk, n), relevance=0.25,
                           embedder="all-MiniLM-L6-v2").model_dump(mode="json")


def _residue(phase: str, index: int, **metrics: Any) -> ResultRow:
    return ResultRow(model_tag="m", key=f"residue/{phase}", group=phase, timing={}, extra={"notes": {}}, created=0.0,
                     config={"study": {}, "cell": {"kind": "residue", "mode": phase, "system": "mem0"}}, seed=0,
                     model={}, code_version="x", prompt=None, reply=None,
                     metrics={"copies": {"vector_store": 0}, "files": {}, "phase_index": index, "views": ["agent"],
                              **({} if phase == "before" else {"bystanders": {"intact": True, "copies_before": 1,
                                                                              "copies_after": 1}}),
                              **metrics})


def _cells(rows: list[ResultRow]) -> list[str]:
    t = audit_table(rows)
    s = {"system": "mem0", **t.model_dump(include={"table", "copies", "files", "bystanders", "erasure", "inversion"})}
    return [ln.split(" | ")[COLUMN] for ln in _scorecard(s)[4:] if ln]


def test_the_column_shows_the_top1_rate_with_its_interval_and_n() -> None:
    rows = [_residue("before", 0, inversion=_report(3, 4)), _residue("delete", 1, inversion=_report(3, 4)),
            _residue("reset", 2, inversion=_report(0, 0, vectors=0))]
    t = audit_table(rows)
    assert isinstance(t.inversion["delete"], InversionReport) and t.inversion["delete"].top1.successes == 3
    delete, reset = _cells(rows)
    lo, hi = proportion_ci(3, 4).low, proportion_ci(3, 4).high
    assert delete == f"top-1 3/4, 0.75 [{lo:.2f}, {hi:.2f}] (top-10 4/4; 57 vectors)"
    assert reset == "top-1 0/4, 0.00 [0.00, 0.60] (top-10 0/4; 0 vectors)"


def test_no_readable_vectors_is_a_dash_and_an_older_audit_says_so() -> None:
    none = [_residue("before", 0, inversion=None), _residue("delete", 1, inversion=None)]
    assert _cells(none) == ["—"]
    old = [_residue("before", 0), _residue("delete", 1)]  # rows written before the check existed
    assert audit_table(old).inversion == {}
    assert _cells(old) == ["— (not run by the audit)"]
    assert inversion_cell(None) == "—" and inversion_cell(None, recorded=False) == "— (not run by the audit)"
