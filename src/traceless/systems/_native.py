"""The ``traceless`` memory system: traceless's own store, with every forget mode as a
native deletion operation (one SQLite file, tiers raw/summary/embedding/cache)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from traceless.agent import Agent
from traceless.errors import ConfigError
from traceless.forget import FORGET_MODES, ForgetTarget, forget
from traceless.memory import KIND_BY_LEVEL, MemoryStore, MemoryWriter, Session, Tier, WriteConfig
from traceless.models import GenerationConfig
from traceless.systems._base import (
    ContextItem,
    DeletionTarget,
    MemorySystem,
    SystemConfig,
    SystemRuntime,
    memory_system,
)

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
        levels = (config.S,) if config.S > 0 else ()
        self.writer = MemoryWriter(self.store, summarizer=runtime.model if levels else None,
                                   embedder=runtime.embedder, config=WriteConfig(levels=levels))
        # context only: decoding settings belong to the engine
        self._gen = GenerationConfig()

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        assert isinstance(config, NativeConfig)
        for m in config.modes:
            FORGET_MODES.get(m)
        return config.modes or tuple(FORGET_MODES.names())

    def probe_views(self) -> tuple[str, ...]:
        return ("agent", "raw") + (("summary",) if self.cfg.S > 0 else ())

    def write(self, sessions: Sequence[Session]) -> None:
        self.writer.write_sessions(list(sessions))

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        # the audit package imports the studies (torch); only a context build needs it
        from traceless.audit._engine import view_config

        cfg = view_config(view, self.cfg.S, self.cfg.k, self._gen)
        if cfg is None:
            return []
        agent = Agent(self.runtime.model, self.store, owner=owner, embedder=self.runtime.embedder, config=cfg)
        return [ContextItem(a.id, a.text or "") for a in agent.context(query)]

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
