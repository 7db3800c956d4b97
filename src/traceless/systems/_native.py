"""The ``traceless`` memory system: traceless's own store, with every forget mode as a
native deletion operation (one SQLite file, tiers raw/summary/embedding/cache).

Live (``traceless scan --memory traceless`` / ``forget --memory traceless``, config
``{"db": "memory.db"}``, a SQLite file or a ``postgresql://`` URL): the store's tiers read as
the kernel's records and erased through the store's own deletions (``_native_live``). The
``traceless forget`` verb with its eight modes is unchanged."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from traceless.errors import ConfigError
from traceless.forget import FORGET_MODES, ForgetTarget, forget
from traceless.memory import KIND_BY_LEVEL, MemoryStore, MemoryWriter, Session, Tier, WriteConfig, is_url
from traceless.models import GenerationConfig
from traceless.systems import (
    Capability,
    ContextItem,
    DeletionTarget,
    MemorySystem,
    SystemConfig,
    SystemRuntime,
    memory_system,
    view_config,
)
from traceless.systems._native_live import RECEIPTS, TIERS, StoreInstance

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

    db: str | None = None
    """The user's live store for ``scan``/``forget --memory traceless``: its SQLite file or a
    ``postgresql://`` URL (an encrypted store is opened with its keys in traceless's home).
    Unused by an audit, which writes its own store in the work dir."""

    @model_serializer(mode="wrap")
    def _drop_unset_db(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An audit's config (and its resume key) is what it was before ``db`` existed."""
        d: dict[str, Any] = handler(self)
        return {k: v for k, v in d.items() if k != "db" or v is not None}

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
    capabilities = frozenset({Capability.LIVE, Capability.ONLINE, Capability.REWRITE})
    _read_only = False

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
        self.check_deletion(operation)
        receipt = forget(self.store, ForgetTarget.literal(target.literal, target.owner), operation, writer=self.writer)
        return {"receipt": receipt.model_dump(mode="json")}

    def stores(self) -> dict[str, Iterable[str]]:
        out: dict[str, Iterable[str]] = {t: [a.text or "" for a in self.store.artifacts(tier=t)] for t in TIERS}
        out[RECEIPTS] = [body for _, body in self.store.receipts()]
        return out

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    # ------------------------------------------------- live instances: scan and erase
    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *,
               read_only: bool) -> NativeSystem:
        """The user's store named by ``db``, opened read-only (``access="read"``: nothing
        migrated, checkpointed or finished) for a scan, for writing for an erasure."""
        if not isinstance(config, NativeConfig) or not config.db:
            raise ConfigError('memory system \'traceless\' needs the store to attach to: give {"db": "memory.db"} '
                              "(its SQLite file or a postgresql:// URL) in --memory-config")
        if not is_url(config.db) and not Path(config.db).expanduser().is_file():
            raise ConfigError(f"traceless: db {config.db} does not exist; give the path of the store's SQLite file "
                              "(nothing was opened or created)")
        db = config.db if is_url(config.db) else str(Path(config.db).expanduser())
        store = MemoryStore(db, access="read" if read_only else "write")
        self = cls.__new__(cls)
        MemorySystem.__init__(self, Path(db).parent if not is_url(db) else Path("."), config, runtime)  # type: ignore[arg-type]
        self.cfg, self.store, self._owns_store, self._read_only = config, store, True, read_only
        return self

    @classmethod
    def attach_config(cls, work_dir: Path, config: SystemConfig) -> SystemConfig | None:
        """The store an audit wrote in ``work_dir``, as a user's config names it."""
        assert isinstance(config, NativeConfig)
        return config.model_copy(update={"db": str(work_dir / DB_NAME)})

    def instance(self) -> StoreInstance:
        return StoreInstance(self.store)

    def read_only_instance(self) -> bool:
        return self._read_only

    def instance_files(self) -> list[Path]:
        return self.store.files()

    def out_of_scope(self) -> list[str]:
        out = [*super().out_of_scope(), "the write gate's descriptors of the erased values (keyed HMACs, no text)"]
        if not self.store.scannable:
            out.append("the PostgreSQL server's WAL, replicas and backups (an encrypted store's rows are sealed there)")
        return out

    @staticmethod
    def summary_level(store: MemoryStore) -> int:
        """The summarization level S a store was written at (0 when it holds no LLM summary)."""
        kinds = {a.kind for a in store.artifacts(tier=Tier.SUMMARY)}
        return next((s for s, kind in KIND_BY_LEVEL.items() if s > 0 and kind in kinds), 0)
