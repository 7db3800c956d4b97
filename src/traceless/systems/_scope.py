"""The erasure's scope rule, one for every system: a literal acts on the requester's records only.

Checked on the plan, before the journal and before any change (``_erase_run``):

* every literal has at least ``MIN_LITERAL_CHARS`` characters (the own store's rule);
* with a user, every literal is held by at least one of the user's own records: a literal
  found only in other users' records is not the requester's to erase, and nothing changes;
* no record that is not the user's is **removed** because it holds a literal (mem0, LangGraph
  and CrewAI remove a record whole): the erasure is refused, saying how many records of
  others hold it; a system that rewrites such a record in place (the literal replaced, the
  rest kept: the SQLite family, LlamaIndex, the SDK's encrypted rows) does so, reported in
  the receipt as rewritten, never as intact;
* those rewrites are bounded: more than ``MAX_REWRITE_SHARE`` of the other records (and more
  than ``MAX_REWRITE_FLOOR``) means the literal is common text, not a secret: refused.

Without a user (``--literal`` only) the operator erases the literals wherever they are; the
length rule still holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from traceless.errors import ErasureScopeError
from traceless.forget import MIN_LITERAL_CHARS
from traceless.systems._erase import ErasurePlan, PlannedAction, ScanReport

__all__ = ["MAX_REWRITE_FLOOR", "MAX_REWRITE_SHARE", "OTHERS_REASONS", "check_literals", "check_scope"]

OTHERS_REASONS = ("holds a literal", "its token holds a literal")
"""Plan reasons of a record that is not the requester's: it is targeted only for a literal."""
MAX_REWRITE_SHARE = 0.2
"""Largest share of the other users' records one erasure may rewrite."""
MAX_REWRITE_FLOOR = 3
"""Rewrites allowed whatever the share (a small instance where one bystander quotes the user)."""


def check_literals(literals: Sequence[str]) -> None:
    """Refuse a literal shorter than the own store's minimum (before anything opens)."""
    for i, lit in enumerate(literals, 1):
        if len("".join(lit.split())) < MIN_LITERAL_CHARS:
            raise ErasureScopeError(
                f"--literal #{i} has fewer than {MIN_LITERAL_CHARS} characters: it would match other users' text; "
                "give the whole secret (nothing was changed)")


def _others(a: PlannedAction) -> bool:
    return a.reason in OTHERS_REASONS


def check_scope(system: str, plan: ErasurePlan, user: str | None, literals: Sequence[str],
                per_literal: Sequence[ScanReport]) -> None:
    """Refuse the plan when it would remove another user's record, when a literal is held by
    none of the user's records, or when it rewrites too large a share of the others.
    ``per_literal``: the read-only scan of each literal alone (with ``user``), in order."""
    if user is not None:
        for i, rep in enumerate(per_literal, 1):
            if not any(h.owner_match and h.literal_count for h in rep.hits):
                held = len({(h.store, h.record_id) for h in rep.hits if not h.owner_match and h.literal_count})
                where = (f"it is held only by {held} record(s) of other users or of no user" if held
                         else "it is in no record")
                raise ErasureScopeError(
                    f"{system}: --literal #{i} is in none of the user's records ({where}); a literal erases only the "
                    "requester's records. Drop it (nothing was changed); `traceless scan --literal` shows where it is")
    others = [a for a in plan.actions if _others(a)]
    removed = [a for a in others if a.action == "remove"]
    if user is not None and removed:
        stores = ", ".join(sorted({a.store for a in removed}))
        raise ErasureScopeError(
            f"{system}: {len(removed)} record(s) that are not the user's hold a literal ({stores}) and {system} can "
            "only remove such a record whole, not rewrite it; a literal erases only the requester's records. "
            "Drop the literal (the user's records are still erased by their owner), or erase those records by "
            "their owners' requests (nothing was changed)")
    if user is None:
        return
    total = sum(per_literal[0].stores.values()) if per_literal else 0
    mine = len({(h.store, h.record_id) for rep in per_literal for h in rep.hits if h.owner_match})
    bound = max(MAX_REWRITE_FLOOR, int(MAX_REWRITE_SHARE * max(total - mine, 0)))
    if len(others) > bound:
        share = len(others) / max(total - mine, 1)
        raise ErasureScopeError(
            f"{system}: the literals are in {len(others)} other records ({share:.0%} of them, more than "
            f"{MAX_REWRITE_SHARE:.0%}): they are common text, not the user's secret. Give the whole secret "
            "(nothing was changed)")
