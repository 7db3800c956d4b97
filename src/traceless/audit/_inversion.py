"""Can the canary be read back from the vectors a deletion left? (issue 38.2)

A vector holds no byte of its text, so the byte scan cannot see it; embedding inversion
reads text back from vectors (Ghost Vectors 2026; ZSInvert, arXiv 2504.00147). This is the
candidate attack: the attacker knows the canary grammar and the sentence it was told in,
draws ``decoys`` canaries of the grammar (≥ 10^4; seeded), and ranks the pool (the planted
canaries + the decoys) by cosine similarity under the system's own embedder against every
vector read from the instance's files. A canary counts as recovered at ``k`` when some file
vector that carries the sentence (its best cosine ≥ ``relevance``, fixed in advance) ranks
it among its top ``k``; a vector under ``relevance`` makes no claim. Rates are of the
planted canaries, with exact (Clopper–Pearson) intervals.

It is an upper bound on nothing and a lower bound on an attacker: a model-based inversion
(ZSInvert) can only do better; the audit's served model is not used here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from traceless.datasets import canary_sentence, make_canary
from traceless.metrics import CI, proportion_ci
from traceless.models import Embedder

__all__ = ["InversionReport", "candidate_inversion"]

RELEVANCE = 0.25
"""The best cosine a vector must reach to claim anything (MiniLM: the canary sentence against
memories that hold it, 0.31–0.77; against unrelated memories, ≤ 0.19, measured on 20 + 20)."""


class InversionReport(BaseModel):
    """The candidate attack on one instance's file vectors."""

    model_config = ConfigDict(extra="forbid")

    vectors: int
    """Vectors read from the files."""
    claiming: int
    """Of them, those whose best cosine reached ``relevance`` (they carry the sentence)."""
    candidates: int
    """Canaries ranked per vector: the planted ones + the decoys."""
    planted: int
    """Canaries whose recovery is tried (the n of the rates)."""
    k: int
    """The second rank reported (top-``k``)."""
    top1: CI
    """Share of the planted canaries ranked first by some claiming vector."""
    topk: CI
    """Share ranked within the top ``k`` by some claiming vector."""
    relevance: float
    """The cosine a vector must reach to claim."""
    embedder: str
    """The embedder the candidates were embedded with (the system's own)."""


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    out: np.ndarray = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), np.float32(1e-12))
    return out


def _decoys(planted: Sequence[str], n: int, seed: int) -> list[str]:
    rng, seen = np.random.default_rng(seed), set(planted)
    out: list[str] = []
    while len(out) < n:
        c = make_canary(rng)
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def candidate_inversion(vectors: np.ndarray, planted: Sequence[str], embedder: Embedder, *, decoys: int = 10_000,
                        seed: int = 38, k: int = 10, relevance: float = RELEVANCE,
                        sentence: Callable[[str], str] = canary_sentence) -> InversionReport:
    """Rank ``planted`` + ``decoys`` canaries (each told as ``sentence``) against every vector
    of ``vectors`` (rows, as read from the files); see the module for the rule."""
    pool = [*planted, *_decoys(planted, decoys, seed)]
    hits1: set[int] = set()
    hitsk: set[int] = set()
    claiming = 0
    if len(vectors) and len(planted):
        cand = _unit(embedder.embed([sentence(c) for c in pool]))
        vecs = _unit(vectors)
        if vecs.shape[1] != cand.shape[1]:
            raise ValueError(f"the file vectors have {vecs.shape[1]} dimensions, the embedder {cand.shape[1]}: give "
                             "the embedder the system wrote them with")
        for start in range(0, len(vecs), 256):
            sims = vecs[start:start + 256] @ cand.T
            for row in sims:
                if row.max() < relevance:
                    continue
                claiming += 1
                top = np.argpartition(-row, k)[:k] if len(row) > k else np.arange(len(row))
                top = top[np.argsort(-row[top])]
                hits1 |= {int(top[0])} & set(range(len(planted)))
                hitsk |= {int(i) for i in top if i < len(planted)}
    n = len(planted)
    return InversionReport(vectors=len(vectors), claiming=claiming, candidates=len(pool), planted=n, k=k,
                           top1=proportion_ci(len(hits1), n), topk=proportion_ci(len(hitsk), n),
                           relevance=relevance, embedder=str(embedder.describe().get("name", type(embedder).__name__)))
