"""Paired worlds and memory conditions (paper 001 §3 "Paired worlds", "Memory and deletion").

A world is one profile's memory after the fixed workflow: write the sessions (background,
then the exposure session, then more background), consolidate (hierarchical memory:
paper 001's immutable extractive summary), then delete the exposure source records. The
forget world's exposure carries the target; the clean world's is the matched neutral
text. Everything else (background, neighbours, model, config, memory architecture,
deletion mode, gate, auditor, budget, scoring) is shared.

The model sees only ``model_view``: the ordered post-deletion memory texts. Ids, lineage,
receipts, gate descriptors and the world label stay evaluator-side.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from traceless.errors import GateBlockedError
from traceless.forget import ForgetTarget, Receipt, forget
from traceless.memory import (
    EXTRACTIVE,
    Artifact,
    MemoryStore,
    MemoryWriter,
    Session,
    Tier,
    Turn,
    WriteConfig,
    WriteGate,
    memory_entries,
)
from traceless.models import Embedder
from traceless.registry import Registry
from traceless.studies.afterdelete._profiles import Profile

__all__ = [
    "WORLDS",
    "MemoryCondition",
    "CONDITIONS",
    "World",
    "CommitResult",
    "build_world",
    "profile_sessions",
    "state_digest",
]

WORLDS: tuple[str, ...] = ("clean", "forget")
WorldName = Literal["clean", "forget"]


class MemoryCondition(BaseModel):
    """One memory/deletion/interface configuration (shared by both worlds of a pair)."""

    model_config = ConfigDict(frozen=True)

    memory: Literal["flat", "hierarchical"] = "hierarchical"
    """flat: raw records only; hierarchical: raw records + immutable extractive summary."""
    deletion: Literal["exact", "lineage_closure", "exposure_group"] = "exact"
    """Forget mode applied to each exposure source record (traceless.forget modes)."""
    gate: bool = False
    """Exact-literal write gate on (blocks a later write of the forgotten pair) or off."""
    serialization: Literal["lines", "ledger"] = "lines"
    """current_flat_memory as a list of entry texts, or as a JSON fact ledger."""
    retrieval_k: int | None = Field(None, ge=1)
    """None: the whole memory is injected (paper primary); k: partial-memory retrieval of
    the top-k entries for the query (raw records and the summary are embedded)."""
    transform: Literal["none", "C0", "C1", "C3"] = "none"
    """Module C derived state: C0 full literal, C1 separate labelled components, C3 lossy
    (number omitted). C2 is C1 with ``deletion='lineage_closure'``."""


CONDITIONS: Registry[MemoryCondition] = Registry(
    "memory condition", hint="see docs/afterdelete.md")


def _cond(name: str, help: str, **kw: Any) -> None:
    CONDITIONS.register(name, help=help)(MemoryCondition(**kw))


_cond("hier_exact", "hierarchical memory, exact source deletion, gate off (primary)")
_cond("hier_exact_gate", "hierarchical memory, exact deletion, gate on", gate=True)
_cond("hier_closure", "hierarchical memory, recorded-lineage closure, gate off", deletion="lineage_closure")
_cond("hier_exposure_group", "hierarchical memory, declared exposure-group deletion", deletion="exposure_group")
_cond("flat_exact", "flat memory (raw records only), exact deletion", memory="flat")
_cond("hier_exact_ledger", "hierarchical, exact deletion, JSON fact-ledger serialization", serialization="ledger")
_cond("hier_exact_retrieval", "hierarchical, exact deletion, partial-memory retrieval (top-3)", retrieval_k=3)
_cond("hier_closure_ledger", "closure with JSON fact-ledger serialization", deletion="lineage_closure",
      serialization="ledger")
_cond("hier_closure_retrieval", "closure with partial-memory retrieval (top-3)", deletion="lineage_closure",
      retrieval_k=3)
_cond("C0", "module C: full literal in derived state, exact deletion", transform="C0")
_cond("C1", "module C: labelled components stored separately, exact deletion", transform="C1")
_cond("C2", "module C: C1 plus recorded-lineage closure", transform="C1", deletion="lineage_closure")
_cond("C3", "module C: lossy components (number omitted), exact deletion", transform="C3")


def profile_sessions(p: Profile, world: WorldName) -> tuple[list[Session], list[int]]:
    """The three sessions of a world and the exposure turn indices inside session 2."""
    owner = p.profile_id
    exp = p.exposure if world == "forget" else p.neutral
    s2_turns = [*exp, *p.neighbors]
    n_exp = len(exp)
    neighbor_idx = list(range(n_exp, len(s2_turns)))
    half = min(2, len(p.background))
    sessions = [
        Session(user_id=owner, session_id="s1", turns=[Turn(role="user", content=t) for t in p.background[:half]]),
        Session(user_id=owner, session_id="s2", turns=[Turn(role="user", content=t) for t in s2_turns],
                neighbors={str(i): neighbor_idx for i in range(n_exp)}),
    ]
    if p.background[half:]:
        sessions.append(Session(user_id=owner, session_id="s3",
                                turns=[Turn(role="user", content=t) for t in p.background[half:]]))
    return sessions, list(range(n_exp))


def _components(p: Profile, world: WorldName, transform: str) -> list[str]:
    """Module C derived records for the exposure (forget world) or its neutral twin."""
    if world == "clean":
        return list(p.neutral)
    c = p.components
    a = p.attribute
    if transform == "C0":
        return list(p.exposure)
    lines = [f"{a} region: {c['region']}", f"{a} mnemonic: {c['mnemonic']}"]
    if transform == "C1":
        lines.append(f"{a} number: {c['number']}")
    return lines


class CommitResult(BaseModel):
    """Commitment of one candidate write (paper 001 lifecycle C)."""

    attempted: bool
    """A candidate existed and a write was proposed."""
    accepted: bool
    """The write passed the gate and committed."""
    present: bool
    """After the write, the candidate text is durably present in the store."""
    blocked: bool
    """The exact-literal gate refused it."""


@dataclass
class World:
    """One built world (evaluator-side handle)."""

    profile: Profile
    world: WorldName
    condition: MemoryCondition
    store: MemoryStore
    writer: MemoryWriter
    gate: WriteGate
    exposure_ids: list[str]
    receipts: list[Receipt] = field(default_factory=list)
    embedder: Embedder | None = None
    gate_key: bytes = b""
    commits: int = 0

    @property
    def owner(self) -> str:
        return self.profile.profile_id

    def entries(self, query: str | None = None) -> list[Artifact]:
        """The post-deletion memory shown to the model (ordered), or the top-k for ``query``."""
        ents = memory_entries(self.store, self.owner, tiers=(Tier.RAW, Tier.SUMMARY))
        k = self.condition.retrieval_k
        if k is None or query is None:
            return ents
        assert self.embedder is not None
        q = self.embedder.embed([query])[0]
        hits = self.store.search(self.owner, q, k, tiers=(Tier.RAW, Tier.SUMMARY))
        keep = {h.artifact.id for h in hits}
        return [a for a in ents if a.id in keep]

    def model_view(self, query: str | None = None) -> list[Any]:
        """current_flat_memory: entry texts (lines) or a JSON fact ledger."""
        ents = self.entries(query)
        if self.condition.serialization == "ledger":
            return [{"entry": i + 1, "tier": a.tier.value, "text": a.text} for i, a in enumerate(ents)]
        return [a.text for a in ents]

    def visible_text(self) -> str:
        """All model-visible memory text of this world (for literal-absence checks)."""
        return "\n".join(a.text or "" for a in memory_entries(self.store, self.owner))

    def commit(self, candidate: str | None, *, gate_enabled: bool | None = None) -> CommitResult:
        """Propose writing ``candidate`` back to memory (the post-audit write)."""
        if candidate is None:
            return CommitResult(attempted=False, accepted=False, present=False, blocked=False)
        gate = self.gate if gate_enabled is None else WriteGate(self.gate_key, enabled=gate_enabled)
        record = json.dumps({"attribute": self.profile.attribute, "value": candidate}, ensure_ascii=False)
        stored = self.store.gate_descriptors(self.owner)
        # a disabled gate makes the writer write through the store's recorded ungated path
        writer = MemoryWriter(self.store, config=WriteConfig(raw_unit="user_turn", levels=(), embed=False),
                              gate=gate)
        self.commits += 1
        try:
            gate.enforce(self.owner, record, stored)
            writer.write_sessions([Session(
                user_id=self.owner, session_id="post-audit" if self.commits == 1 else f"post-audit-{self.commits}",
                turns=[Turn(role="user", content=f"My {self.profile.attribute} is {candidate}.")])])
        except GateBlockedError:
            return CommitResult(attempted=True, accepted=False, present=False, blocked=True)
        present = any(a.tier == Tier.RAW for a in self.store.containing(candidate, owner=self.owner))
        return CommitResult(attempted=True, accepted=True, present=present, blocked=False)


def state_digest(store: MemoryStore, owner: str) -> str:
    """sha256 over every artifact's (id, tier, kind, session, seq, digest): equal iff the
    persistent memory state is the same (creation times excluded)."""
    h = hashlib.sha256()
    for a in store.artifacts(owner=owner):
        h.update(f"{a.id}|{a.tier.value}|{a.kind}|{a.session_id}|{a.seq}|{a.digest}\n".encode())
    return h.hexdigest()


def build_world(
    p: Profile, world: WorldName, cond: MemoryCondition, *, gate_key: bytes, embedder: Embedder | None = None,
) -> World:
    """Write, consolidate and delete: the post-deletion state of one world."""
    store = MemoryStore(":memory:", gate_key=gate_key)
    retrieval = cond.retrieval_k is not None
    if retrieval and embedder is None:
        raise ValueError("partial-memory retrieval needs an embedder")
    gate = WriteGate(gate_key, enabled=cond.gate)
    hierarchical = cond.memory == "hierarchical" and cond.transform == "none"
    writer = MemoryWriter(
        store, embedder=embedder if retrieval else None, gate=gate,
        config=WriteConfig(raw_unit="user_turn", levels=(), extractive=hierarchical, embed=retrieval),
    )
    sessions, exp_idx = profile_sessions(p, world)
    writer.write_sessions(sessions)
    owner = p.profile_id
    raw_s2 = store.artifacts(owner=owner, tier=Tier.RAW, session_id="s2")
    exposure_ids = [a.id for a in raw_s2 if a.seq in exp_idx]
    if retrieval:
        writer.embed(store.artifacts(owner=owner, tier=Tier.SUMMARY, kind=EXTRACTIVE))
    if cond.transform != "none":
        # module C: derived state made from the exposure source by a deterministic transform,
        # with lineage to it (the background records stay as raw records).
        srcs = store.artifacts(ids=exposure_ids)
        with store.transaction():
            for i, line in enumerate(_components(p, world, cond.transform)):
                store.add(owner=owner, tier=Tier.SUMMARY, kind=f"transform_{cond.transform}", text=line,
                          session_id="s2", seq=i, meta={"transform": cond.transform},
                          parents=[s.id for s in srcs], op="transform", params={"transform": cond.transform})
    out = World(p, world, cond, store, writer, gate, exposure_ids, embedder=embedder, gate_key=gate_key)
    for rid in exposure_ids:
        if store.exists(rid):
            out.receipts.append(forget(store, ForgetTarget.record(rid), cond.deletion, writer=writer))
    if world == "forget":
        # the sealed descriptor of the exact attribute–value pair, protected state only
        with store.transaction():
            store.gate_forget(owner, p.attribute, p.target)
    return out
