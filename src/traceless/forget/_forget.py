"""``forget(store, target, mode) -> Receipt`` and the registry of forget modes.

A mode is one decorated function that receives a ``ForgetOp`` (the resolved target and
verbs: scrub, remove, reembed, resummarize, rebuild) and mutates the store through it.
``forget`` runs the mode, the verification and the receipt insert in ONE transaction:
a crash at any point leaves the state before or the state after. After a commit that
changed anything the file is VACUUMed and the WAL truncated, so no freed page, stale page
gap or old WAL frame keeps the target on disk (a reader pinning an old snapshot is
reported in the receipt's notes).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from traceless._version import code_version
from traceless.errors import ConfigError, ForgetError, MemoryStoreError, NothingMatchedError
from traceless.forget._erasure import scan_files
from traceless.forget._receipt import Receipt, TargetRef, TierReport, Verification, receipt_key, sign
from traceless.memory import (
    EXTRACTIVE,
    Artifact,
    MemoryStore,
    MemoryWriter,
    Tier,
    WriteGate,
    extractive_text,
)
from traceless.registry import Registry

__all__ = ["ForgetTarget", "ForgetMode", "ForgetOp", "FORGET_MODES", "forget_mode", "forget", "TIERS"]

TIERS = (Tier.RAW, Tier.SUMMARY, Tier.EMBEDDING, Tier.CACHE)


class ForgetTarget(BaseModel):
    """What to forget."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["record", "literal", "session", "user"]
    """A record id, a literal string (every artifact containing it), a session, or a user."""
    value: str
    """The record id, literal, session id or user id."""
    owner: str | None = None
    """Owner in scope; required for literal and session targets (forget never crosses owners)."""
    attribute: str = "secret"
    """Attribute name for the write-gate descriptor of a literal (paper 001's attribute–value pair)."""

    @classmethod
    def record(cls, record_id: str) -> ForgetTarget:
        return cls(kind="record", value=record_id)

    @classmethod
    def literal(cls, text: str, owner: str, attribute: str = "secret") -> ForgetTarget:
        return cls(kind="literal", value=text, owner=owner, attribute=attribute)

    @classmethod
    def session(cls, session_id: str, owner: str) -> ForgetTarget:
        return cls(kind="session", value=session_id, owner=owner)

    @classmethod
    def user(cls, user_id: str) -> ForgetTarget:
        return cls(kind="user", value=user_id, owner=user_id)


@dataclass(frozen=True)
class ForgetMode:
    """A registered mode: its function, the tiers it claims to clear, and what it needs."""

    name: str
    fn: Callable[[ForgetOp], None]
    claims: tuple[Tier, ...]
    help: str
    needs_summarizer: bool = False
    closure: bool = False  # claims: no descendant of a removed source survives


FORGET_MODES: Registry[ForgetMode] = Registry("forget mode", hint="list them with `traceless forget modes`")


def forget_mode(
    name: str, *, claims: Iterable[Tier] = (), help: str, needs_summarizer: bool = False, closure: bool = False
) -> Callable[[Callable[[ForgetOp], None]], Callable[[ForgetOp], None]]:
    """Register a forget mode: ``@forget_mode("x", claims=(Tier.RAW,), help="...")``."""

    def deco(fn: Callable[[ForgetOp], None]) -> Callable[[ForgetOp], None]:
        FORGET_MODES.register(name, help=help)(
            ForgetMode(name, fn, tuple(claims), help, needs_summarizer, closure)
        )
        return fn

    return deco


def _scrub(text: str, literal: str, replacement: str) -> str:
    """Remove every occurrence of ``literal`` (or replace it), until none is left: one
    pass of ``str.replace`` can reassemble the literal from its pieces
    (``"XQ7-VIOXQ7-VIOLET-3829LET-3829"``). Deleting collapses the two spaces around a
    removed word into one; the rest of the text keeps its exact spacing."""
    if literal in replacement:
        raise ConfigError(
            f"the forgotten literal occurs inside the replacement {replacement!r}; use a deleting mode (full_purge)"
        )
    pattern = re.compile(r"([ \t]?)" + re.escape(literal) + r"([ \t]?)")
    out = text
    for _ in range(64):
        if literal not in out:
            break
        if replacement:
            out = out.replace(literal, replacement)
        else:
            out = pattern.sub(lambda m: " " if m.group(1) and m.group(2) else "", out)
    return out.strip() if not replacement and out != text else out


@dataclass
class ForgetOp:
    """The resolved target plus the verbs modes use. Every verb records what it did."""

    store: MemoryStore
    writer: MemoryWriter | None
    owner: str
    target: ForgetTarget
    sources: list[Artifact]
    """Raw records the target resolves to (for a literal: raw records containing it)."""
    literal: str | None
    report: dict[Tier, TierReport] = field(default_factory=dict)
    removed_sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def _rep(self, tier: Tier) -> TierReport:
        return self.report.setdefault(tier, TierReport())

    # ---- queries
    def owned(self, tier: Tier, kind: str | None = None) -> list[Artifact]:
        return self.store.artifacts(owner=self.owner, tier=tier, kind=kind)

    def containing(self, tiers: Iterable[Tier] = TIERS) -> list[Artifact]:
        """Owner artifacts in ``tiers`` whose text contains the literal."""
        if self.literal is None:
            return []
        ts = set(tiers)
        return [a for a in self.store.containing(self.literal, owner=self.owner) if a.tier in ts]

    def descendants(self, ids: Iterable[str]) -> list[Artifact]:
        return [a for a in self.store.artifacts(ids=self.store.descendants(ids)) if a.owner == self.owner]

    # ---- verbs
    def remove(self, arts: Iterable[Artifact], *, as_source: bool = False) -> None:
        arts = [a for a in arts if a.owner == self.owner and self.store.exists(a.id)]
        self.store.delete(a.id for a in arts)
        for a in arts:
            self._rep(a.tier).removed.append(a.id)
            if as_source:
                self.removed_sources.append(a.id)

    def remove_with_vectors(self, arts: Iterable[Artifact], *, as_source: bool = False) -> None:
        """Remove artifacts and their own embeddings (the vector-index entry of the same object)."""
        arts = list(arts)
        vecs = [e for a in arts if (e := self.store.embedding_of(a.id)) is not None]
        self.remove(arts, as_source=as_source)
        self.remove(vecs)

    def scrub(self, art: Artifact, replacement: str = "", *, drop_empty: bool = False) -> Artifact | None:
        """Replace the literal in ``art`` (a whole-record target blanks the record)."""
        if art.tier == Tier.EMBEDDING:
            raise ForgetError("internal: scrub text artifacts; embeddings are updated by reembed()")
        new = _scrub(art.text or "", self.literal, replacement) if self.literal else replacement
        if drop_empty and not new.strip():
            self.remove_with_vectors([art])
            return None
        upd = self.store.update_text(art.id, new)
        self._rep(art.tier).rewritten.append(art.id)
        return upd

    def reembed(self, art: Artifact) -> None:
        if self.writer is None or self.writer.embedder is None:
            raise ConfigError(f"mode needs an embedder to re-embed {art.id}; pass one to forget()")
        emb = self.writer.reembed(art)
        if emb is not None:
            self._rep(Tier.EMBEDDING).rewritten.append(emb.id)

    def summarize(self, level: int, sources: list[Artifact]) -> list[str]:
        return self.summarize_many([(level, sources)])[0]

    def summarize_many(self, jobs: list[tuple[int, list[Artifact]]]) -> list[list[str]]:
        """Summaries of several (level, sources) jobs in one batched model call."""
        if not jobs:
            return []
        if self.writer is None or self.writer.summarizer is None:
            raise ConfigError("this mode re-summarizes: pass a summarizer model (e.g. --model) to forget")
        return self.writer.summarize_sources_many(jobs)

    def add_summaries(self, session_id: str, level: int, chunks: list[str], sources: list[Artifact],
                      start_seq: int = 0) -> list[Artifact]:
        assert self.writer is not None
        arts = self.writer.write_summary(self.owner, session_id, level, chunks, sources, start_seq=start_seq)
        self._rep(Tier.SUMMARY).rebuilt.extend(a.id for a in arts)
        for a in arts:
            emb = self.store.embedding_of(a.id)
            if emb is not None:
                self._rep(Tier.EMBEDDING).rebuilt.append(emb.id)
        return arts

    def check_gate(self, texts: Iterable[str]) -> None:
        """Refuse a rebuilt text that carries a gated literal (the writer's gate, if any)."""
        if self.writer is not None:
            self.writer.check_gate(self.owner, texts)

    def rebuild_extractive(self, surviving: list[Artifact]) -> Artifact | None:
        """Paper 001's deterministic transform over surviving records."""
        if not surviving:
            return None
        text = extractive_text(surviving)
        self.check_gate([text])
        art = self.store.add(
            owner=self.owner, tier=Tier.SUMMARY, kind=EXTRACTIVE, text=text,
            meta={"sources": {r.id: r.digest for r in surviving}, "rebuilt": True},
            parents=[r.id for r in surviving], op="extract", params={"transform": "sort_by_id_join_newline"},
        )
        self._rep(Tier.SUMMARY).rebuilt.append(art.id)
        return art

    def refresh_source_digests(self) -> None:
        """A rewritten summary that records its sources' digests (paper 001's evaluator
        metadata) must not keep the digest of a source's old text: a plain sha256 of a
        canary-bearing record is a brute-force oracle for the canary. Refresh them."""
        touched = [i for t in (Tier.SUMMARY, Tier.CACHE) if t in self.report for i in self.report[t].rewritten]
        for i in dict.fromkeys(touched):
            if not self.store.exists(i):
                continue
            a = self.store.get(i)
            src = a.meta.get("sources")
            if not isinstance(src, dict):
                continue
            new = {sid: self.store.get(sid).digest if self.store.exists(sid) else "removed" for sid in src}
            if new != src:
                self.store.update_text(i, a.text or "", meta={**a.meta, "sources": new})

    def note(self, text: str) -> None:
        self.notes.append(text)


def _resolve(store: MemoryStore, target: ForgetTarget) -> tuple[str, list[Artifact]]:
    if target.kind == "record":
        try:
            art = store.get(target.value)
        except MemoryStoreError:
            return target.owner or "", []
        if target.owner is not None and art.owner != target.owner:
            return target.owner, []
        if art.tier != Tier.RAW:
            raise ConfigError(
                f"{target.value} is a {art.tier.value} artifact; forget targets raw records. "
                f"Find its sources with `traceless memory lineage {target.value}`."
            )
        return art.owner, [art]
    if target.kind == "user":
        if target.owner is not None and target.owner != target.value:
            raise ConfigError(
                f"a user target erases user {target.value!r}; its owner must be that user, not {target.owner!r}"
            )
        return target.value, store.artifacts(owner=target.value, tier=Tier.RAW)
    if target.owner is None:
        raise ConfigError(f"a {target.kind} target needs an owner (--user-scope / owner=): forget never crosses owners")
    owner = target.owner
    if target.kind == "literal":
        if not target.value:
            raise ConfigError("an empty literal matches everything; give the exact text to forget")
        return owner, [a for a in store.containing(target.value, owner=owner) if a.tier == Tier.RAW]
    return owner, store.artifacts(owner=owner, tier=Tier.RAW, session_id=target.value)


def _target_ref(target: ForgetTarget, owner: str) -> TargetRef:
    if target.kind == "literal":
        mac = hmac.new(receipt_key(), target.value.encode("utf-8"), hashlib.sha256).hexdigest()[:16]
        return TargetRef(kind="literal", ref=f"hmac:{mac}", owner=owner)
    return TargetRef(kind=target.kind, ref=target.value, owner=owner)


def forget(
    store: MemoryStore,
    target: ForgetTarget,
    mode: str,
    *,
    writer: MemoryWriter | None = None,
    gate: WriteGate | None = None,
    strict: bool = False,
) -> Receipt:
    """Forget ``target`` with ``mode``; return a signed receipt (also stored in the db).

    ``writer`` supplies the summarizer/embedder for modes that rebuild or re-embed.
    ``gate``: when given and the target is a literal, a keyed descriptor is stored so later
    writes of the exact attribute–value pair are refused (stored even when nothing matched).
    ``strict``: raise ``NothingMatchedError`` (after writing the receipt) when nothing matched.
    Model calls of rebuilding modes run inside the transaction (they are part of the atomic
    unit), so other writers wait for them.
    """
    spec = FORGET_MODES.get(mode)
    if writer is not None and writer.store is not store:
        raise ConfigError("writer= writes to another MemoryStore; build it on the store being forgotten")
    t0 = time.perf_counter()
    literal = target.value if target.kind == "literal" else None
    rkey = receipt_key()
    with store.transaction():
        # resolve inside the transaction: a concurrent writer cannot slip a new copy in
        # between resolution and deletion
        owner, sources = _resolve(store, target)
        before = {t: store.tier_digest(owner, t, key=rkey) for t in TIERS}
        op = ForgetOp(store, writer, owner, target, sources, literal)
        matched = bool(sources) or bool(op.containing())
        if matched:
            spec.fn(op)
            op.refresh_source_digests()
        n_gate = 0
        if gate is not None and literal is not None:
            # stored even when nothing matched yet: the user asked that this exact pair
            # never be (re)written
            for d in gate.descriptors(target.attribute, literal):
                store.gate_add(owner, d)
                n_gate += 1
        verification = _verify(op, spec)
        if matched and not verification.passed:
            raise ForgetError(
                f"mode {mode!r} could not verify its claims ({_failed(verification, spec)}); "
                "the transaction was rolled back and nothing changed"
            )
        tiers: dict[str, TierReport] = {}
        for t in TIERS:
            rep = op.report.get(t, TierReport())
            touched = set(rep.removed) | set(rep.rewritten) | set(rep.rebuilt)
            rep.left = sum(1 for a in store.artifacts(owner=owner, tier=t) if a.id not in touched)
            rep.digest_before, rep.digest_after = before[t], store.tier_digest(owner, t, key=rkey)
            rep.target_copies_after = verification.literal_scan.get(t.value, 0)
            tiers[t.value] = rep
        receipt = Receipt(
            receipt_id=f"rcpt-{uuid.uuid4().hex[:16]}", created_at=time.time(), mode=mode,
            target=_target_ref(target, owner), matched=matched, tiers=tiers, verification=verification,
            gate_descriptors_added=n_gate, seconds=0.0, code_version=code_version(), notes=op.notes,
        )
        # the stored copy is signed too (it lacks only the post-commit disk scan)
        store.add_receipt(receipt.receipt_id, sign(receipt, rkey).model_dump_json())
    notes = list(receipt.notes)
    changed = any(r.digest_before != r.digest_after for r in tiers.values())
    # after a change, rebuild the file: page rebalancing can leave old cell bytes in a
    # page's unallocated gap that secure_delete does not zero
    try:
        if not (store.vacuum() if changed else store.checkpoint()):
            notes.append(
                "WAL checkpoint incomplete: another connection still reads an older snapshot, so old page "
                "images stay on disk until a later checkpoint (close or reopen the store once it is gone)"
            )
    except MemoryStoreError as e:  # committed already: report it, do not fail the forget
        notes.append(f"post-commit VACUUM/checkpoint failed ({e}); old bytes may stay on disk until the next one")
    if literal is not None:
        verification = verification.model_copy(update={"disk_scan": scan_files(store.files(), literal)})
    receipt = sign(
        receipt.model_copy(
            update={"seconds": time.perf_counter() - t0, "verification": verification, "notes": notes}
        ),
        rkey,
    )
    if strict and not matched:
        raise NothingMatchedError(f"the target matched nothing for owner {owner!r}; receipt {receipt.receipt_id}")
    return receipt


def _verify(op: ForgetOp, spec: ForgetMode) -> Verification:
    store = op.store
    removed = op.removed_sources
    gone = all(not store.exists(i) for i in removed)
    rebuilt = {i for r in op.report.values() for i in r.rebuilt}
    surviving = [i for i in store.descendants(removed) if store.exists(i) and i not in rebuilt]
    scan: dict[str, int] = {}
    texts = [op.literal] if op.literal else [s.text for s in op.sources if s.text and len(s.text) >= 8]
    for a in store.artifacts(owner=op.owner):
        if a.text and any(t in a.text for t in texts if t):
            scan[a.tier.value] = scan.get(a.tier.value, 0) + 1
    ok = gone
    if spec.closure:
        ok = ok and not surviving
    if op.literal:
        ok = ok and all(scan.get(t.value, 0) == 0 for t in spec.claims)
    return Verification(
        claims=[t.value for t in spec.claims], sources_removed=list(removed), sources_gone=gone,
        surviving_descendants=surviving, closure_clean=not surviving, literal_scan=scan, passed=ok,
    )


def _failed(v: Verification, spec: ForgetMode) -> str:
    bits = []
    if not v.sources_gone:
        bits.append("a removed source still exists")
    if spec.closure and v.surviving_descendants:
        bits.append(f"{len(v.surviving_descendants)} descendants survive")
    bad = [t for t in v.claims if v.literal_scan.get(t, 0)]
    if bad:
        bits.append(f"target still present in tier(s) {', '.join(bad)}")
    return "; ".join(bits) or "unknown"
