"""The erasure's scope rule, one for every system: a literal acts on the requester's records only.

Checked on the plan, before the journal and before any change (``_erase_run``):

* (before the plan, ``_literals``) every literal has the own store's 4 characters at least;
* with a user, a literal held by other users' records is held by at least one of the user's
  own records too: a literal found only in others' records is not the requester's to erase,
  and nothing changes (a literal in no record at all, e.g. only in a file's free pages after a
  native deletion, is the user's residue: allowed);
* another user's record that holds a literal is never removed: mem0 and LangGraph leave it
  (``ErasurePlan.held_by_others``), and then the erasure is refused, since the literal's bytes
  would stay in the files; a system that plans to remove it whole (CrewAI) is refused too,
  saying how many records hold it; a system that rewrites such a record in place (the literal replaced, the
  rest kept: the SQLite family, LlamaIndex, the SDK's encrypted rows) does so, reported in
  the receipt as rewritten, never as intact;
* those rewrites are bounded: more than ``MAX_REWRITE_SHARE`` of the other records of a store
  (and more than ``MAX_REWRITE_FLOOR``) means the literal is common text, not a secret: refused.

Without a user (``--literal`` only) the operator erases the literals wherever they are; the
length rule still holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from traceless.errors import ErasureScopeError
from traceless.systems._erase import ErasurePlan, ScanReport

__all__ = ["MAX_REWRITE_FLOOR", "MAX_REWRITE_SHARE", "NO_OWNER", "OTHERS_REASONS", "check_scope"]

OTHERS_REASONS = ("holds a literal", "its token holds a literal")
"""Plan reasons of a record that is not the requester's: it is targeted only for a literal."""
NO_OWNER = "holds a literal (no owner)"
"""Plan reason of an unattributable record (mem0's orphan history rows): residue, removed."""
MAX_REWRITE_SHARE = 0.2
"""Largest share of the other users' records one erasure may rewrite."""
MAX_REWRITE_FLOOR = 3
"""Rewrites allowed whatever the share (a small instance where one bystander quotes the user)."""


def check_scope(system: str, plan: ErasurePlan, user: str, per_literal: Sequence[ScanReport]) -> None:
    """Refuse ``user``'s plan when a literal is held by other users' records and none of the
    user's, when another user's record holding a literal would stay or be removed whole, or
    when it rewrites too large a share of the others. ``per_literal``: the read-only scan of
    each literal alone (with ``user``), in order."""
    _literals_are_the_users(system, plan, per_literal)
    _others_untouched(system, plan)
    _rewrites_bounded(system, plan, per_literal)


def _literals_are_the_users(system: str, plan: ErasurePlan, per_literal: Sequence[ScanReport]) -> None:
    orphans = {(a.store, a.record_id) for a in plan.actions if a.reason == NO_OWNER}
    for i, rep in enumerate(per_literal, 1):
        theirs = {(h.store, h.record_id) for h in rep.hits if not h.owner_match and h.literal_count} - orphans
        if theirs and not any(h.owner_match and h.literal_count for h in rep.hits):
            raise ErasureScopeError(
                f"{system}: --literal #{i} is in none of the user's records; it is held by {len(theirs)} other "
                "users' records only, and a literal erases only the requester's records. Drop it (nothing was "
                "changed); `traceless scan --literal` shows where it is")


def _others_untouched(system: str, plan: ErasurePlan) -> None:
    if plan.held_by_others:
        raise ErasureScopeError(
            f"{system}: a literal is also held by {plan.held_by_others} other users' records, which stay untouched "
            "(a literal acts on the requester's records only), so its bytes would stay in the instance's files and "
            "the erasure could not be verified. Drop that literal: the user's records are still erased by owner "
            "(nothing was changed)")
    removed = [a for a in plan.actions if a.reason in OTHERS_REASONS and a.action == "remove"]
    if removed:
        stores = ", ".join(sorted({a.store for a in removed}))
        raise ErasureScopeError(
            f"{system}: {len(removed)} record(s) that are not the user's hold a literal ({stores}) and {system} can "
            "only remove such a record whole, not rewrite it; a literal erases only the requester's records. "
            "Drop the literal (the user's records are still erased by their owner), or erase those records by "
            "their owners' requests (nothing was changed)")


def _rewrites_bounded(system: str, plan: ErasurePlan, per_literal: Sequence[ScanReport]) -> None:
    """Per store: the rewrites of other users' records against that store's other records (a
    share of the whole instance would count stores that hold no text at all, e.g. vectors)."""
    if not per_literal:
        return
    rewrites = Counter(a.store for a in plan.actions if a.reason in OTHERS_REASONS)
    mine = Counter(store for store, _ in {(h.store, h.record_id) for rep in per_literal for h in rep.hits
                                          if h.owner_match})
    for store, n in sorted(rewrites.items()):
        others = max(per_literal[0].stores.get(store, 0) - mine[store], 0)
        if n > max(MAX_REWRITE_FLOOR, int(MAX_REWRITE_SHARE * others)):
            raise ErasureScopeError(
                f"{system}: the literals are in {n} other records of its {store} ({n / max(others, 1):.0%} of them, "
                f"more than {MAX_REWRITE_SHARE:.0%}): they are common text, not the user's secret. Give the whole "
                "secret (nothing was changed)")
