"""Tiered, provenance-tracked agent memory.

A ``MemoryStore`` (one SQLite file or a PostgreSQL database) holds artifacts in tiers (raw, summary, embedding,
cache) with lineage edges; a ``MemoryWriter`` turns sessions into raw records, S=1/S=2
summaries, paper 001's extractive consolidation and embeddings; renderers show memory
to a model. Deletion lives in ``traceless.forget``.
"""

from traceless.memory._backend import is_url, redact_url, store_exists
from traceless.memory._gate import WriteGate, load_key
from traceless.memory._io import parse_session_lines, read_sessions, write_sessions_jsonl
from traceless.memory._pipeline import (
    EXTRACTIVE,
    KIND_BY_LEVEL,
    MemoryWriter,
    WriteConfig,
    WriteReport,
    extractive_text,
    parse_facts,
)
from traceless.memory._render import memory_entries, render_ledger, render_lines
from traceless.memory._schema import SCHEMA_VERSION
from traceless.memory._store import MemoryStore
from traceless.memory._types import (
    QA,
    Artifact,
    Hit,
    LineageEdge,
    SearchHit,
    SearchResult,
    Session,
    Tier,
    Turn,
    digest_text,
)

__all__ = [
    "Artifact",
    "EXTRACTIVE",
    "Hit",
    "KIND_BY_LEVEL",
    "LineageEdge",
    "MemoryStore",
    "MemoryWriter",
    "QA",
    "SCHEMA_VERSION",
    "SearchHit",
    "SearchResult",
    "Session",
    "Tier",
    "Turn",
    "WriteConfig",
    "WriteGate",
    "WriteReport",
    "is_url",
    "redact_url",
    "store_exists",
    "digest_text",
    "extractive_text",
    "load_key",
    "memory_entries",
    "parse_facts",
    "parse_session_lines",
    "read_sessions",
    "render_ledger",
    "render_lines",
    "write_sessions_jsonl",
]
