"""The ``traceless`` memory system: traceless's own store, with every forget mode as a
native deletion operation (one SQLite file, tiers raw/summary/embedding/cache)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from traceless.errors import ConfigError
from traceless.forget import FORGET_MODES, ForgetTarget, forget
from traceless.memory import KIND_BY_LEVEL, MemoryStore, MemoryWriter, Session, Tier, WriteConfig
from traceless.models import GenerationConfig
from traceless.systems import (
    ContextItem,
    DeletionTarget,
    MemorySystem,
    SystemConfig,
    SystemRuntime,
    memory_system,
    view_config,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["NativeConfig", "NativeSystem"]

DB_NAME = "memory.db"


class NativeConfig(SystemConfig):
    """Settings of the native store."""

    S: int = Field(1, ge=0, le=2)
    """Summarization level: 0 raw turns, 1 key facts, 2 one-sentence summaries (paper 000 §2.1)."""
    k: int = Field(3, ge=1)
    """Retrieval breadth (chunks injected)."""
    modes: tuple[str, ...] = ()
    """Forget modes audited as deletion operations (empty: every registered mode)."""
    levels: tuple[int, ...] | None = None
    """Summary levels written (None: ``(S,)`` at S ≥ 1, none at S=0). The frontier study writes
    S=1 key facts and S=2 summaries into one memory and reads either through its S view."""
    summary_tokens: int = Field(96, ge=8)
    """Token budget of one S=1/S=2 summary."""
    max_facts: int = Field(6, ge=1)
    """At most this many key-fact chunks per session (S=1)."""
    supersede_cosine: float | None = Field(None, ge=-1.0, le=1.01)
    """``raw_plus_resummarize``: cosine at which a regenerated summary chunk replaces an old one
    (None: the mode's ``SUPERSEDE_COSINE``). The residue study varies it."""
    context_order: Literal["score", "store"] = "score"
    """How the k retrieved entries are shown: ``score`` (by similarity) or ``store``
    (chronological memory order: probes retrieving the same set share one prompt prefix)."""

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if v is not None and any(x not in (1, 2) for x in v):
            raise ValueError(f"levels must be a subset of (1, 2), got {v}")
        return v

    def write_config(self) -> WriteConfig:
        """Raw user turns plus the summary levels, embedded (the native store's writer)."""
        levels = self.levels if self.levels is not None else ((self.S,) if self.S > 0 else ())
        return WriteConfig(raw_unit="user_turn", levels=levels, embed=True,
                           summary_max_tokens=self.summary_tokens, max_facts=self.max_facts,
                           supersede_cosine=self.supersede_cosine)


@memory_system("traceless", help="traceless's own tiered store; deletions = the forget modes")
class NativeSystem(MemorySystem):
    """The native store; views ``raw``/``summary`` give FRS per tier (paper 000 §2.4)."""

    config_class = NativeConfig
    views = ("agent", "raw", "summary")

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime, *,
                 store: MemoryStore | None = None) -> None:
        super().__init__(work_dir, config, runtime)
        assert isinstance(config, NativeConfig)
        self.cfg = config
        # ``store``: an open store of the caller (``forget --certify``), left open on close
        self._owns_store = store is None
        self.store = store if store is not None else MemoryStore(work_dir / DB_NAME)
        wcfg = config.write_config()
        self.writer = MemoryWriter(self.store, summarizer=runtime.model if wcfg.levels else None,
                                   embedder=runtime.embedder, config=wcfg)
        # context only: decoding settings belong to the engine
        self._gen = GenerationConfig()

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        assert isinstance(config, NativeConfig)
        for m in config.modes:
            FORGET_MODES.get(m)
        return config.modes or tuple(FORGET_MODES.names())

    @classmethod
    def probe_views_of(cls, config: SystemConfig) -> tuple[str, ...]:
        assert isinstance(config, NativeConfig)
        return ("agent", "raw") + (("summary",) if config.S > 0 else ())

    def write(self, sessions: Sequence[Session]) -> None:
        self.writer.write_sessions(list(sessions))

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        return self.search(owner, self.runtime.embedder.embed([query])[0], view)

    def search(self, owner: str, query_vec: np.ndarray[Any, Any], view: str = "agent", *,
               S: int | None = None, k: int | None = None) -> list[ContextItem]:
        """``context`` for an embedded query, at summarization level ``S`` and breadth ``k``
        (default: the config's). The frontier study reads one memory at every (S, k) of its
        grid and embeds all probes at once."""
        cfg = view_config(view, self.cfg.S if S is None else S, self.cfg.k if k is None else k, self._gen)
        if cfg is None:
            return []
        hits = self.store.search(owner, query_vec, cfg.k, tiers=cfg.tiers, kinds=cfg.kinds)
        arts = [h.artifact for h in hits if h.artifact.text and h.artifact.text.strip()]
        if self.cfg.context_order == "store":
            arts.sort(key=lambda a: a.id)
        return [ContextItem(a.id, a.text or "", a.tier.value) for a in arts]

    def memory_counts(self, owner: str) -> dict[str, int]:
        """Artifacts of ``owner`` per tier (raw, summary)."""
        return {t: len(self.store.artifacts(owner=owner, tier=t)) for t in ("raw", "summary")}

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        if operation not in self.deletions(self.cfg):
            raise ConfigError(f"traceless: unknown deletion {operation!r}; known: {', '.join(self.deletions(self.cfg))}")
        receipt = forget(self.store, ForgetTarget.literal(target.literal, target.owner), operation, writer=self.writer)
        return {"receipt": receipt.model_dump(mode="json")}

    def stores(self) -> dict[str, Iterable[str]]:
        out: dict[str, Iterable[str]] = {}
        for tier in (Tier.RAW, Tier.SUMMARY, Tier.EMBEDDING, Tier.CACHE):
            out[tier.value] = [a.text or "" for a in self.store.artifacts(tier=tier)]
        out["receipts"] = [body for _, body in self.store.receipts()]
        return out

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    @staticmethod
    def summary_level(store: MemoryStore) -> int:
        """The summarization level S a store was written at (0 when it holds no LLM summary)."""
        kinds = {a.kind for a in store.artifacts(tier=Tier.SUMMARY)}
        return next((s for s, kind in KIND_BY_LEVEL.items() if s > 0 and kind in kinds), 0)
