"""Find, erase, certify in the user's own memory system (issue #23).

An adapter opens the user's **live** instance with ``attach`` (read-only for ``scan``) and
implements four small methods; everything else — the plan, the bystander check, the
re-scan after execution, the journal that makes an interrupted erasure resumable, and the
signed receipt — is this module's, the same for every system:

* ``scan(user, literals)``: what of ``user`` (and every record holding a literal) each store
  keeps, plus the files under the instance's paths that hold the literals' bytes. Never
  writes a byte.
* ``plan_erasure(user, literals)``: every record per store that will be removed or
  rewritten, and what will be compacted (``--dry-run`` prints it).
* ``execute_erasure(plan)``: the system's own deletions plus the removal of the residue they
  leave, then physical compaction where the back end allows it. Must be idempotent: a plan
  recomputed after an interrupted run names only what is left.
* ``bystander_digests(user)``: per store, a count and digest of every *other* user's
  records; equal before and after, or the erasure over-deleted.

Claim levels per store, in NIST SP 800-88 Rev. 2 terms: ``logical`` (gone from the API view),
``clear`` (no bytes in the live files), ``purge-crypto`` (only where the data was encrypted
under a key that was destroyed); ``none`` when verification found the data still there.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CLAIM_LEVELS",
    "ClaimLevel",
    "ErasurePlan",
    "FileHit",
    "PlannedAction",
    "ScanHit",
    "ScanReport",
    "StoreOutcome",
]

ClaimLevel = Literal["none", "logical", "clear", "purge-crypto"]
CLAIM_LEVELS: tuple[ClaimLevel, ...] = ("none", "logical", "clear", "purge-crypto")
"""Weakest first."""

_FORBID = ConfigDict(extra="forbid")


class ScanHit(BaseModel):
    """One record of one store that belongs to the user or holds a literal."""

    model_config = _FORBID

    store: str
    """The store's name as the adapter names it (``history``, ``vector_store``, ``checkpoints`` …)."""
    record_id: str
    """The record's id in that store (its primary key, point id, thread/checkpoint id …)."""
    field: str
    """Where in the record the match is (column or payload key; ``*`` for the whole record)."""
    owner_match: bool
    """The record belongs to the user (by the system's own user field or namespace)."""
    owner: str | None = None
    """Whose record it is, by the system's own user field or namespace: how a ``--literal``
    (an email, an IBAN) finds the person (None: nobody's, or not told by this adapter; LangGraph
    reads it back through the namespace and thread-id templates of its user mapping)."""
    literal_count: int = 0
    """How many times the literals occur in the record (all encodings)."""
    value: str | None = None
    """The matching text, only with ``reveal`` (never otherwise: a scan report is shareable)."""
    unattributable: str | None = None
    """Why no user can be told as this record's owner (mem0: a history row whose memory is in
    no collection): residue that an erasure by user cannot reach, removed by a ``--literal``
    it holds. None: the record is attributed (to ``owner``, or to nobody by the system's own
    fields)."""


class FileHit(BaseModel):
    """One file under the instance's paths that holds a literal's bytes."""

    model_config = _FORBID

    path: str
    """The file."""
    count: int
    """Occurrences of the literals' bytes (UTF-8, UTF-16, JSON escapes: ``encodings_of``)."""


class ScanReport(BaseModel):
    """What ``traceless scan`` finds on a live instance; reading it wrote nothing."""

    model_config = _FORBID

    system: str
    """The memory system's registered name."""
    user: str | None
    """The user scanned for (None: literals only)."""
    literals: int
    """How many literals were searched for (the literals themselves are never in the report)."""
    stores: dict[str, int] = Field(default_factory=dict)
    """Every store the instance keeps → its total record count (so an empty result is visible)."""
    hits: list[ScanHit] = Field(default_factory=list)
    """The user's records and every record holding a literal."""
    unattributable: dict[str, int] = Field(default_factory=dict)
    """Store → records no user can be told as the owner of (mem0's orphan history rows: a
    ``memory_id`` in no collection), whatever they hold: an erasure by user leaves them (its
    receipt says so under ``not_covered``); a ``--literal`` they hold removes them."""
    files: list[FileHit] = Field(default_factory=list)
    """Files that hold a literal's bytes."""
    files_scanned: int = 0
    """How many files under the instance's paths were read."""
    files_unchanged: bool | None = None
    """Measured: every file of the instance had the same size and mtime after the scan as
    before it, and no file came or went (None: the instance has no files this side can read)."""
    files_checked: int = 0
    """How many files the read-only check compared."""

    def empty(self) -> bool:
        """Nothing of the user and no literal anywhere (records or files)."""
        return not self.hits and not self.files


class PlannedAction(BaseModel):
    """One record that the erasure will remove or rewrite."""

    model_config = _FORBID

    store: str
    """The store."""
    record_id: str
    """The record."""
    action: Literal["remove", "rewrite"]
    """Remove the record, or rewrite it without the literal (e.g. a bystander's record that quotes it)."""
    reason: str
    """Why (``owned by the user``, ``holds a literal``, ``history of an erased memory`` …)."""


class ErasurePlan(BaseModel):
    """Every change the erasure will make, computed before any is made (``--dry-run``)."""

    model_config = _FORBID

    system: str
    """The memory system."""
    user: str | None
    """The user erased (None: literals only)."""
    actions: list[PlannedAction] = Field(default_factory=list)
    """Records to remove or rewrite, per store."""
    compaction: list[str] = Field(default_factory=list)
    """What will be compacted afterwards (``VACUUM history.db``, ``qdrant optimize`` …)."""
    held_by_others: int = 0
    """Other users' records that hold a literal, left untouched (a literal acts on the
    requester's records only); named to the operator in the dry run, never in a receipt."""

    def empty(self) -> bool:
        return not self.actions


class StoreOutcome(BaseModel):
    """What the erasure did to one store and what its verification proved."""

    model_config = _FORBID

    store: str
    """The store."""
    removed: int = 0
    """Records removed."""
    rewritten: int = 0
    """Records rewritten without the literal."""
    compacted: bool = False
    """Physical compaction ran (VACUUM, segment optimisation …)."""
    claim: ClaimLevel = "none"
    """The strongest level the re-scan proved (``logical`` at least when no record is left)."""
    ceiling: ClaimLevel = "purge-crypto"
    """The strongest level the adapter's own check of the files allows: ``logical`` where it
    found what the byte scan of the literals cannot see (an erased vector's floats in an index
    file) or could not look for it."""
    notes: list[str] = Field(default_factory=list)
    """What the back end keeps that the erasure could not reach (said, not hidden)."""
