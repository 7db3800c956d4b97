"""Tiered, provenance-tracked agent memory.

A ``MemoryStore`` (one SQLite file or a PostgreSQL database) holds artifacts in tiers (raw, summary, embedding,
cache) with lineage edges; a ``MemoryWriter`` turns sessions into raw records, S=1/S=2
summaries, paper 001's extractive consolidation and embeddings; renderers show memory
to a model. Deletion lives in ``traceless.forget``.

Every name below is imported from its submodule on first use (``traceless._lazy``): reading
a store does not import the writer's models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceless._lazy import lazy_exports

if TYPE_CHECKING:
    from traceless.memory._backend import is_url, redact_url, store_exists
    from traceless.memory._gate import WriteGate, enumerable_bits, load_key
    from traceless.memory._io import parse_session_lines, read_sessions, write_sessions_jsonl
    from traceless.memory._pipeline import (
        MemoryWriter,
        WriteConfig,
        WriteReport,
        extractive_text,
        parse_facts,
    )
    from traceless.memory._render import memory_entries, render_ledger, render_lines
    from traceless.memory._schema import SCHEMA_VERSION
    from traceless.memory._store import ERASURE_FINISHERS, MemoryStore, NewArtifact
    from traceless.memory._types import (
        EXTRACTIVE,
        KIND_BY_LEVEL,
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
    from traceless.memory._variants import compact, compact_spans

__all__ = [
    "enumerable_bits",
    "compact",
    "compact_spans",
    "Artifact",
    "ERASURE_FINISHERS",
    "EXTRACTIVE",
    "Hit",
    "KIND_BY_LEVEL",
    "LineageEdge",
    "MemoryStore",
    "MemoryWriter",
    "NewArtifact",
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

EXPORTS: dict[str, tuple[str, ...]] = {
    "._backend": ("is_url", "redact_url", "store_exists"),
    "._gate": ("WriteGate", "enumerable_bits", "load_key"),
    "._io": ("parse_session_lines", "read_sessions", "write_sessions_jsonl"),
    "._pipeline": ("MemoryWriter", "WriteConfig", "WriteReport", "extractive_text", "parse_facts"),
    "._render": ("memory_entries", "render_ledger", "render_lines"),
    "._schema": ("SCHEMA_VERSION",),
    "._store": ("ERASURE_FINISHERS", "MemoryStore", "NewArtifact"),
    "._types": ("EXTRACTIVE", "KIND_BY_LEVEL", "QA", "Artifact", "Hit", "LineageEdge", "SearchHit", "SearchResult",
                "Session", "Tier", "Turn", "digest_text"),
    "._variants": ("compact", "compact_spans"),
}
"""Which submodule defines each public name (a test checks it covers ``__all__`` exactly)."""

__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
