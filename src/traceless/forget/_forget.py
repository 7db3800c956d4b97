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

import json
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from traceless._version import code_version
from traceless.errors import ConfigError, ForgetError, MemoryStoreError, NothingMatchedError
from traceless.forget._erasure import scan_files
from traceless.forget._finish import KEYS_PENDING as _KEYS_PENDING
from traceless.forget._finish import keys_gone
from traceless.forget._material import Material, scan_store_files, seal_material
from traceless.forget._normalize import compact, find_variants, scrub_variants, split_spans
from traceless.forget._receipt import (
    KeyReport,
    Receipt,
    TargetRef,
    TierReport,
    Verification,
    pseudonym,
    receipt_key,
    sign,
)
from traceless.forget._registry import FORGET_MODES, ForgetMode, forget_mode
from traceless.memory import (
    EXTRACTIVE,
    Artifact,
    MemoryStore,
    MemoryWriter,
    Tier,
    WriteGate,
    enumerable_bits,
    extractive_text,
)

__all__ = ["ForgetTarget", "ForgetMode", "ForgetOp", "FORGET_MODES", "forget_mode", "forget", "TIERS"]

TIERS = (Tier.RAW, Tier.SUMMARY, Tier.EMBEDDING, Tier.CACHE)

MIN_LITERAL_CHARS = 4
"""A literal target needs at least this many characters (not counting whitespace; under
``match="normalized"`` also after normalisation): the shortest common secret, a 4-digit
PIN, has 4, while a shorter string (``in``, ``the``) occurs inside ordinary words."""
MIN_LITERAL_CHARS_REASON = (
    "a shorter string (e.g. 'in') occurs inside ordinary words, so the forget would rewrite unrelated "
    "text and the write gate would refuse every later text containing it (the shortest common secret, "
    "a 4-digit PIN, has 4)"
)


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
    match: Literal["exact", "normalized"] = "exact"
    """``exact`` (paper 001's byte semantics, the default) or ``normalized``: also forget near
    variants (compact form: NFKC, casefold, whitespace, dashes and zero-width characters
    dropped; and a copy split across two consecutive raw records), e.g. 'xq7 violet 3829',
    'XQ7\u2011VIOLET\u20113829' or a full-width copy; the write gate then refuses them too."""

    @model_validator(mode="after")
    def _literal_is_text(self) -> ForgetTarget:
        if self.kind == "literal":
            # ConfigError (not ValueError) so it reaches the caller as itself, not wrapped
            try:
                self.value.encode("utf-8")
            except UnicodeEncodeError:
                raise ConfigError("the literal is not valid text (undecodable bytes); pass it as UTF-8") from None
            short = len("".join(self.value.split())) < MIN_LITERAL_CHARS
            if short or (self.match == "normalized" and len(compact(self.value)) < MIN_LITERAL_CHARS):
                raise ConfigError(
                    f"the literal {'' if short else 'normalised to '}has fewer than {MIN_LITERAL_CHARS} characters: "
                    f"{MIN_LITERAL_CHARS_REASON}; give the whole secret to forget"
                )
        return self

    @classmethod
    def record(cls, record_id: str, owner: str | None = None) -> ForgetTarget:
        return cls(kind="record", value=record_id, owner=owner)

    @classmethod
    def literal(cls, text: str, owner: str, attribute: str = "secret") -> ForgetTarget:
        return cls(kind="literal", value=text, owner=owner, attribute=attribute)

    @classmethod
    def session(cls, session_id: str, owner: str) -> ForgetTarget:
        return cls(kind="session", value=session_id, owner=owner)

    @classmethod
    def user(cls, user_id: str) -> ForgetTarget:
        return cls(kind="user", value=user_id, owner=user_id)


def _scrub(text: str, literal: str, replacement: str) -> str:
    """Remove every occurrence of ``literal`` (or replace it), until none is left: one
    pass of ``str.replace`` can reassemble the literal from its pieces
    (``"XQ7-VIOXQ7-VIOLET-3829LET-3829"``). Deleting collapses the two spaces around a
    removed word into one; the rest of the text keeps its exact spacing."""
    if literal in replacement:
        raise ConfigError(
            f"the forgotten literal occurs inside the replacement {replacement!r}; use a deleting mode (full_purge)"
        )
    out = text
    for _ in range(64):
        if literal not in out:
            break
        out = out.replace(literal, replacement) if replacement else _delete_once(out, literal)
    return out.strip() if not replacement and out != text else out


def _delete_once(text: str, literal: str) -> str:
    """``re.sub(r"([ \\t]?)LITERAL([ \\t]?)", " " if both else "", text)`` with ``str.find``
    (linear at C speed: the regex tried its optional group at every position of a big text).
    A space or tab on both sides of an occurrence becomes one space; on one side, nothing."""
    out, pos, n = [], 0, len(literal)
    i = text.find(literal)
    if i != -1:  # one occurrence (the usual case): one copy of a big text, not its pieces and a join
        s, j = i - 1 if i > 0 and text[i - 1] in " \t" else i, i + n
        e = j + 1 if j < len(text) and text[j] in " \t" else j
        if text.find(literal, e) == -1:
            return text.replace(text[s:e], " " if s < i and e > j else "", 1)
    while i != -1:
        before = i > pos and text[i - 1] in " \t"
        j = i + n
        after = j < len(text) and text[j] in " \t"
        out.append(text[pos: i - 1 if before else i])
        if before and after:
            out.append(" ")
        pos = j + 1 if after else j
        i = text.find(literal, pos)
    out.append(text[pos:])
    return "".join(out)


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
    split_cuts: dict[str, tuple[str, list[tuple[int, int]]]] = field(default_factory=dict)
    """``match="normalized"``: per raw record holding half of a copy split across two
    consecutive records, its text at resolution and the spans to cut from it."""

    def _rep(self, tier: Tier) -> TierReport:
        return self.report.setdefault(tier, TierReport())

    # ---- queries
    def owned(self, tier: Tier, kind: str | None = None) -> list[Artifact]:
        return self.store.artifacts(owner=self.owner, tier=tier, kind=kind)

    def containing(self, tiers: Iterable[Tier] = TIERS) -> list[Artifact]:
        """Owner artifacts in ``tiers`` whose text contains the literal (or, with
        ``match="normalized"``, a near variant of it)."""
        if self.literal is None:
            return []
        ts = set(tiers)
        if self.target.match == "normalized":
            lit = self.literal
            return [a for a in self.store.artifacts(owner=self.owner)
                    if a.tier in ts and a.text and (lit in a.text or a.id in self.split_cuts
                                                    or find_variants(a.text, lit))]
        return [a for a in self.store.containing(self.literal, owner=self.owner) if a.tier in ts]

    def iter_containing(self, tiers: Iterable[Tier] = TIERS) -> Iterator[Artifact]:
        """``containing`` one artifact at a time, read when it is its turn (a big record is
        not held together with every other copy); a source already held is not read again."""
        if self.literal is None or self.target.match == "normalized":
            yield from self.containing(tiers)
            return
        ts = {Tier(t).value for t in tiers}
        held = {a.id: a for a in self.sources}
        for art_id, tier, digest in self.store.containing_refs(self.literal, owner=self.owner):
            if tier in ts:
                a = held.get(art_id)
                yield a if a is not None and a.digest == digest else self.store.get(art_id)

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
        new = art.text or ""
        text0, cuts = self.split_cuts.get(art.id, ("", []))
        if cuts and new == text0:  # the split half first: its spans index the text as resolved
            for a, b in sorted(cuts, reverse=True):
                new = new[:a] + replacement + new[b:]
            new = new if replacement else new.strip()
        new = _scrub(new, self.literal, replacement) if self.literal else replacement
        if self.literal and self.target.match == "normalized":
            new = scrub_variants(new, self.literal, replacement)
        if drop_empty and not new.strip():
            self.remove_with_vectors([art])
            return None
        upd = self.store.update_text(art.id, new, current=art)
        self._rep(art.tier).rewritten.append(art.id)
        return upd

    def reembed(self, art: Artifact) -> None:
        if self.store.embedding_of(art.id) is None:
            return  # nothing was embedded (e.g. written with --no-embed): nothing to recompute
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

    def scrub_metadata(self) -> None:
        """A mode that erases everywhere also clears the literal from metadata: string
        values in ``meta`` (e.g. the free-text ``date``) are scrubbed, and a session id
        that holds it is replaced by a keyed pseudonym."""
        lit = self.literal
        if lit is None:
            return
        for a in self.store.artifacts(owner=self.owner):
            if lit in json.dumps(a.meta, ensure_ascii=False):
                self.store.update_text(a.id, a.text or "", meta=_scrub_json(a.meta, lit))
                self._rep(a.tier).rewritten.append(a.id)
        for sid in self.store.session_ids(self.owner):
            if lit in sid:
                self.store.rename_session(self.owner, sid, pseudonym(f"{self.owner}\x00{sid}", "session"))
                self.note("a session id held the literal and was replaced by a keyed pseudonym")


def _scrub_json(obj: Any, literal: str) -> Any:
    if isinstance(obj, str):
        return _scrub(obj, literal, "")
    if isinstance(obj, dict):
        return {k: _scrub_json(v, literal) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_scrub_json(v, literal) for v in obj]
    return obj


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
        if target.match == "normalized":  # near variants and split halves are sources too
            split = _split_cuts(store, owner, target.value)
            return owner, [a for a in store.artifacts(owner=owner, tier=Tier.RAW) if a.text and (
                target.value in a.text or a.id in split or find_variants(a.text, target.value))]
        return owner, [a for a in store.containing(target.value, owner=owner) if a.tier == Tier.RAW]
    return owner, store.artifacts(owner=owner, tier=Tier.RAW, session_id=target.value)


def _target_ref(target: ForgetTarget, owner: str, key: bytes) -> TargetRef:
    owner_ref = pseudonym(owner, "u", key)
    if target.kind == "literal":
        return TargetRef(kind="literal", ref="hmac:" + pseudonym(target.value, "x", key)[2:], owner=owner_ref)
    if target.kind == "user":
        return TargetRef(kind="user", ref=owner_ref, owner=owner_ref)
    return TargetRef(kind=target.kind, ref=target.value, owner=owner_ref)


#: below this many bits (≈ 10^12 candidates) a holder of the gate key or the pepper can
#: enumerate the literal on one machine in hours: a 4-digit PIN is 13 bits
ENUMERABLE_BITS = 40.0


def literal_warnings(literal: str) -> list[str]:
    """Warnings for a literal that the holder of the local keys could enumerate."""
    bits = enumerable_bits(literal)
    if bits >= ENUMERABLE_BITS:
        return []
    return [
        f"the forgotten literal is short or low-entropy (about 2^{bits:.0f} candidates): whoever holds this "
        "machine's gate key or receipt pepper can recover it by trying every candidate against the gate "
        "descriptor or the receipt's keyed reference. Keep $TRACELESS_HOME private."
    ]


def _check_writer(store: MemoryStore, spec: ForgetMode, writer: MemoryWriter | None) -> None:
    if writer is not None and writer.store is not store:
        raise ConfigError("writer= writes to another MemoryStore; build it on the store being forgotten")


def forget(
    store: MemoryStore,
    target: ForgetTarget,
    mode: str,
    *,
    writer: MemoryWriter | None = None,
    gate: WriteGate | bool | None = None,
    strict: bool = False,
    request_id: str = "",
) -> Receipt:
    """Forget ``target`` with ``mode``; return a signed receipt (also stored in the db).

    ``writer`` supplies the summarizer/embedder for modes that rebuild or re-embed.
    ``gate``: when truthy (``True`` or an enabled ``WriteGate``) and the target is a literal,
    keyed descriptors are stored so the store refuses later writes of the exact value (with
    ``match="normalized"`` also of its near variants; stored even when nothing matched; never
    by the ``noop`` control). An explicit opt-out (``False`` or a disabled ``WriteGate``) is
    recorded in the store's event log; ``None`` (this function's default; the public API and
    the CLI default to ``True``) stores nothing.
    ``strict``: raise ``NothingMatchedError`` (after writing the receipt) when nothing matched.
    ``request_id``: the erasure request's ticket id, signed into the receipt.

    One transaction holds the mode, the verification, the gate descriptors, the receipt
    and a pending-erasure marker; the physical erasure (VACUUM, WAL truncation) and the
    disk scan follow the commit, then the stored receipt is completed and the marker
    cleared. A process killed in between leaves the marker: the next open finishes it.
    """
    spec = FORGET_MODES.get(mode)
    _check_writer(store, spec, writer)
    t0 = time.perf_counter()
    literal = target.value if target.kind == "literal" else None
    pep = receipt_key()
    warnings = literal_warnings(literal) if literal is not None else []
    with store.transaction():
        # resolve inside the transaction: a concurrent writer cannot slip a new copy in
        # between resolution and deletion
        owner, sources = _resolve(store, target)
        before = {t: store.tier_digest(owner, t, key=pep) for t in TIERS}
        all_ids = [a.id for a in store.artifacts(owner=owner)] if target.kind == "user" else []
        op = ForgetOp(store, writer, owner, target, sources, literal)
        if literal is not None and target.match == "normalized":
            op.split_cuts = _split_cuts(store, owner, literal)
        matched, keys = _apply(op, spec, all_ids)
        n_gate = _arm_gate(store, owner, target, spec, gate, pep)
        verification = _verified(op, spec, mode, matched)
        tiers = _tier_reports(op, before, verification, pep)
        if target.kind == "user":  # an erased user's record ids are personal data: keyed pseudonyms only
            verification = _pseudonymised(verification, pep)
        if verification.near_variants or verification.split_copies:
            warnings.append(
                "near variants of the literal remain (case, spacing, Unicode form or split across records); "
                "exact matching left them: forget again with --match normalized"
            )
        if keys is not None:
            # the old master key file is shredded after the commit: until that is durable the
            # stored receipt claims no key destruction (``_erase_and_scan`` completes it)
            verification.checks["old_keys_destroyed"] = False
            verification.passed = False
        receipt = Receipt(
            receipt_id=f"rcpt-{uuid.uuid4().hex[:16]}", request_id=request_id, created_at=time.time(), mode=mode,
            store_id=store.store_id,
            target=_target_ref(target, owner, pep), matched=matched, tiers=tiers, verification=verification,
            erased=_erased(verification, target) if matched else None,
            gate_descriptors_added=n_gate, seconds=0.0, code_version=code_version(),
            notes=op.notes + ([] if store.scannable else [_server_note(store.encrypted)])
            + ([_KEYS_PENDING] if keys is not None else []),
            warnings=warnings, keys=keys, erased_material=_material(pep, target, literal, sources),
            not_covered=_not_covered(store),
            guarantee=["plaintext_scan"] if literal is not None and spec.erases_everywhere and store.scannable else [],
        )
        # the stored copy is signed too; it lacks only the post-commit disk scan
        store.add_receipt(receipt.receipt_id, sign(receipt).model_dump_json())
        store.set_meta("pending_erasure", receipt.receipt_id)
    del op, sources  # their texts are not needed past the commit (a big record is not held for the scan)
    receipt = _erase_and_scan(store, receipt, literal, spec, t0)
    if strict and not matched:
        raise NothingMatchedError(f"the target matched nothing for owner {owner!r}; receipt {receipt.receipt_id}")
    return receipt


def _apply(op: ForgetOp, spec: ForgetMode, all_ids: list[str]) -> tuple[bool, KeyReport | None]:
    """Run the mode when the target matched anything; drop an erased user's lineage edges and,
    in an encrypted store the mode changed, destroy the keys. Returns (matched, key report)."""
    store, owner, target = op.store, op.owner, op.target
    matched = bool(op.sources) or bool(op.containing())
    if matched:
        spec.fn(op)
        if spec.erases_everywhere:
            op.scrub_metadata()
        op.refresh_source_digests()
    erased = target.kind == "user" and not store.artifacts(owner=owner)
    if erased:
        # the user's rows are gone: the lineage edges naming their records go too
        store.delete_lineage(all_ids)
    # an encrypted store destroys the keys old copies would need whenever the mode changed
    # something (the noop control changes nothing, keys included)
    touched = any(r.removed or r.rewritten or r.rebuilt for r in op.report.values())
    keys = KeyReport(**store.crypto_shred(owner, erase=erased)) if store.encrypted and touched else None
    return matched, keys


def _verified(op: ForgetOp, spec: ForgetMode, mode: str, matched: bool) -> Verification:
    """The mode's verification; a matched target that fails it rolls the transaction back."""
    verification = _verify(op, spec)
    if matched and not verification.passed:
        raise ForgetError(
            f"mode {mode!r} could not verify its claims ({_failed(verification, spec)}); "
            "the transaction was rolled back and nothing changed"
        )
    if not matched:  # "nothing to erase" proves no erasure: such a receipt never reads passed=True
        verification = verification.model_copy(update={
            "checks": {**verification.checks, "target_matched": False}, "passed": False})
    return verification


def _not_covered(store: MemoryStore) -> list[str]:
    """What crypto-shredding leaves readable in copies of an encrypted store (issue #22.4)."""
    if not store.encrypted:
        return []
    if store.blind_owner_ids:
        out = ["owner ids: the store keeps none in plaintext (owner columns hold a keyed blind index, the id is "
               "inside the owner's wrapped data key); the blind index key stays for the other owners, so whoever "
               "holds this machine's TRACELESS_HOME and the live store can test a guessed id against a copy "
               "taken before the forget"]
    else:
        out = ["owner ids: this store was created before owner ids were sealed (encryption v1/v2): the owner "
               "column of every artifact row and of the data-key table holds the owner id in plaintext; copies "
               "of the store taken before the forget (backups, WAL, freed blocks, dead PostgreSQL tuples) still "
               "hold it"]
    if not store.sealed_session_ids:
        out.append("session ids: this store was created before session ids were sealed (encryption v1); copies "
                   "taken before the forget hold them in plaintext")
    out.append("artifact ids (counters), tiers, kinds, order in a session, creation times and lineage edges: "
               "no user text, kept in plaintext")
    return out


def _material(pep: bytes, target: ForgetTarget, literal: str | None, sources: list[Artifact]) -> str:
    """What ``forget verify --db`` re-scans a store for: the literal's byte forms, or the
    source records' texts (a user target: the owner's presence, nothing to record)."""
    texts = [(a.id, a.text) for a in sources] if target.kind in ("record", "session") else []
    return seal_material(pep, Material.of(pep, literal, texts))


def _arm_gate(store: MemoryStore, owner: str, target: ForgetTarget, spec: ForgetMode,
              gate: WriteGate | bool | None, pep: bytes) -> int:
    """Store the gate descriptors of a literal target when the gate is on (also the ``norm``
    one under ``match="normalized"``); record an explicit opt-out in the event log."""
    if target.kind != "literal" or not spec.gates:
        return 0
    if bool(gate) and (not isinstance(gate, WriteGate) or gate.enabled):
        return store.gate_forget(owner, target.attribute, target.value, normalized=target.match == "normalized")
    if gate is False or isinstance(gate, WriteGate):
        store.log_event("gate_opt_out", f"forget of a literal of {pseudonym(owner, 'u', pep)} with the write "
                                        "gate explicitly off: later writes of the value are not refused")
    return 0


def _pseudonymised(v: Verification, pep: bytes) -> Verification:
    return v.model_copy(update={name: [pseudonym(i, "p", pep) for i in getattr(v, name)]
                                for name in ("sources_removed", "surviving_descendants")})


def _server_note(encrypted: bool) -> str:
    """Why a database server's store gives no plaintext-scan guarantee."""
    base = ("no byte scan of the live files: they belong to the database server (heap, WAL, replicas, "
            "backups), out of this process's reach")
    if encrypted:
        return base + "; the guarantee is key_destroyed (when the forget changed something): every copy of " \
                      "the old rows is ciphertext under keys it destroyed"
    return base + "; this store is not encrypted, so old row versions may survive there in plaintext " \
                  "(open it with encryption on, the PostgreSQL default)"


def _tier_reports(op: ForgetOp, before: dict[Tier, str], v: Verification, pep: bytes) -> dict[str, TierReport]:
    store, owner = op.store, op.owner
    tiers: dict[str, TierReport] = {}
    for t in TIERS:
        rep = op.report.get(t, TierReport())
        touched = set(rep.removed) | set(rep.rewritten) | set(rep.rebuilt)
        rep.left = sum(1 for a in store.artifacts(owner=owner, tier=t) if a.id not in touched)
        rep.digest_before, rep.digest_after = before[t], store.tier_digest(owner, t, key=pep)
        rep.target_copies_after = v.literal_scan.get(t.value, 0)
        rep.near_variants_after = v.near_variants.get(t.value, 0)
        if op.target.kind == "user":
            # an erased user's record ids are personal data too: keyed pseudonyms only
            for name in ("removed", "rewritten", "rebuilt"):
                setattr(rep, name, [pseudonym(i, "p", pep) for i in dict.fromkeys(getattr(rep, name))])
        tiers[t.value] = rep
    return tiers


def _erase_and_scan(store: MemoryStore, receipt: Receipt, literal: str | None, spec: ForgetMode,
                    t0: float) -> Receipt:
    """After the commit: erase the old bytes physically (page rebalancing can leave old cell
    bytes in a page's unallocated gap that secure_delete does not zero: a store that keeps
    its free space zeroed scrubs the pages the forget touched, an older one is rebuilt by
    VACUUM), truncate the WAL, scan the bytes, then complete the stored receipt and clear the
    pending-erasure marker."""
    notes, warnings = list(receipt.notes), list(receipt.warnings)
    changed = any(r.digest_before != r.digest_after for r in receipt.tiers.values())
    complete = True
    try:
        # an encrypted store's old pages hold ciphertext under keys this forget destroyed, and
        # a scrubbing store's checkpoint zeroes the free space of every page the forget
        # touched: neither rewrites the whole file (flat in store size)
        complete = store.vacuum() if changed and store.needs_vacuum else store.checkpoint()
    except MemoryStoreError as e:  # committed already: report it, do not hide it
        complete = False
        notes.append(f"post-commit VACUUM/checkpoint failed ({e})")
    if not complete:
        warnings.append(
            "physical erasure incomplete: another connection still reads an older snapshot, so old page images "
            "stay in the WAL until a later checkpoint (close that reader, then run `traceless forget verify "
            "--db` to finish)"
        )
    v = receipt.verification
    checks = dict(v.checks)
    guarantee = list(receipt.guarantee)
    if receipt.keys is not None:
        # shred_file synced the removal (file and folder) before the commit's context returned
        checks["old_keys_destroyed"] = keys_gone(store, receipt.keys.old_master_key)
        notes = [n for n in notes if n != _KEYS_PENDING]
        if checks["old_keys_destroyed"]:
            guarantee.append("key_destroyed")
        else:
            warnings.append("the old master key file could not be shredded yet; the next open of the store "
                            "retries (its pending-erasure marker stays until then)")
    if literal is not None and store.scannable and receipt.matched:
        held = _disk_held(store, receipt, literal, complete)
        if spec.erases_everywhere:
            checks["disk_clean"] = not held
        if held and not _own_copies(v) and enumerable_bits(literal) < ENUMERABLE_BITS:
            warnings.append(
                "the literal's bytes are still in the store's files, though in none of the requester's records: "
                "a literal this short can also match unrelated bytes (a timestamp, an id), so the failed disk "
                "check may be a coincidence; forget a longer literal (the whole value) to tell them apart")
        v = v.model_copy(update={"disk_scan": {}, "disk_checked": True, "disk_scope": "owner", "disk_held": held})
    if receipt.keys is not None:
        complete = complete and checks["old_keys_destroyed"]  # the marker stays until they are gone
    v = v.model_copy(update={"checks": checks, "passed": all(checks.values())})
    final = sign(receipt.model_copy(update={
        "seconds": time.perf_counter() - t0, "verification": v, "notes": notes, "warnings": warnings,
        "guarantee": guarantee, "erased": None if receipt.erased is None else receipt.erased and not v.disk_held}))
    with store.transaction():
        store.update_receipt(final.receipt_id, final.model_dump_json())
        if complete:
            store._exec("DELETE FROM meta WHERE key = 'pending_erasure'")
    store.checkpoint()
    for w in final.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return final




def _disk_held(store: MemoryStore, receipt: Receipt, literal: str, complete: bool) -> bool:
    """Whether the live files hold a copy attributable to the requester. The whole-file byte
    count stays here: when no other owner holds the literal every byte found is the
    requester's; when another does (out of scope, never reported), the files are the
    requester's clean iff their rows hold none and the physical erasure completed (no freed
    page or old WAL frame is left, so the only bytes are live rows). Copies inside the
    store's own digests, signatures and timestamps are coincidences (``scan_store_files``)."""
    if not any(scan_files(store.files(), literal).values()):  # the lean scan first: flat in memory
        return False
    pep = receipt_key()
    if not any(scan_store_files(pep, Material.of(pep, literal), store).values()):
        return False
    if not _foreign_holds(store, receipt.target.owner, literal):
        return True
    return _own_copies(receipt.verification) or not complete


def _own_copies(v: Verification) -> bool:
    return bool(any(v.literal_scan.values()) or v.metadata_scan)


def _foreign_holds(store: MemoryStore, owner_ref: str, literal: str) -> bool:
    """Another owner's artifact holds the literal (text or metadata); ``owner_ref`` is the
    requester's keyed pseudonym (as in the receipt)."""
    pep = receipt_key()
    for a in store.artifacts():
        if pseudonym(a.owner, "u", pep) == owner_ref:
            continue
        fields = (a.text or "", a.owner, a.session_id or "", json.dumps(a.meta, ensure_ascii=False))
        if any(literal in f for f in fields):
            return True
    return False


def _erased(v: Verification, target: ForgetTarget) -> bool:
    """No copy of the target left in the requester's data (``Receipt.erased``): near variants
    count only under ``match="normalized"`` (under exact matching they are warnings)."""
    variants = target.match == "normalized" and bool(v.near_variants or v.split_copies)
    return v.sources_gone and not v.surviving_descendants and not _own_copies(v) and not variants


def _metadata_scan(store: MemoryStore, owner: str, literal: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in store.iter_artifacts(owner=owner):
        fields = {"id": a.id, "owner": a.owner, "session_id": a.session_id or "", "kind": a.kind,
                  "meta": json.dumps(a.meta, ensure_ascii=False)}
        for name, val in fields.items():
            if literal in val:
                out[name] = out.get(name, 0) + 1
    return out


def _split_pairs(store: MemoryStore, owner: str, literal: str) -> list[tuple[Artifact, Artifact, int, int]]:
    """Copies of the literal's compact form split across two consecutive raw records of a
    session: (first, second, start of the half in first, end of the half in second)."""
    raws: dict[str, list[Artifact]] = {}
    for a in store.artifacts(owner=owner, tier=Tier.RAW):
        if a.session_id:
            raws.setdefault(a.session_id, []).append(a)
    out: list[tuple[Artifact, Artifact, int, int]] = []
    for recs in raws.values():
        recs.sort(key=lambda r: (r.seq, r.id))
        for x, y in zip(recs, recs[1:], strict=False):
            out += [(x, y, a, b) for a, b in split_spans(x.text or "", y.text or "", literal)]
    return out


def _split_cuts(store: MemoryStore, owner: str, literal: str) -> dict[str, tuple[str, list[tuple[int, int]]]]:
    """Per raw record holding a split half: its text and the spans to cut (``ForgetOp.split_cuts``)."""
    cuts: dict[str, tuple[str, list[tuple[int, int]]]] = {}
    for x, y, a, b in _split_pairs(store, owner, literal):
        cuts.setdefault(x.id, (x.text or "", []))[1].append((a, len(x.text or "")))
        cuts.setdefault(y.id, (y.text or "", []))[1].append((0, b))
    return cuts


def _variant_scan(store: MemoryStore, owner: str, literal: str) -> tuple[dict[str, int], int]:
    """Near variants per tier (exact bytes absent), and copies split across consecutive raw records."""
    near: dict[str, int] = {}
    for a in store.iter_artifacts(owner=owner):
        if a.text and literal not in a.text and find_variants(a.text, literal):
            near[a.tier.value] = near.get(a.tier.value, 0) + 1
    return near, len(_split_pairs(store, owner, literal))


def _verify(op: ForgetOp, spec: ForgetMode) -> Verification:
    store = op.store
    removed = op.removed_sources
    gone = all(not store.exists(i) for i in removed)
    rebuilt = {i for r in op.report.values() for i in r.rebuilt}
    surviving = [i for i in store.descendants(removed) if store.exists(i) and i not in rebuilt]
    texts = [op.literal] if op.literal else [s.text for s in op.sources if s.text and len(s.text) >= 8]
    scan = _literal_scan(store, op.owner, texts)
    checks = {"sources_gone": gone}
    if spec.closure:
        checks["closure_clean"] = not surviving
    meta_scan: dict[str, int] = {}
    near: dict[str, int] = {}
    split = 0
    if op.literal:
        checks["claimed_tiers_clean"] = all(scan.get(t.value, 0) == 0 for t in spec.claims)
        meta_scan = _metadata_scan(store, op.owner, op.literal)
        near, split = _variant_scan(store, op.owner, op.literal)
        if spec.erases_everywhere:
            checks["metadata_clean"] = not meta_scan
        if op.target.match == "normalized":
            checks["near_variants_clean"] = not any(near.get(t.value, 0) for t in spec.claims)
            if Tier.RAW in spec.claims:
                checks["split_clean"] = split == 0
    return Verification(
        claims=[t.value for t in spec.claims], sources_removed=list(removed), sources_gone=gone,
        surviving_descendants=surviving, closure_clean=not surviving, literal_scan=scan,
        metadata_scan=meta_scan, near_variants=near, split_copies=split, checks=checks,
        passed=all(checks.values()),
    )


def _literal_scan(store: MemoryStore, owner: str, texts: list[str]) -> dict[str, int]:
    """Artifacts per tier whose text holds one of ``texts`` (read one at a time)."""
    scan: dict[str, int] = {}
    for a in store.iter_artifacts(owner=owner):
        if a.text and any(t in a.text for t in texts if t):
            scan[a.tier.value] = scan.get(a.tier.value, 0) + 1
    return scan


def _failed(v: Verification, spec: ForgetMode) -> str:
    bits = [name for name, ok in v.checks.items() if not ok]
    bad = [t for t in v.claims if v.literal_scan.get(t, 0)]
    if bad:
        bits.append(f"target still present in tier(s) {', '.join(bad)}")
    if v.metadata_scan:
        bits.append("literal in " + ", ".join(v.metadata_scan))
    return "; ".join(bits) or "unknown"
