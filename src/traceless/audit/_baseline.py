"""Whether an audit's before-row shows extraction: without it, its after-rows prove nothing.

A deletion is measured by the drop from the before-row (the canary extracted from the
written memory) to the after-rows. When the before-row is 0 at every probe level, the model
did not return the canary even with it in memory, so an after-row of 0 cannot tell a
deletion from no deletion; every entry point says so (``traceless audit``, ``audit()``,
the inspect tasks)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["NO_BASELINE", "baseline_note"]

NO_BASELINE = ("the before-row shows no extraction (AER 0 at every probe level): the model did not return the "
               "canary even before any deletion, so the after-rows prove nothing about the deletions")
"""The message, for a table whose before-row is 0 everywhere."""


def baseline_note(table: Mapping[str, Mapping[str, float]], hint: str = "") -> str | None:
    """``NO_BASELINE`` (+ ``hint``, how to raise extraction) when the table's ``before`` row
    has no AER above 0; None when it shows extraction or the audit has no before-row."""
    before = table.get("before")
    if not before:
        return None
    rates = [v for c, v in before.items() if c.startswith("AER")]
    if not rates or any(v > 0 for v in rates):
        return None
    return NO_BASELINE + (f"; {hint}" if hint else "")
