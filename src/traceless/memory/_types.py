"""Data types of the memory layer: sessions in, artifacts and lineage stored.

Every model is ``defer_build``: pydantic builds its validator at its first use, so a command
that imports this module only for ``Tier`` (``forget modes``) or reads artifacts (``memory
show``) does not pay for the models it never validates (issue #13.4)."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, field_validator

__all__ = ["EXTRACTIVE", "KIND_BY_LEVEL", "Tier", "Turn", "QA", "Session", "Artifact", "LineageEdge", "Hit", "digest_text", "SearchHit",
           "SearchResult"]


class Tier(StrEnum):
    """Where an artifact lives. Paper 000 attributes leakage to ``raw`` vs ``summary``."""

    RAW = "raw"
    SUMMARY = "summary"
    EMBEDDING = "embedding"
    CACHE = "cache"


KIND_BY_LEVEL: dict[int, str] = {0: "turn", 1: "key_facts", 2: "session_summary"}
"""Artifact kind of each summary level (0: the raw records themselves)."""
EXTRACTIVE = "extractive"
"""Kind of paper 001's cross-session extractive consolidation (a summary-tier artifact)."""


_DIGEST_CHUNK = 1 << 18  # characters encoded at a time


def digest_text(text: str | None, vector: bytes | None = None) -> str:
    """sha256 of the payload (text UTF-8, then vector bytes)."""
    h = hashlib.sha256()
    if text is not None:
        for c in range(0, len(text), _DIGEST_CHUNK):  # a big text is not copied whole
            h.update(text[c: c + _DIGEST_CHUNK].encode("utf-8"))
    if vector is not None:
        h.update(b"\x00vec\x00")
        h.update(vector)
    return h.hexdigest()


class Turn(BaseModel):
    """One turn of a conversation."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    role: Literal["user", "assistant", "system", "tool"]
    """Speaker."""
    content: str
    """What was said."""
    has_answer: StrictBool = False
    """LongMemEval evidence flag: this turn holds evidence for a question."""


class QA(BaseModel):
    """A question whose answer needs remembered context (for Personalization Recall)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    question: str
    """The question asked in a later session."""
    answer: str
    """The expected answer."""
    question_id: str | None = None
    """Upstream id, when there is one."""
    question_type: str | None = None
    """Upstream category, when there is one."""


class Session(BaseModel):
    """One conversation session of one user; the unit the write pipeline consumes."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    user_id: str = Field(min_length=1)
    """Owner of everything derived from this session (the tenant)."""
    session_id: str = Field(min_length=1)
    """Session identifier, unique per user."""
    date: str | None = None
    """Session date as given by the corpus (free text)."""
    turns: list[Turn] = Field(min_length=1)
    """Turns in order."""
    qa: list[QA] = Field(default_factory=list)
    """Optional question–answer pairs about this user."""
    neighbors: dict[str, list[int]] = Field(default_factory=dict)
    """Optional declared neighbour groups: turn index (as str) → indices of neighbour turns
    (paper 001 exposure-group deletion)."""

    @field_validator("user_id", "session_id")
    @classmethod
    def _plain_id(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        if v != v.strip() or any(ord(c) < 32 for c in v):
            raise ValueError("must not have surrounding whitespace or control characters")
        return v

    @field_validator("neighbors")
    @classmethod
    def _neighbors_in_range(cls, v: dict[str, list[int]], info: ValidationInfo) -> dict[str, list[int]]:
        turns = info.data.get("turns")
        if turns is None:
            return v  # turns invalid: that error is reported instead
        n = len(turns)
        for key, group in v.items():
            if not key.isdigit() or int(key) >= n:
                raise ValueError(f"key {key!r} is not a turn index (0..{n - 1})")
            bad = [i for i in group if not 0 <= i < n]
            if bad:
                raise ValueError(f"[{key!r}] names turn(s) {bad} outside 0..{n - 1}")
        return v


class Artifact(BaseModel):
    """A persisted object in one tier."""

    model_config = ConfigDict(defer_build=True)

    id: str
    """Stable id, lexicographically ordered by creation (``r-00000001``)."""
    owner: str
    """User/tenant that owns it. Retrieval never crosses owners."""
    tier: Tier
    """Storage tier."""
    kind: str
    """What it is inside the tier: turn, key_facts, session_summary, extractive, vector …"""
    session_id: str | None = None
    """Session it came from (None for cross-session artifacts)."""
    seq: int = 0
    """Order inside its session (turn index, fact slot)."""
    text: str | None = None
    """Text payload; for embeddings, the source text the vector was computed from."""
    vector: bytes | None = None
    """float32 vector bytes (embedding tier)."""
    digest: str
    """sha256 of the payload."""
    created_at: float
    """Unix time of creation."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Free-form metadata (role, level S, embedder name …). Never holds forgotten text."""


class LineageEdge(BaseModel):
    """Derived artifact ``child`` was made from ``parent`` by ``op`` with ``params``."""

    model_config = ConfigDict(defer_build=True)

    child: str
    """Derived artifact id."""
    parent: str
    """Source artifact id."""
    op: str
    """Operation, e.g. ``summarize``, ``embed``, ``extract``."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Operation parameters, e.g. ``{"S": 1, "model": "..."}``."""


class Hit(BaseModel):
    """One retrieval result."""

    model_config = ConfigDict(defer_build=True)

    artifact: Artifact
    """The text artifact retrieved (not the vector)."""
    score: float
    """Cosine similarity to the query."""


class SearchHit(BaseModel):
    """One search result as printed by ``memory search --json``."""

    model_config = ConfigDict(defer_build=True)

    score: float
    """Cosine similarity to the query."""
    id: str
    """Artifact id."""
    tier: Tier
    """Tier of the artifact."""
    kind: str
    """Kind inside the tier."""
    session_id: str | None
    """Session it came from."""
    text: str | None
    """The artifact's current text."""


class SearchResult(BaseModel):
    """The JSON document of ``traceless memory search --json``."""

    model_config = ConfigDict(defer_build=True)

    owner: str
    """Owner searched (retrieval never crosses owners)."""
    k: int
    """How many hits were asked for."""
    embedder: str
    """Embedder that embedded the query."""
    hits: list[SearchHit]
    """Best first."""
