"""The ``mem0`` memory system: the real ``mem0ai`` package, offline.

* embeddings: the bundled all-MiniLM-L6-v2 through mem0's ``huggingface`` embedder;
* vector store: qdrant in local-path mode under the work dir (``qdrant/``);
* history database: ``history.db`` in the work dir (tables ``history`` and ``messages``);
* LLM (``infer=True`` only): mem0's ``openai`` provider pointed at the audit's own
  OpenAI-compatible server (``--model llamacpp:NAME`` starts one on loopback);
* telemetry off (``MEM0_TELEMETRY=False`` before mem0 is imported; mem0's home dir, where
  it keeps a config file, is put inside the audit's work area unless ``MEM0_DIR`` is set).

Native deletions: ``delete`` (``Memory.delete(memory_id)`` on every memory of the user
whose text holds the secret), ``delete_all`` (``Memory.delete_all(user_id=...)``) and
``reset`` (``Memory.reset()``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from traceless.errors import ConfigError
from traceless.memory import Session
from traceless.models import ModelBackend, uncached
from traceless.systems._base import (
    ContextItem,
    DeletionTarget,
    MemorySystem,
    SystemConfig,
    SystemRuntime,
    memory_system,
)

__all__ = ["Mem0Config", "Mem0System"]

MEM0_VERSION = "2.2.1"
_DELETIONS = ("delete", "delete_all", "reset")
_COLLECTION = "traceless"
_PAGE = 1000


class Mem0Config(SystemConfig):
    """Settings of the mem0 adapter."""

    infer: bool = False
    """``False``: every message is stored verbatim (no LLM); ``True``: mem0's LLM extracts
    facts from each session (needs ``--model llamacpp:NAME`` or ``openai:MODEL@URL``)."""
    k: int = Field(3, ge=1)
    """Memories retrieved per query (``Memory.search(top_k=k)``)."""
    threshold: float = Field(0.1, ge=0.0, le=1.0)
    """mem0's search score threshold (its default)."""
    embedder_path: str | None = None
    """A sentence-transformers model folder (default: the bundled all-MiniLM-L6-v2)."""
    embedding_dims: int = Field(384, ge=1)
    """Dimension of that model's vectors."""
    llm_max_tokens: int = Field(512, ge=16)
    """Reply budget of each of mem0's LLM calls (``infer=True``). mem0's own default is 2,000:
    a small local model that loops on an extraction decodes all of it (tens of minutes on two
    cores) before mem0 rejects the unparsable JSON. A loop cut at this cap is rejected the same
    way, so what mem0 stores changes only for replies longer than the cap."""


def _import_mem0(home: Path) -> Any:
    # mem0 reads both at import time: telemetry must be off before the first import
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(home))
    import mem0.memory.main as main
    import mem0.memory.telemetry as telemetry

    telemetry.MEM0_TELEMETRY = False
    main.MEM0_TELEMETRY = False
    return main


def _openai_endpoint(model: ModelBackend) -> tuple[str, str]:
    inner = uncached(model)  # the audit engine wraps the runtime's cache in its own
    base, name = getattr(inner, "base_url", None), getattr(inner, "model", None)
    if not isinstance(base, str) or not isinstance(name, str):
        raise ConfigError(
            "mem0 with infer=true calls its LLM over the OpenAI API: run the audit with "
            "--model llamacpp:NAME (starts a local server) or --model openai:MODEL@URL"
        )
    return base, name


@memory_system("mem0", help="mem0ai (qdrant local, MiniLM, history db); deletions delete/delete_all/reset")
class Mem0System(MemorySystem):
    """mem0's ``Memory`` in ``work_dir``; one ``add`` per session, scoped by ``user_id``."""

    extra = "mem0"
    requires = ("mem0", "qdrant_client")
    config_class = Mem0Config

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime) -> None:
        super().__init__(work_dir, config, runtime)
        assert isinstance(config, Mem0Config)
        self.cfg = config
        main = _import_mem0(work_dir.parent / "mem0-home")
        from traceless.models._st_embedder import minilm_path

        llm: dict[str, Any] = {"model": "unused", "api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}
        if config.infer:
            base, name = _openai_endpoint(runtime.model)
            llm = {"model": name, "api_key": "local", "openai_base_url": base, "temperature": 0.0,
                   "max_tokens": config.llm_max_tokens}
        cfg = {
            "vector_store": {"provider": "qdrant", "config": {
                "path": str(work_dir / "qdrant"), "collection_name": _COLLECTION,
                "embedding_model_dims": config.embedding_dims, "on_disk": True}},
            "embedder": {"provider": "huggingface", "config": {
                "model": config.embedder_path or str(minilm_path()), "embedding_dims": config.embedding_dims}},
            "llm": {"provider": "openai", "config": llm},
            "history_db_path": str(work_dir / "history.db"),
        }
        self.memory = main.Memory.from_config(cfg)

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        return _DELETIONS

    @classmethod
    def context_tokens(cls, config: SystemConfig) -> int:
        # mem0's extraction system prompt alone is ~8.7k tokens (ADDITIVE_EXTRACTION_PROMPT)
        return 16384 if isinstance(config, Mem0Config) and config.infer else 0

    def write(self, sessions: Sequence[Session]) -> None:
        for s in sessions:
            msgs = [{"role": t.role, "content": t.content} for t in s.turns if t.role in ("user", "assistant")]
            self.memory.add(msgs, user_id=s.user_id, metadata={"session_id": s.session_id}, infer=self.cfg.infer)

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        res = self.memory.search(query, filters={"user_id": owner}, top_k=self.cfg.k, threshold=self.cfg.threshold)
        return [ContextItem(str(r["id"]), str(r["memory"])) for r in res["results"] if str(r["memory"]).strip()]

    def _user_memories(self, owner: str) -> list[dict[str, Any]]:
        res = self.memory.get_all(filters={"user_id": owner}, top_k=100_000)
        return list(res["results"])

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        if operation == "delete":
            ids = [m["id"] for m in self._user_memories(target.owner) if target.literal in str(m["memory"])]
            for i in ids:
                self.memory.delete(i)
            return {"deleted_ids": ids}
        if operation == "delete_all":
            self.memory.delete_all(user_id=target.owner)
            return {}
        if operation == "reset":
            self.memory.reset()
            return {}
        raise ConfigError(f"mem0: unknown deletion {operation!r}; known: {', '.join(_DELETIONS)}")

    # ------------------------------------------------------------------ scanning
    def _points(self) -> Iterable[str]:
        client = self.memory.vector_store.client
        for col in client.get_collections().collections:
            offset = None
            while True:
                points, offset = client.scroll(col.name, limit=_PAGE, offset=offset, with_payload=True,
                                               with_vectors=False)
                for p in points:
                    yield json.dumps(p.payload, ensure_ascii=False)
                if offset is None:
                    break

    def _table(self, table: str) -> Iterable[str]:
        con = sqlite3.connect(f"file:{self.work_dir / 'history.db'}?mode=ro", uri=True)
        try:
            rows = con.execute(f"SELECT * FROM {table}").fetchall()  # noqa: S608 - fixed names
        except sqlite3.OperationalError:
            rows = []
        finally:
            con.close()
        return ["\t".join("" if v is None else str(v) for v in r) for r in rows]

    def stores(self) -> dict[str, Iterable[str]]:
        return {"vector_store": list(self._points()), "history": self._table("history"),
                "messages": self._table("messages")}

    def files(self) -> list[Path]:
        home = Path(os.environ.get("MEM0_DIR", self.work_dir.parent / "mem0-home"))
        extra = sorted(p for p in home.rglob("*") if p.is_file()) if home.is_dir() else []
        return super().files() + extra

    def close(self) -> None:
        client = getattr(self.memory.vector_store, "client", None)
        self.memory.close()
        if client is not None:
            client.close()
