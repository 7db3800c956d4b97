"""``traceless scan --since RECEIPT``: re-run, later, the scan a past erasure's receipt answered,
and report anything of the person that came back (issue 36.5).

Deleted data comes back: a late write re-creates a deleted thread (langgraph #7206), a search
index keeps what the dashboard cleared (mem0 #3695), a pipeline re-derives a fact (cognee
#3526). The re-check is the read-only scan of the same user (and the literals given again) on
the same system, checked first to be the receipt's: its system, and its owner's keyed
pseudonym recomputed from the ``--user`` given with the same pepper. A record found again
whose keyed pseudonym the receipt lists as removed or rewritten is *resurrected*; any other
record of the user, record holding a literal or file holding a literal's bytes is *new*.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from traceless.errors import ConfigError
from traceless.forget import Receipt, pseudonym
from traceless.systems._base import MemorySystem
from traceless.systems._erase import ScanReport
from traceless.systems._erase_run import scan_system

__all__ = ["RecheckResult", "check_recheck_target", "recheck_system"]


class RecheckResult(BaseModel):
    """The JSON document of ``traceless scan --since RECEIPT --json`` (docs/schemas/recheck-result.json)."""

    model_config = ConfigDict(extra="forbid")

    receipt_id: str
    """The receipt re-checked."""
    request_id: str = ""
    """The request it answered (its ``request_id``; empty when it has none)."""
    system: str
    """The memory system scanned."""
    owner: str = ""
    """The receipt's owner pseudonym (``u:<16 hex>``), which the given user id reproduced."""
    erased_at: float
    """When the erasure was signed (the receipt's ``created_at``)."""
    checked_at: float
    """When this re-check ran (Unix time)."""
    came_back: bool
    """Something of the person is there again: a record of the user, a record holding a literal,
    or a file holding a literal's bytes (the CLI exits 13)."""
    user_records: int = 0
    """Records of the user found now (each store's record counted once)."""
    literal_records: int = 0
    """Records holding one of the literals now."""
    files: int = 0
    """Files under the instance's paths that hold a literal's bytes now."""
    resurrected: list[str] = Field(default_factory=list)
    """``store/record_id`` of the records found that the receipt removed or rewritten (matched by
    their keyed pseudonyms): the same records came back. The others found are new."""
    notes: list[str] = Field(default_factory=list)
    """What the re-check could not cover (e.g. no literal given again: no byte scan)."""
    report: ScanReport
    """The scan itself, as ``traceless scan --json`` prints it."""


def check_recheck_target(system: str, receipt: Receipt, user: str | None, literals: Sequence[str],
                         key: bytes) -> None:
    """Refuse (``ConfigError``, one line) a re-check that is not the receipt's: another system,
    another user than its owner (pseudonym under ``key``), or a literal-only receipt without
    its literals."""
    if receipt.mode != f"erase:{system}":
        where = receipt.mode.removeprefix("erase:") if receipt.mode.startswith("erase:") else None
        raise ConfigError(f"--since: the receipt is of {'--memory ' + where if where else 'a traceless store'}"
                          f"{'' if where else ' (use `traceless forget verify R --db DB`)'}, not of --memory {system}")
    if receipt.target.kind == "user":
        if user is None:
            raise ConfigError("--since: the receipt erased a user; give the same --user again")
        if pseudonym(user, "u", key) != receipt.target.owner:
            raise ConfigError("--since: --user is not the user this receipt erased (its keyed pseudonym differs); "
                              "give the same user id, with the receipt key of the machine that signed it")
    elif user is not None:
        raise ConfigError("--since: the receipt erased literals, not a user: drop --user, give the --literal values")
    elif not literals:
        raise ConfigError("--since: the receipt erased literals only; give the same --literal values again")


def recheck_system(system: MemorySystem, receipt: Receipt, user: str | None, literals: Sequence[str], *,
                   key: bytes, reveal: bool = False) -> RecheckResult:
    """The read-only scan of the receipt's user (and ``literals``) on ``system`` now, compared
    with what the receipt removed (checked first: ``check_recheck_target``)."""
    check_recheck_target(system.name, receipt, user, literals, key)
    report = scan_system(system, user, list(literals), reveal=reveal)
    erased = {(store, p) for store, t in receipt.tiers.items() for p in (*t.removed, *t.rewritten)}
    own = {(h.store, h.record_id) for h in report.hits if h.owner_match}
    lit = {(h.store, h.record_id) for h in report.hits if h.literal_count}
    back = sorted(f"{s}/{r}" for s, r in own | lit if (s, pseudonym(r, "r", key)) in erased)
    notes = []
    if not literals and "files_clean" in receipt.verification.checks:
        notes.append("the erasure was given literals: give them again (--literal) to re-scan the files' bytes")
    return RecheckResult(
        receipt_id=receipt.receipt_id, request_id=receipt.request_id, system=system.name,
        owner=receipt.target.owner, erased_at=receipt.created_at, checked_at=time.time(),
        came_back=not report.empty(), user_records=len(own), literal_records=len(lit), files=len(report.files),
        resurrected=back, notes=notes, report=report)
