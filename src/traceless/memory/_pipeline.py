"""The write pipeline: session → raw records → summaries (S=1 key facts, S=2 one
sentence, paper 001's extractive consolidation) → embeddings, lineage at every step.

Model calls run before the database transaction (a slow LLM never holds the write lock);
everything a session produces is then inserted in one transaction, so a failed or
refused write leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from traceless import _hooks, prompts
from traceless.errors import ConfigError, DuplicateSessionError
from traceless.memory._gate import WriteGate
from traceless.memory._store import MemoryStore, NewArtifact
from traceless.memory._types import EXTRACTIVE, KIND_BY_LEVEL, Artifact, Session, Tier
from traceless.models import ChatMessage, Embedder, GenerationConfig, ModelBackend

__all__ = [
    "WriteConfig",
    "MemoryWriter",
    "SummaryLevel",
    "OnDuplicate",
    "EXTRACTIVE",
    "WriteReport",
    "KIND_BY_LEVEL",
    "extractive_text",
    "parse_facts",
]

SummaryLevel = Literal[1, 2]
OnDuplicate = Literal["error", "skip", "replace"]
_BATCH = 2048  # sessions per insert batch: bounds the rows held in memory at once


class WriteConfig(BaseModel):
    """How sessions become memory."""

    model_config = ConfigDict(frozen=True)

    raw_unit: Literal["user_turn", "turn", "session"] = "user_turn"
    """One raw record per user turn (paper 000 S=0), per turn (any role), or per session."""
    levels: tuple[int, ...] = (1, 2)
    """LLM summary levels to build: 1 = key personal facts, 2 = one-sentence summary."""
    extractive: bool = False
    """After writing, build paper 001's extractive consolidation per owner (records sorted
    by id, text joined by newline); it is not embedded (it is rendered whole)."""
    embed: bool = True
    """Embed raw records and summaries for retrieval."""
    summary_max_tokens: int = Field(96, ge=8)
    """Token budget for one summary."""
    max_facts: int = Field(6, ge=1)
    """At most this many key-fact chunks per session at S=1."""
    supersede_cosine: float | None = Field(None, ge=-1.0, le=1.01)
    """``raw_plus_resummarize`` only: the cosine at which a regenerated summary chunk replaces
    an old one (None: the mode's ``SUPERSEDE_COSINE``; above 1, nothing is ever replaced)."""


def _prompt_digest(template: str) -> str:
    return hashlib.sha256(template.encode()).hexdigest()[:12]


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def parse_facts(text: str, max_facts: int) -> list[str]:
    """Split a key-facts reply into fact lines (bullets stripped, empties dropped)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    bullets = [_BULLET.sub("", ln).strip() for ln in lines if _BULLET.match(ln)]
    facts = bullets or lines
    return [f for f in facts if f][:max_facts]


def extractive_text(records: Sequence[Artifact]) -> str:
    """Paper 001: active raw records sorted by id, text joined verbatim with '\\n'."""
    return "\n".join((r.text or "") for r in sorted(records, key=lambda r: r.id))


def _split(items: Sequence[Artifact], sizes: Sequence[int]) -> list[Sequence[Artifact]]:
    """``items`` cut into consecutive runs of ``sizes``."""
    out, k = [], 0
    for n in sizes:
        out.append(items[k:k + n])
        k += n
    return out


@dataclass
class _PendingRaw:
    session: Session
    seq: int
    text: str
    role: str
    has_answer: bool
    turn_indices: list[int]


@dataclass
class WriteReport:
    """What one write created."""

    raw: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    embedding: list[str] = field(default_factory=list)


class MemoryWriter:
    """Writes sessions into a ``MemoryStore`` with lineage.

    ``summarizer`` is the model used for S=1/S=2 summaries (omit when ``levels=()``);
    ``embedder`` computes retrieval vectors (omit when ``embed=False``).
    """

    def __init__(
        self,
        store: MemoryStore,
        *,
        summarizer: ModelBackend | None = None,
        embedder: Embedder | None = None,
        config: WriteConfig | None = None,
        gate: WriteGate | None = None,
    ) -> None:
        self.store = store
        self.summarizer = summarizer
        self.embedder = embedder
        self.config = config or WriteConfig()
        self.gate = gate
        if self.config.levels and summarizer is None:
            raise ValueError("WriteConfig.levels needs a summarizer model; pass summarizer= or levels=()")
        if self.config.embed and embedder is None:
            raise ValueError("WriteConfig.embed needs an embedder; pass embedder= or embed=False")

    # --------------------------------------------------------------- raw units
    def _raw_units(self, s: Session) -> list[_PendingRaw]:
        unit = self.config.raw_unit
        if unit == "session":
            idx = [i for i, t in enumerate(s.turns) if t.role == "user"]
            text = "\n".join(s.turns[i].content for i in idx)
            return [_PendingRaw(s, 0, text, "user", any(s.turns[i].has_answer for i in idx), idx)] if idx else []
        out = []
        for i, t in enumerate(s.turns):
            if unit == "user_turn" and t.role != "user":
                continue
            out.append(_PendingRaw(s, i, t.content, t.role, t.has_answer, [i]))
        return out

    # --------------------------------------------------------------- summaries
    def summary_prompt(self, level: int, texts: Sequence[str]) -> list[ChatMessage]:
        template = prompts.SUMMARY_KEY_FACTS if level == 1 else prompts.SUMMARY_ONE_SENTENCE
        body = "\n".join(f"- {t}" for t in texts)
        return [ChatMessage(role="user", content=template.format(text=body))]

    def _summarize(self, jobs: list[tuple[int, list[str]]]) -> list[list[str]]:
        """Run summary jobs (level, source texts) as one batch; return the chunks per job."""
        if not jobs:
            return []
        assert self.summarizer is not None
        cfg = GenerationConfig(max_new_tokens=self.config.summary_max_tokens, temperature=0.0)
        gens = self.summarizer.generate_batch([self.summary_prompt(lv, tx) for lv, tx in jobs], cfg)
        out: list[list[str]] = []
        for (level, _), g in zip(jobs, gens, strict=True):
            if level == 1:
                out.append(parse_facts(g.text, self.config.max_facts))
            else:
                sent = " ".join(g.text.strip().split())
                out.append([sent] if sent else [])
        return out

    def _params(self, level: int) -> dict[str, object]:
        assert self.summarizer is not None
        template = prompts.SUMMARY_KEY_FACTS if level == 1 else prompts.SUMMARY_ONE_SENTENCE
        return {"S": level, "model": self.summarizer.name, "prompt": _prompt_digest(template)}

    # --------------------------------------------------------------- gate
    def check_gate(self, owner: str, texts: Iterable[str]) -> None:
        """Raise ``GateBlockedError`` if any text carries a literal gated for ``owner``.

        An early check, so a refused write wastes no model call; the store enforces the
        gate again on every insert, inside the write transaction."""
        if self.gate is not None and not self.gate.enabled:
            return
        for t in texts:
            self.store.gate_check(owner, t)

    def _gated(self) -> contextlib.AbstractContextManager[object]:
        """The store's write transaction, ungated (and recorded) only when this writer was
        explicitly given a disabled gate."""
        if self.gate is not None and not self.gate.enabled:
            return self.store.ungated("writer built with a disabled gate")
        return self.store.transaction()

    # --------------------------------------------------------------- public
    def write_sessions(self, sessions: Sequence[Session], *, on_duplicate: OnDuplicate = "error") -> WriteReport:
        """Write sessions as ONE transaction: every session with its summaries, embeddings
        and the consolidation, or nothing. Model calls (summaries, embeddings) run before
        the transaction, so a slow model never holds the write lock.

        ``on_duplicate``: a session id the owner already has is an ``error`` (default,
        nothing written), skipped (``skip``), or its old artifacts are replaced (``replace``).
        """
        if on_duplicate not in ("error", "skip", "replace"):
            raise ConfigError(f"on_duplicate must be error, skip or replace, not {on_duplicate!r}")
        units = [self._raw_units(s) for s in sessions]
        jobs: list[tuple[int, list[str]]] = []
        job_index: list[list[tuple[int, int]]] = []
        for us in units:
            mine = []
            texts = [u.text for u in us]
            for lv in self.config.levels:
                if texts:
                    mine.append((lv, len(jobs)))
                    jobs.append((lv, texts))
            job_index.append(mine)
        for s, us in zip(sessions, units, strict=True):
            self.check_gate(s.user_id, (u.text for u in us))
        chunks = self._summarize(jobs)
        for s, mine in zip(sessions, job_index, strict=True):
            self.check_gate(s.user_id, (c for _, j in mine for c in chunks[j]))
        vectors = self._vectors([u.text for us in units for u in us] + [c for cs in chunks for c in cs])
        report = WriteReport()
        # bulk(): the rows of many sessions travel in batches (COPY on PostgreSQL)
        with self._gated(), self.store.bulk():
            keep = self._resolve_duplicates(sessions, on_duplicate)
            self._check_owner_ids({s.user_id for s in sessions})
            self._insert_sessions([(s, us, [(lv, chunks[j]) for lv, j in mine])
                                   for s, us, mine in zip(sessions, units, job_index, strict=True)
                                   if (s.user_id, s.session_id) in keep], vectors, report)
            if self.config.extractive:
                for owner in dict.fromkeys(s.user_id for s in sessions):
                    ext = self.consolidate(owner)
                    if ext is not None:
                        report.summary.append(ext.id)
        return report

    def _vectors(self, texts: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        if not self.config.embed or not texts:
            return {}
        assert self.embedder is not None
        uniq = list(dict.fromkeys(texts))
        return dict(zip(uniq, self.embedder.embed(uniq), strict=True))

    def _resolve_duplicates(self, sessions: Sequence[Session], on_duplicate: OnDuplicate) -> set[tuple[str, str]]:
        """Inside the transaction: which sessions to insert (re-adding is an explicit choice)."""
        keep: set[tuple[str, str]] = set()
        present = self.store.present_sessions((s.user_id, s.session_id) for s in sessions)
        for s in sessions:
            if (s.user_id, s.session_id) not in present:
                keep.add((s.user_id, s.session_id))
                continue
            old = self.store.artifacts(owner=s.user_id, tier=Tier.RAW, session_id=s.session_id)
            if old and on_duplicate == "error":
                raise DuplicateSessionError(
                    f"session {s.session_id!r} of user {s.user_id!r} is already in {self.store.path}; nothing was "
                    "written. Re-run with --on-duplicate skip (keep what is there) or replace (rewrite it)."
                )
            if old and on_duplicate == "skip":
                continue
            if old:
                ids = [a.id for a in self.store.artifacts(owner=s.user_id, session_id=s.session_id)]
                self.store.delete(dict.fromkeys([*ids, *self.store.descendants([a.id for a in old])]))
            keep.add((s.user_id, s.session_id))
        return keep

    def _check_owner_ids(self, owners: set[str]) -> None:
        existing = {o.casefold(): o for o in self.store.owners()}
        for o in sorted(owners):
            twin = existing.get(o.casefold())
            if twin is not None and twin != o:
                raise ConfigError(
                    f"user id {o!r} differs from the stored user {twin!r} only in case; ids are compared "
                    f"exactly, so use {twin!r} (or a clearly different id). Nothing was written."
                )

    def _insert_sessions(
        self, todo: Sequence[tuple[Session, list[_PendingRaw], list[tuple[int, list[str]]]]],
        vectors: dict[str, npt.NDArray[np.float32]], report: WriteReport,
    ) -> None:
        """Insert sessions (raw records, their summaries, then the embeddings of both) with
        one batch per tier: ids come out as session by session, in order."""
        for i in range(0, len(todo), _BATCH):
            part = todo[i:i + _BATCH]
            raws = self.store.add_many([self._raw_draft(s, u) for s, us, _ in part for u in us])
            raw_of = _split(raws, [len(us) for _, us, _ in part])
            summaries = self.store.add_many([
                self._summary_draft(s.user_id, s.session_id, lv, j, c, [r.id for r in rs], s.date)
                for (s, _, levels), rs in zip(part, raw_of, strict=True) for lv, cs in levels
                for j, c in enumerate(cs)])
            summary_of = _split(summaries, [sum(len(cs) for _, cs in levels) for _, _, levels in part])
            report.raw += [r.id for r in raws]
            report.summary += [a.id for a in summaries]
            if self.config.embed:
                ordered = [a for rs, ss in zip(raw_of, summary_of, strict=True) for a in (*rs, *ss)]
                report.embedding += [e.id for e in self.embed(ordered, vectors)]

    def _raw_draft(self, s: Session, u: _PendingRaw) -> NewArtifact:
        return NewArtifact(
            owner=s.user_id, tier=Tier.RAW, kind="turn", text=u.text, session_id=s.session_id, seq=u.seq,
            meta={"role": u.role, "has_answer": u.has_answer, "turns": u.turn_indices, "date": s.date, "level": 0,
                  "neighbors": sorted({n for i in u.turn_indices for n in s.neighbors.get(str(i), [])})},
        )

    def _summary_draft(self, owner: str, session_id: str, level: int, seq: int, chunk: str,
                       parents: list[str], date: str | None) -> NewArtifact:
        return NewArtifact(
            owner=owner, tier=Tier.SUMMARY, kind=KIND_BY_LEVEL[level], text=chunk, session_id=session_id, seq=seq,
            meta={"level": level, "date": date}, parents=tuple(parents), op="summarize", params=self._params(level),
        )

    def _insert_summary(
        self, owner: str, session_id: str, level: int, chunks: Sequence[str], sources: Sequence[Artifact],
        date: str | None, start_seq: int = 0,
    ) -> list[Artifact]:
        parents = [r.id for r in sources]
        return self.store.add_many([self._summary_draft(owner, session_id, level, start_seq + i, c, parents, date)
                                    for i, c in enumerate(chunks)])

    def summarize_sources(self, level: int, sources: Sequence[Artifact]) -> list[str]:
        """Run the level-``level`` summarizer on the current text of ``sources`` (for rebuilds)."""
        return self.summarize_sources_many([(level, sources)])[0]

    def summarize_sources_many(self, jobs: Sequence[tuple[int, Sequence[Artifact]]]) -> list[list[str]]:
        """``summarize_sources`` for several jobs in one batched model call (the S=1 and S=2
        prompts of a session share their prefix, so a batch reads each session once)."""
        texts = [[s.text or "" for s in sources if (s.text or "").strip()] for _, sources in jobs]
        todo = [(lv, tx) for (lv, _), tx in zip(jobs, texts, strict=True) if tx]
        done = iter(self._summarize(todo))
        return [next(done) if tx else [] for tx in texts]

    def write_summary(
        self, owner: str, session_id: str, level: int, chunks: Sequence[str], sources: Sequence[Artifact],
        *, start_seq: int = 0,
    ) -> list[Artifact]:
        """Insert already-generated summary chunks (with lineage and embeddings), gate-checked."""
        self.check_gate(owner, chunks)
        date = sources[0].meta.get("date") if sources else None
        vectors = self._vectors(list(chunks))
        with self.store.transaction():
            arts = self._insert_summary(owner, session_id, level, chunks, sources, date, start_seq)
            if self.config.embed:
                self.embed(arts, vectors)
        return arts

    def consolidate(self, owner: str, *, replace: bool = True) -> Artifact | None:
        """Build paper 001's extractive consolidation of ``owner``'s current raw records.

        The summary is an immutable object with evaluator-side source ids and digests in
        ``meta``. With ``replace`` the owner's earlier consolidations are deleted first
        (they are superseded by this one, which covers the same and newer records).
        """
        with self.store.transaction():
            # read under the write lock: a forget committed between this read and the
            # write below would otherwise be undone by the consolidation
            raws = self.store.artifacts(owner=owner, tier=Tier.RAW)
            _hooks.point("consolidate:after_read")
            if not raws:
                return None
            text = extractive_text(raws)
            if replace:
                old = self.store.artifacts(owner=owner, tier=Tier.SUMMARY, kind=EXTRACTIVE)
                self.store.delete([o.id for o in old])
            return self.store.add(
                owner=owner, tier=Tier.SUMMARY, kind=EXTRACTIVE, text=text, session_id=None,
                meta={"sources": {r.id: r.digest for r in raws}},
                parents=[r.id for r in raws], op="extract", params={"transform": "sort_by_id_join_newline"},
            )

    def embed(
        self, artifacts: Sequence[Artifact], vectors: dict[str, npt.NDArray[np.float32]] | None = None,
    ) -> list[Artifact]:
        """Create one embedding artifact per text artifact (vector + source text); ``vectors``
        holds vectors computed earlier (outside the transaction), by text."""
        todo = [a for a in artifacts if a.text is not None and a.tier in (Tier.RAW, Tier.SUMMARY)]
        if not todo:
            return []
        assert self.embedder is not None
        have = vectors or {}
        missing = [a.text or "" for a in todo if (a.text or "") not in have]
        if missing:
            have = {**have, **self._vectors_now(missing)}
        vecs = [have[a.text or ""] for a in todo]
        params = {"model": self.embedder.name}
        with self.store.transaction():
            return self.store.add_many([
                NewArtifact(owner=a.owner, tier=Tier.EMBEDDING, kind="vector", text=a.text, vector=v,
                            session_id=a.session_id, seq=a.seq, meta={"embedder": self.embedder.name},
                            parents=(a.id,), op="embed", params=params)
                for a, v in zip(todo, vecs, strict=True)
            ])

    def _vectors_now(self, texts: list[str]) -> dict[str, npt.NDArray[np.float32]]:
        assert self.embedder is not None
        uniq = list(dict.fromkeys(texts))
        return dict(zip(uniq, self.embedder.embed(uniq), strict=True))

    def reembed(self, artifact: Artifact) -> Artifact | None:
        """Recompute the embedding of ``artifact`` from its current text."""
        emb = self.store.embedding_of(artifact.id)
        if emb is None or self.embedder is None:
            return None
        vec = self.embedder.embed([artifact.text or ""])[0]
        with self.store.transaction():
            return self.store.update_vector(emb.id, vec, artifact.text)
