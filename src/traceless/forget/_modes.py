"""The forget modes of papers 000 (the deletion ladder, Table 1) and 001 (exact,
recorded-lineage closure, exposure group). One decorated function each.

Literal targets are scrubbed where the mode scrubs; record, session and user targets
resolve to raw records that are removed (or, for ``tombstone``, redacted) whole.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from traceless.errors import ConfigError
from traceless.forget import forget_mode
from traceless.memory import EXTRACTIVE, KIND_BY_LEVEL, Artifact, Tier
from traceless.prompts import REDACTED

if TYPE_CHECKING:  # this module is imported to list the modes: it must stay light (issue #13.4)
    from traceless.forget import ForgetOp

__all__: list[str] = []

_LEVEL_OF_KIND = {v: k for k, v in KIND_BY_LEVEL.items() if k > 0}
_TEXT_TIERS = (Tier.RAW, Tier.SUMMARY, Tier.CACHE)


@forget_mode("noop", gates=False, help="control: nothing changes (stores no gate descriptor either)")
def noop(op: ForgetOp) -> None:
    op.note("noop control: every tier left unchanged")


@forget_mode("raw_only", claims=(Tier.RAW,),
             help="raw text scrubbed; embeddings not recomputed (stale vector stays); summaries untouched")
def raw_only(op: ForgetOp) -> None:
    if op.literal is not None:
        for a in op.sources:
            op.scrub(a)
    else:
        op.remove(op.sources, as_source=True)
    stale = sum(1 for a in op.sources if op.store.embedding_of(a.id) is not None)
    op.note(f"{stale} embedding(s) not recomputed: stale vectors and their source text remain")
    op.note(f"summary tier untouched ({len(op.owned(Tier.SUMMARY))} summary artifacts left)")


SUPERSEDE_COSINE = 0.50
"""A regenerated summary chunk supersedes (replaces) the old chunk of its session and level
it is most similar to when their cosine under the store's embedder reaches this value: the
same "same meaning" threshold paper 000 uses for its PR rule (cos > 0.50 under
all-MiniLM-L6-v2)."""


@forget_mode("raw_plus_resummarize", claims=(Tier.RAW,), needs_summarizer=True, needs_embedder=True,
             help="raw scrubbed and re-embedded; affected sessions re-summarized from the cleaned input; "
                  "each new summary chunk replaces the old chunk it matches (cosine >= 0.50), old chunks "
                  "no new chunk matches stay (pre-existing summary artifacts not fully removed)")
def raw_plus_resummarize(op: ForgetOp) -> None:
    """Paper 000 measured residue for this mode because 'pre-existing summary artifacts are
    not fully removed before regeneration'. We model the reconcile step of fact-memory
    pipelines: the affected sessions are re-summarized from the cleaned raw records, the new
    chunks are added, and an old chunk of the same session and level is retired only when a
    new chunk supersedes it (one-to-one, greedy by cosine, at least ``SUPERSEDE_COSINE``).
    An old chunk the regeneration does not account for (typically the fact the cleaned input
    no longer supports, e.g. 'private session token is …') stays, with its vector. So
    residue appears exactly when an old chunk kept the canary and no new chunk resembles it,
    at S=1 and at S=2 alike. Cross-session (extractive) summaries are not regenerated."""
    if op.literal is not None:
        for a in op.sources:
            upd = op.scrub(a)
            if upd is not None:
                op.reembed(upd)
    else:
        op.remove_with_vectors(op.sources, as_source=True)
    plan = _resummarize_plan(op)
    # every re-summary in one batched model call, before any write
    summaries = op.summarize_many([(_LEVEL_OF_KIND[kind], cleaned) for _, kind, _, cleaned in plan])
    for chunks in summaries:
        op.check_gate(chunks)
    kept = 0
    for (sid, kind, existing, cleaned), chunks in zip(plan, summaries, strict=True):
        superseded = _superseded(op, existing, chunks)
        start = max((s.seq for s in existing), default=-1) + 1
        if chunks:
            op.add_summaries(sid, _LEVEL_OF_KIND[kind], chunks, cleaned, start_seq=start)
        op.remove_with_vectors(superseded)
        kept += len(existing) - len(superseded)
    op.note(f"{kept} pre-existing summary chunk(s) that no regenerated chunk superseded left in place")
    n_ext = len(op.owned(Tier.SUMMARY, EXTRACTIVE))
    if n_ext:
        op.note(f"{n_ext} cross-session extractive summary(ies) not regenerated")


def _resummarize_plan(op: ForgetOp) -> list[tuple[str, str, list[Artifact], list[Artifact]]]:
    """(session, summary kind, its existing chunks, the session's cleaned raw records) for
    every affected session and LLM summary level it has."""
    plan: list[tuple[str, str, list[Artifact], list[Artifact]]] = []
    for sid in sorted({a.session_id for a in op.sources if a.session_id}):
        cleaned = [a for a in op.store.artifacts(owner=op.owner, tier=Tier.RAW, session_id=sid)
                   if (a.text or "").strip()]
        by_kind: dict[str, list[Artifact]] = defaultdict(list)
        for s in op.store.artifacts(owner=op.owner, tier=Tier.SUMMARY, session_id=sid):
            if s.kind in _LEVEL_OF_KIND:
                by_kind[s.kind].append(s)
        for kind, existing in sorted(by_kind.items()):
            existing.sort(key=lambda s: (s.seq, s.id))
            plan.append((sid, kind, existing, cleaned))
    return plan


def _superseded(op: ForgetOp, existing: list[Artifact], chunks: list[str]) -> list[Artifact]:
    """The old chunks a regenerated chunk replaces: greedy one-to-one matching by cosine
    (highest first; ties by position), pairs below ``SUPERSEDE_COSINE`` (or the writer's
    ``WriteConfig.supersede_cosine``) never match."""
    if not existing or not chunks:
        return []
    if op.writer is None or op.writer.embedder is None:
        raise ConfigError("raw_plus_resummarize matches regenerated summaries to old ones by embedding; "
                          "pass a writer with an embedder to forget()")
    import numpy as np  # only a re-summarizing forget needs it, not the mode listing

    cut = op.writer.config.supersede_cosine
    threshold = SUPERSEDE_COSINE if cut is None else cut
    vecs = op.writer.embedder.embed([s.text or "" for s in existing] + chunks)
    old, new = vecs[: len(existing)], vecs[len(existing):]
    norms_o = np.linalg.norm(old, axis=1)
    norms_n = np.linalg.norm(new, axis=1)
    sims = (new @ old.T) / np.maximum(np.outer(norms_n, norms_o), 1e-12)
    pairs = sorted(((float(sims[i, j]), i, j) for i in range(len(chunks)) for j in range(len(existing))),
                   key=lambda t: (-t[0], t[1], t[2]))
    used_new: set[int] = set()
    used_old: set[int] = set()
    for cos, i, j in pairs:
        if cos < threshold:
            break
        if i not in used_new and j not in used_old:
            used_new.add(i)
            used_old.add(j)
    return [existing[j] for j in sorted(used_old)]


def _purge_stale_vectors(op: ForgetOp) -> None:
    """Embeddings whose source text still holds the literal: re-embed from the parent's
    current text, or drop them if the parent is gone."""
    for e in op.containing((Tier.EMBEDDING,)):
        parents = [p.parent for p in op.store.parents(e.id)]
        alive = [op.store.get(p) for p in parents if op.store.exists(p)]
        if alive:
            op.reembed(alive[0])
        else:
            op.remove([e])


@forget_mode("full_purge", claims=(Tier.RAW, Tier.SUMMARY, Tier.EMBEDDING, Tier.CACHE), needs_embedder=True,
             help="every tier scrubbed and re-embedded; empty chunks dropped")
def full_purge(op: ForgetOp) -> None:
    if op.literal is not None:
        for a in op.iter_containing(_TEXT_TIERS):
            upd = op.scrub(a, drop_empty=True)
            if upd is not None:
                op.reembed(upd)
            del a, upd  # a big record is held once at a time
        _purge_stale_vectors(op)
        return
    desc = op.descendants([a.id for a in op.sources])
    op.remove_with_vectors(op.sources, as_source=True)
    op.remove(d for d in desc if op.store.exists(d.id))
    if op.target.kind == "user":
        op.remove(op.store.artifacts(owner=op.owner))


@forget_mode("tombstone", claims=(Tier.RAW, Tier.SUMMARY, Tier.EMBEDDING, Tier.CACHE), needs_embedder=True,
             help="the target replaced by [REDACTED] in every tier and re-embedded")
def tombstone(op: ForgetOp) -> None:
    if op.literal is not None:
        for a in op.containing(_TEXT_TIERS):
            op.reembed(op.scrub(a, REDACTED) or a)
        _purge_stale_vectors(op)
        return
    desc = [d for d in op.descendants([a.id for a in op.sources]) if d.tier != Tier.EMBEDDING]
    for a in [*op.sources, *desc]:
        upd = op.scrub(a, REDACTED)
        if upd is not None:
            op.reembed(upd)


@forget_mode("exact", claims=(Tier.RAW,), needs_embedder=True,
             help="paper 001 exact source-record deletion: the raw record removed and verified gone; "
                  "summaries untouched")
def exact(op: ForgetOp) -> None:
    op.remove_with_vectors(op.sources, as_source=True)
    left = [d for d in op.descendants(op.removed_sources) if op.store.exists(d.id)]
    op.note(f"{len(left)} derived artifact(s) of the removed record(s) deliberately left in place")


@forget_mode("lineage_closure", claims=(Tier.RAW, Tier.SUMMARY, Tier.EMBEDDING, Tier.CACHE), closure=True,
             needs_embedder=True, uses_recorded_summarizer=True,
             help="paper 001 recorded-lineage closure: retire every descendant of the removed records; "
                  "rebuild those that also drew on surviving records with the same transform")
def lineage_closure(op: ForgetOp) -> None:
    desc = op.descendants([a.id for a in op.sources])
    if op.literal is not None:
        # Copies of the literal outside the tracked descendants (e.g. summaries left by an
        # earlier raw_only forget, whose raw source no longer holds it) are retired too, and
        # rebuilt from their surviving parents like any other descendant.
        known = {d.id for d in desc}
        extra = [a for a in op.containing((Tier.SUMMARY, Tier.CACHE)) if a.id not in known]
        known |= {a.id for a in extra}
        desc += extra + [d for d in op.descendants([a.id for a in extra]) if d.id not in known]
    op.remove_with_vectors(op.sources, as_source=True)
    rebuild_ext: dict[tuple[str, ...], None] = {}
    rebuild_llm: dict[tuple[str, int], list[str]] = {}
    for d in desc:
        if not op.store.exists(d.id) or d.tier == Tier.EMBEDDING:
            continue
        edges = op.store.parents(d.id)
        surviving = tuple(sorted(e.parent for e in edges if op.store.exists(e.parent)))
        if surviving and d.kind == EXTRACTIVE:
            rebuild_ext[surviving] = None
        elif surviving and d.kind in _LEVEL_OF_KIND and d.session_id:
            rebuild_llm[(d.session_id, _LEVEL_OF_KIND[d.kind])] = list(surviving)
        op.remove_with_vectors([d])
    for d in desc:  # anything derived further down (e.g. vectors of removed summaries)
        if op.store.exists(d.id):
            op.remove([d])
    for ext_parents in rebuild_ext:
        op.rebuild_extractive(op.store.artifacts(ids=ext_parents))
    rebuilds = [(sid, level, op.store.artifacts(ids=ps)) for (sid, level), ps in sorted(rebuild_llm.items())]
    summaries = op.summarize_many([(level, srcs) for _, level, srcs in rebuilds])
    for (sid, level, srcs), chunks in zip(rebuilds, summaries, strict=True):
        if chunks:
            op.add_summaries(sid, level, chunks, srcs)
    if op.literal is not None:
        _purge_stale_vectors(op)  # stale vectors of surviving parents are rebuilt (re-embedded)
    if op.target.kind == "user":
        op.remove(op.store.artifacts(owner=op.owner))


@forget_mode("exposure_group", claims=(Tier.RAW,), needs_embedder=True,
             help="paper 001 diagnostic: delete the source with its declared neighbour records and drop any "
                  "summary containing a removed record verbatim")
def exposure_group(op: ForgetOp) -> None:
    group: dict[str, Artifact] = {a.id: a for a in op.sources}
    for src in op.sources:
        wanted = set(src.meta.get("neighbors") or [])
        if not wanted or not src.session_id:
            continue
        for r in op.store.artifacts(owner=op.owner, tier=Tier.RAW, session_id=src.session_id):
            if wanted & set(r.meta.get("turns") or []):
                group[r.id] = r
    texts = [a.text for a in group.values() if a.text]
    op.remove_with_vectors(group.values(), as_source=True)
    doomed = [s for s in op.owned(Tier.SUMMARY) if s.text and any(t in s.text for t in texts)]
    op.remove_with_vectors(doomed)
    op.note(f"exposure group of {len(group)} record(s); {len(doomed)} summary(ies) held one verbatim")
