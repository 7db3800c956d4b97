"""Artifact-level provenance graph (paper 002 §From Theorems to System).

Nodes are observations and artifacts; an edge ``src → dst`` says ``dst`` was derived from
``src``. The taint closure of a target is the set of nodes reachable from the observations
that contain it; τ is the first step whose observation contains the target. Without
token-level attribution the conservative taint model also marks every model-derived
artifact produced at or after τ (its context contained the target).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from traceless.runtime._types import Observation, RArtifact

__all__ = ["ProvenanceGraph", "contains_target"]


def contains_target(text: str, span: str) -> bool:
    """Exact containment of the target span (case-sensitive, as the target was observed)."""
    return bool(span) and span in text


class ProvenanceGraph:
    """Edges between artifact ids; observations are nodes ``obs:<id>``."""

    def __init__(self) -> None:
        self._children: dict[str, set[str]] = {}
        self._parents: dict[str, set[str]] = {}
        self._step: dict[str, int] = {}
        self._kind: dict[str, str] = {}

    # ---- building

    def add(self, art: RArtifact) -> None:
        self._step[art.art_id] = art.step
        self._kind[art.art_id] = art.kind
        self._children.setdefault(art.art_id, set())
        self._parents.setdefault(art.art_id, set())
        for s in art.sources:
            self._children.setdefault(s, set()).add(art.art_id)
            self._parents[art.art_id].add(s)

    def remove(self, art_id: str) -> None:
        for p in self._parents.pop(art_id, set()):
            self._children.get(p, set()).discard(art_id)
        for c in self._children.pop(art_id, set()):
            self._parents.get(c, set()).discard(art_id)
        self._step.pop(art_id, None)
        self._kind.pop(art_id, None)

    def __contains__(self, art_id: object) -> bool:
        return art_id in self._step

    def __len__(self) -> int:
        return len(self._step)

    def nodes(self) -> list[str]:
        return list(self._step)

    def sources(self, art_id: str) -> set[str]:
        return set(self._parents.get(art_id, set()))

    def step_of(self, art_id: str) -> int:
        return self._step[art_id]

    # ---- queries

    def descendants(self, roots: Iterable[str]) -> set[str]:
        """Every node reachable from ``roots`` (roots excluded)."""
        start = list(roots)
        return _reach(start, self._children) - set(start)

    def ancestors(self, node: str) -> set[str]:
        return _reach([node], self._parents)

    def taint_closure(self, roots: Iterable[str]) -> set[str]:
        """Roots plus their descendant closure (recorded edges only)."""
        r = set(roots)
        return r | self.descendants(r)


def _reach(start: Iterable[str], edges: dict[str, set[str]]) -> set[str]:
    """Every node reached from ``start`` along ``edges`` (breadth first; a start node only when
    an edge leads back to it)."""
    seen: set[str] = set()
    todo = deque(start)
    while todo:
        for m in edges.get(todo.popleft(), ()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def injection_step(observations: list[Observation], span: str) -> int | None:
    """τ: the 1-based step of the first observation containing ``span`` (None if none does)."""
    for i, o in enumerate(observations, start=1):
        if contains_target(o.text, span):
            return i
    return None


def decode_bound(observations: list[Observation], tau: int, *, summaries: bool = True) -> int:
    """The model generations an exact forget must run from τ on: one reply per transition of the
    T−τ+1 bound, plus one summary per session that ends at or after τ (when the scaffold writes
    summaries). Derived from the episode alone, so it does not trust any operator's count."""
    n = len(observations)
    ends = sum(1 for t in range(tau, n + 1) if t == n or observations[t].session != observations[t - 1].session)
    return (n - tau + 1) + (ends if summaries else 0)


__all__ += ["injection_step", "decode_bound"]
