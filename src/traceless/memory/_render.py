"""How memory is shown to the model: full ordered rendering (paper 001 injects the whole
memory), a JSON fact-ledger rendering, and a retrieved subset. Ids, lineage and digests
are evaluator-side and never rendered."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from traceless.memory._store import MemoryStore
from traceless.memory._types import Artifact, Tier

__all__ = ["memory_entries", "render_lines", "render_ledger"]

_TIER_ORDER = {Tier.RAW: 0, Tier.SUMMARY: 1, Tier.CACHE: 2, Tier.EMBEDDING: 3}


def memory_entries(
    store: MemoryStore, owner: str, *, tiers: Iterable[Tier | str] = (Tier.RAW, Tier.SUMMARY),
    kinds: Iterable[str] | None = None,
) -> list[Artifact]:
    """Every text artifact of ``owner`` in ``tiers`` (raw first, then summaries), ordered by id."""
    tier_set = {Tier(t) for t in tiers}
    kind_set = None if kinds is None else set(kinds)
    arts = [
        a for a in store.artifacts(owner=owner)
        if a.tier in tier_set and a.tier != Tier.EMBEDDING and (kind_set is None or a.kind in kind_set)
        and a.text is not None and a.text.strip()
    ]
    return sorted(arts, key=lambda a: (_TIER_ORDER[a.tier], a.id))


def render_lines(entries: Sequence[Artifact]) -> str:
    """One entry per line, in order (the model-facing flat memory)."""
    return "\n".join(f"- {a.text}" for a in entries)


def render_ledger(entries: Sequence[Artifact]) -> str:
    """A JSON fact ledger: a list of {"source": tier/kind, "date": ..., "text": ...}."""
    rows = [
        {"source": f"{a.tier.value}/{a.kind}", "date": a.meta.get("date"), "text": a.text}
        for a in entries
    ]
    return json.dumps(rows, ensure_ascii=False, indent=1)
