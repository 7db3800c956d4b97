"""traceless's own store as the erasure kernel reads it (``scan`` / ``forget --memory traceless``).

Every artifact of the store (``MemoryStore.iter_artifacts``: the tiers raw, summary,
embedding and cache; an encrypted store's rows opened with its keys) is a ``Record`` of the
store named by its tier, owned by the artifact's ``owner``; a record's ``linked`` records are
its lineage descendants (``MemoryStore.descendants``: the summaries, facts and embeddings
derived from it), so removing a raw turn removes what was made from it. The store's receipt
log is the ``receipts`` store (pseudonymous bodies, never erased by the kernel).

``apply`` goes through the store's own write path in one transaction: ``delete`` +
``delete_lineage`` (``secure_delete`` zeroes the cells) and ``update_text`` (the write gate
checks the rewritten text), then the store's compaction: ``vacuum`` where its free space is
not kept zeroed, else ``checkpoint`` (the WAL truncated, the touched pages scrubbed).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from traceless.memory import MemoryStore, Tier
from traceless.systems import StoreOutcome
from traceless.systems.contract import LiveInstance, Op, Record, Remove
from traceless.systems.kernel import replace_literals

__all__ = ["RECEIPTS", "StoreInstance", "TIERS"]

TIERS = tuple(t.value for t in (Tier.RAW, Tier.SUMMARY, Tier.EMBEDDING, Tier.CACHE))
RECEIPTS = "receipts"


class StoreInstance(LiveInstance):
    """A ``MemoryStore`` (open read-only for a scan, for writing for an erasure)."""

    others_policy = "rewrite"

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def stores(self) -> list[str]:
        return [*TIERS, RECEIPTS]

    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Record]:
        arts = list(self.store.iter_artifacts())
        tier = {a.id: a.tier.value for a in arts}
        for a in arts:
            below = self.store.descendants([a.id])
            linked = tuple((tier[i], i) for i in below if i in tier)
            yield Record(a.tier.value, a.id, a.owner, {"text": a.text or ""}, linked=linked)
        for rid, body in self.store.receipts():
            yield Record(RECEIPTS, rid, None, {"body": body})

    def apply(self, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
        out = {s: StoreOutcome(store=s) for s in TIERS}
        with self.store.transaction():
            for op in ops:
                r = op.record
                if r.store not in out or not self.store.exists(r.id):
                    continue  # gone already (a re-run), or the receipt log: never erased
                if isinstance(op, Remove):
                    self.store.delete([r.id])
                    self.store.delete_lineage([r.id])
                    out[r.store].removed += 1
                else:
                    a = self.store.get(r.id)
                    self.store.update_text(r.id, replace_literals(a.text or "", literals), current=a)
                    out[r.store].rewritten += 1
        done = self.store.vacuum() if self.store.needs_vacuum else self.store.checkpoint()
        for o in out.values():
            o.compacted = done
            if not done:
                o.notes.append("the WAL could not be checkpointed (another reader holds an old snapshot)")
        return [o for o in out.values() if o.removed or o.rewritten]

    def files(self) -> list[Path]:
        return self.store.files()

    def compaction(self) -> list[str]:
        return ["VACUUM (a store whose free space is not kept zeroed)" if self.store.needs_vacuum
                else "WAL checkpoint (TRUNCATE), the touched pages' free space scrubbed"]
