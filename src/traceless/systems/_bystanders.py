"""Bystanders of a native deletion: did every *other* user's planted canary survive it? And
what traceless's own erasure reaches after it (``erasure_claims``).

The engine deletes each user's canary in turn; around each of those deletions it counts the
other users' canaries in every named store (``stores()``) and checks whether the system's own
retrieval (``context()`` for the other user, on the direct probes' queries) still returns
each of them. A deletion that removes or hides another user's canary over-deleted: the
phase's residue cell records it and the table shows it as a finding, as residue is.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from traceless.systems._base import MemorySystem, SystemRuntime, SystemSpec

__all__ = ["BystanderCheck", "bystander_cell", "bystander_check", "erasure_claims"]


class BystanderCheck(BaseModel):
    """Other users' canaries around every per-user deletion of one phase, summed over those
    deletions (a phase of 3 users: 3 deletions, each with 2 bystanders)."""

    copies_before: int = 0
    """Copies of the other users' canaries in the named stores just before each deletion."""
    copies_after: int = 0
    """The same count just after it."""
    lost: dict[str, int] = Field(default_factory=dict)
    """Per store: copies of other users' canaries that a deletion removed (over-deletion)."""
    retrieved_before: int = 0
    """Other users whose canary their own retrieval returned just before each deletion."""
    retrieved_after: int = 0
    """The same just after it."""

    @property
    def intact(self) -> bool:
        """No deletion took a copy of another user's canary or hid it from their retrieval."""
        return not any(self.lost.values()) and self.retrieved_after >= self.retrieved_before

    def metrics(self) -> dict[str, Any]:
        """The residue cell's ``bystanders`` metric."""
        return {**self.model_dump(), "intact": self.intact}


def _copies(system: MemorySystem, literals: Sequence[str]) -> dict[str, int]:
    from traceless.systems.kernel import count_literals

    return {name: sum(count_literals(t, literals) for t in texts) for name, texts in system.stores().items()}


def _retrieved(system: MemorySystem, owner: str, canary: str, queries: Sequence[str]) -> bool:
    return any(canary in item.text for q in queries for item in system.context(owner, q))


def bystander_check(system: MemorySystem, others: Sequence[tuple[str, str]], queries: Sequence[str],
                    delete: Callable[[], None], check: BystanderCheck) -> None:
    """Run ``delete`` (one user's deletion) and add what it did to ``others`` ((owner, canary)
    of every other user) to ``check``."""
    lits = [c for _, c in others]
    before = _copies(system, lits)
    seen = [o for o, c in others if _retrieved(system, o, c, queries)]
    delete()
    after = _copies(system, lits)
    check.copies_before += sum(before.values())
    check.copies_after += sum(after.values())
    for store, n in before.items():
        gone = n - after.get(store, 0)
        if gone > 0:
            check.lost[store] = check.lost.get(store, 0) + gone
    check.retrieved_before += len(seen)
    check.retrieved_after += sum(_retrieved(system, o, c, queries) for o, c in others if o in seen)


def bystander_cell(b: dict[str, Any] | None) -> str:
    """A phase's bystander cell: ``yes`` or the over-deletion (bold: a finding), ``—`` before deletion."""
    if b is None:
        return "—"
    if b["intact"]:
        return f"yes ({b['copies_after']}/{b['copies_before']})"
    lost = ", ".join(f"{st} −{n}" for st, n in b["lost"].items() if n)
    hidden = b["retrieved_before"] - b["retrieved_after"]
    return f"**NO** ({b['copies_after']}/{b['copies_before']}" + (f"; {lost}" if lost else "") + (
        f"; {hidden} no longer retrieved" if hidden > 0 else "") + ")"


def erasure_claims(spec: SystemSpec, phase_dir: Path, runtime: SystemRuntime,
                   targets: Sequence[tuple[str, str]]) -> dict[str, Any] | None:
    """What traceless's own erasure (``erase_system``: plan, native deletions and their residue,
    compaction, re-scan, bystander check) reaches on a phase's memory after its native deletion,
    for every (owner, canary): per store the weakest claim level over the users, and whether
    every receipt verified. Runs on a copy (the phase's memory stays as the native deletion left
    it, for ``--keep-memory``). None for a system whose adapter implements no erasure."""
    from traceless.errors import UnsupportedError
    from traceless.systems.contract import Capability

    if Capability.LIVE not in spec.cls.capabilities:
        return None
    with tempfile.TemporaryDirectory(prefix="traceless-audit-erase-") as tmp:
        shutil.copytree(phase_dir, Path(tmp) / "memory")
        system = spec.open(Path(tmp) / "memory", runtime)
        try:
            claims, passed = _erase_each(system, targets, Path(tmp) / "state")
        except UnsupportedError:  # its erasure runs on an attached live instance only (mem0)
            return None
        finally:
            system.close()
    return {"claims": dict(sorted(claims.items())), "passed": passed}


def _erase_each(system: MemorySystem, targets: Sequence[tuple[str, str]], state: Path) -> tuple[dict[str, str], bool]:
    from traceless.errors import NothingToEraseError
    from traceless.systems._erase import CLAIM_LEVELS
    from traceless.systems._erase_run import erase_system, scan_system

    claims: dict[str, str] = {}

    def weakest(store: str, level: str) -> None:
        claims[store] = min(claims.get(store, level), level, key=CLAIM_LEVELS.index)

    passed = True
    for owner, canary in targets:
        try:
            receipt = erase_system(system, owner, [canary], state_dir=state, key=b"traceless-audit")
        except NothingToEraseError:  # the native deletion left no record: the bytes decide
            rep = scan_system(system, owner, [canary])
            for store in rep.stores:
                weakest(store, "logical" if rep.files else "clear")
            passed = passed and not rep.files
            continue
        for g in receipt.guarantee:
            store, _, level = g.partition("=")
            weakest(store, level)
        passed = passed and receipt.verification.passed
    return claims, passed
