"""The ``llamaindex`` memory system: LlamaIndex's ``Memory`` (SQL chat store) and a
``VectorStoreIndex`` over the conversations, on the real ``llama-index-core`` package, offline.

* short-term memory: ``Memory.from_defaults(session_id=USER, async_database_uri=
  "sqlite+aiosqlite:///chat.db")``, every user and assistant turn put as a ``ChatMessage``
  (table ``llama_index_memory``); its token counter is a whitespace split (LlamaIndex's default
  would be tiktoken's);
* long-term memory: a ``VectorStoreIndex`` with LlamaIndex's default local stores
  (``SimpleDocumentStore``, ``SimpleVectorStore``, ``SimpleIndexStore``) persisted under
  ``storage/``; one ``Document`` per session (``doc_id`` = ``USER/SESSION``, the user turns,
  metadata ``user_id``), split by ``SentenceSplitter(chunk_size)``, embedded with the audit's
  embedder (a ``BaseEmbedding`` around it: the bundled all-MiniLM-L6-v2 by default);
* what the agent reads: the top-k nodes of the user (the index's retriever, filtered on
  ``user_id``) and the user's chat history (``Memory.get()``, what an agent given the
  memory is sent);
* no LLM call (memory blocks that extract facts are not configured).

Native deletions: ``reset`` (``Memory.reset()`` of the user's chat session),
``delete_ref_doc`` (``index.delete_ref_doc(USER/SESSION)``, LlamaIndex's default
``delete_from_docstore=False``), ``delete_ref_doc+docstore`` (``delete_from_docstore=True``),
and ``reset+delete_ref_doc+docstore`` (all of them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from traceless.errors import ConfigError
from traceless.memory import Session
from traceless.models import Embedder
from traceless.systems._base import (
    ContextItem,
    DeletionTarget,
    MemorySystem,
    SystemConfig,
    SystemRuntime,
    memory_system,
)
from traceless.systems._sqlite_live import table_texts

__all__ = ["LlamaIndexConfig", "LlamaIndexSystem"]

LLAMA_INDEX_VERSION = "0.14.25"
_DELETIONS = ("reset", "delete_ref_doc", "delete_ref_doc+docstore", "reset+delete_ref_doc+docstore")
_STORES = {"docstore": "docstore.json", "vector_store": "default__vector_store.json",
           "index_store": "index_store.json"}


class LlamaIndexConfig(SystemConfig):
    """Settings of the LlamaIndex adapter."""

    k: int = Field(2, ge=1)
    """Nodes retrieved per query (``similarity_top_k``)."""
    chunk_size: int = Field(128, ge=16)
    """``SentenceSplitter`` chunk size (tokens) of a session's document."""
    token_limit: int = Field(30000, ge=64)
    """``Memory`` token limit of the chat history (LlamaIndex's default)."""


def _embedding(embedder: Embedder) -> Any:
    from llama_index.core.embeddings import BaseEmbedding

    class _Audit(BaseEmbedding):
        """The audit's embedder as a LlamaIndex embedding model."""

        def _get_query_embedding(self, query: str) -> list[float]:
            return [float(x) for x in embedder.embed([query])[0]]

        def _get_text_embedding(self, text: str) -> list[float]:
            return [float(x) for x in embedder.embed([text])[0]]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [[float(x) for x in v] for v in embedder.embed(list(texts))]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    return _Audit(model_name=embedder.name)


def _text(msg: Any) -> str:
    return str(msg.content or "")


@memory_system("llamaindex", help="LlamaIndex Memory (SQL chat store) + VectorStoreIndex (docstore, vector, index "
                                  "stores); deletions reset/delete_ref_doc")
class LlamaIndexSystem(MemorySystem):
    """The chat store ``chat.db`` and the index persisted in ``storage/`` of ``work_dir``."""

    extra = "llamaindex"
    requires = ("llama_index.core", "aiosqlite")
    config_class = LlamaIndexConfig

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime) -> None:
        super().__init__(work_dir, config, runtime)
        assert isinstance(config, LlamaIndexConfig)
        self.cfg = config
        from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage
        from llama_index.core.node_parser import SentenceSplitter

        self._embed = _embedding(runtime.embedder)
        self._persist = work_dir / "storage"
        self._splitter = SentenceSplitter(chunk_size=config.chunk_size, chunk_overlap=0,
                                          id_func=lambda i, doc: f"{doc.doc_id}#{i}")
        if (self._persist / "docstore.json").exists():
            sc = StorageContext.from_defaults(persist_dir=str(self._persist))
            self.index = load_index_from_storage(sc, embed_model=self._embed, transformations=[self._splitter])
        else:
            self.index = VectorStoreIndex([], storage_context=StorageContext.from_defaults(),
                                          embed_model=self._embed, transformations=[self._splitter])
        self._memories: dict[str, Any] = {}

    def _memory(self, owner: str) -> Any:
        if owner not in self._memories:
            from llama_index.core.memory import Memory

            self._memories[owner] = Memory.from_defaults(
                session_id=owner, token_limit=self.cfg.token_limit, tokenizer_fn=lambda s: s.split(),
                async_database_uri=f"sqlite+aiosqlite:///{self.work_dir / 'chat.db'}")
        return self._memories[owner]

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        return _DELETIONS

    def write(self, sessions: Sequence[Session]) -> None:
        from llama_index.core import Document
        from llama_index.core.llms import ChatMessage

        for s in sessions:
            turns = [t for t in s.turns if t.role in ("user", "assistant")]
            self._memory(s.user_id).put_messages([ChatMessage(role=t.role, content=t.content) for t in turns])
            text = "\n".join(t.content for t in turns if t.role == "user")
            self.index.insert(Document(text=text, doc_id=f"{s.user_id}/{s.session_id}",
                                       metadata={"user_id": s.user_id, "session_id": s.session_id}))
        self._save()

    def _save(self) -> None:
        self.index.storage_context.persist(persist_dir=str(self._persist))

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters

        filters = MetadataFilters(filters=[ExactMatchFilter(key="user_id", value=owner)])
        hits = self.index.as_retriever(similarity_top_k=self.cfg.k, filters=filters).retrieve(query)
        out = [ContextItem(f"node:{h.node.node_id}", h.node.get_content()) for h in hits]
        out += [ContextItem(f"chat:{owner}#{i}", _text(m)) for i, m in enumerate(self._memory(owner).get())]
        return [c for c in out if c.text.strip()]

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        if operation not in _DELETIONS:
            raise ConfigError(f"llamaindex: unknown deletion {operation!r}; known: {', '.join(_DELETIONS)}")
        notes: dict[str, Any] = {}
        if operation.startswith("reset"):
            self._memory(target.owner).reset()
            notes["reset"] = target.owner
        if "delete_ref_doc" in operation:
            ref = f"{target.owner}/{target.session_id}"
            self.index.delete_ref_doc(ref, delete_from_docstore=operation.endswith("+docstore"))
            self._save()
            notes["deleted_ref_doc"] = ref
        return notes

    # ------------------------------------------------------------------ scanning
    def _json_store(self, name: str) -> list[str]:
        path = self._persist / name
        if not path.exists():
            return []
        doc = json.loads(path.read_text(encoding="utf-8"))
        return [json.dumps([coll, key, value], ensure_ascii=False)
                for coll, entries in doc.items() if isinstance(entries, dict)
                for key, value in entries.items()]

    def _chat_rows(self) -> list[str]:
        db = self.work_dir / "chat.db"
        return table_texts(db, "llama_index_memory") if db.exists() else []

    def stores(self) -> dict[str, Iterable[str]]:
        return {"chat_store": self._chat_rows(), **{s: self._json_store(f) for s, f in _STORES.items()}}

    def close(self) -> None:
        import asyncio

        for m in self._memories.values():
            engine = getattr(m.sql_store, "_async_engine", None)
            if engine is not None:
                asyncio.run(engine.dispose())
        self._memories.clear()
