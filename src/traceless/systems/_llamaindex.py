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

A live instance (``chat_db`` and/or ``persist_dir`` in the config) is scanned read-only and
erased (``_llamaindex_live``): ``Memory.reset()`` of the user's session (and, with
``index_native_deletion``, ``delete_ref_doc`` with the docstore of each of the user's documents),
then the rows, nodes, vector entries and index-store refs left, and every record quoting a
literal; ``VACUUM`` of ``chat.db`` and each JSON store rewritten with those entries spliced out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from traceless.errors import ConfigError
from traceless.memory import Session
from traceless.models import Embedder
from traceless.systems import (
    Capability,
    ContextItem,
    DeletionTarget,
    ErasurePlan,
    MemorySystem,
    StoreOutcome,
    SystemConfig,
    SystemRuntime,
    kernel,
    memory_system,
)
from traceless.systems import _llamaindex_live as li_live

__all__ = ["LlamaIndexConfig", "LlamaIndexSystem"]

LLAMA_INDEX_VERSION = "0.14.25"
_DELETIONS = ("reset", "delete_ref_doc", "delete_ref_doc+docstore", "reset+delete_ref_doc+docstore")


class LlamaIndexConfig(SystemConfig):
    """Settings of the LlamaIndex adapter."""

    k: int = Field(2, ge=1)
    """Nodes retrieved per query (``similarity_top_k``)."""
    chunk_size: int = Field(128, ge=16)
    """``SentenceSplitter`` chunk size (tokens) of a session's document."""
    token_limit: int = Field(30000, ge=64)
    """``Memory`` token limit of the chat history (LlamaIndex's default)."""
    chat_db: str | None = None
    """A live instance's chat store SQLite file (``scan``/``forget --memory llamaindex``)."""
    persist_dir: str | None = None
    """A live instance's ``StorageContext`` persist dir (``docstore.json`` …); the audit uses its work dir."""
    index_native_deletion: bool = False
    """An erasure runs LlamaIndex's own ``delete_ref_doc`` of the user's documents before the kernel.
    Off by default: LlamaIndex loads and persists the whole index for it, in Python (26 s of a
    10^4-memory erasure's 51 s, profiled: every float through ``dataclasses_json``), and the
    kernel removes the same entries (the user's ref docs, nodes, vectors and index nodes) by
    splicing the JSON files. ``Memory.reset()`` of the user's chat runs either way."""


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

    capabilities = frozenset({Capability.LIVE, Capability.REWRITE})

    extra = "llamaindex"
    requires = ("llama_index.core", "aiosqlite")
    config_class = LlamaIndexConfig

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime | None, *,
                 chat_db: Path | None = None, persist: Path | None = None, read_only: bool = False) -> None:
        super().__init__(work_dir, config, runtime)  # type: ignore[arg-type]
        assert isinstance(config, LlamaIndexConfig)
        self.cfg = config
        self.read_only = read_only
        self._chat_db = chat_db or work_dir / "chat.db"
        self._persist = persist or work_dir / "storage"
        self._index: Any = None
        self._memories: dict[str, Any] = {}
        self._resumed: dict[str, dict[str, int]] = {}

    @property
    def index(self) -> Any:
        """The ``VectorStoreIndex`` (loaded from the persist dir on first use)."""
        if self.read_only:
            raise ConfigError("llamaindex: this instance was attached read-only; attach it with read_only=False")
        if self._index is None:
            from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage
            from llama_index.core.embeddings import MockEmbedding
            from llama_index.core.node_parser import SentenceSplitter

            # without the runtime (erasing a live instance) nothing is embedded: deletions only
            embed = _embedding(self.runtime.embedder) if self.runtime is not None else MockEmbedding(embed_dim=1)
            splitter = SentenceSplitter(chunk_size=self.cfg.chunk_size, chunk_overlap=0,
                                        id_func=lambda i, doc: f"{doc.doc_id}#{i}")
            if (self._persist / "docstore.json").exists():
                sc = StorageContext.from_defaults(persist_dir=str(self._persist))
                self._index = load_index_from_storage(sc, embed_model=embed, transformations=[splitter])
            else:
                self._index = VectorStoreIndex([], storage_context=StorageContext.from_defaults(),
                                               embed_model=embed, transformations=[splitter])
        return self._index

    def _memory(self, owner: str) -> Any:
        if self.read_only:
            raise ConfigError("llamaindex: this instance was attached read-only; attach it with read_only=False")
        if owner not in self._memories:
            from llama_index.core.memory import Memory

            self._memories[owner] = Memory.from_defaults(
                session_id=owner, token_limit=self.cfg.token_limit, tokenizer_fn=lambda s: s.split(),
                async_database_uri=f"sqlite+aiosqlite:///{self._chat_db}")
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
        self.check_deletion(operation)
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
    def stores(self) -> dict[str, Iterable[str]]:
        """Every store the kernel reads (the scan's and the receipt's names), as its records' texts."""
        out: dict[str, list[str]] = {s: [] for s in self.instance().stores()}
        for r in self.instance().records():
            out.setdefault(r.store, []).append(r.text())
        return dict(out)

    def close(self) -> None:
        self._close_chat()
        li_live.clear_kept()  # what this attach read is read again by the next one

    def _close_chat(self) -> None:
        """The chat memories' connections closed (the indexes read are kept)."""
        import asyncio

        for m in self._memories.values():
            engine = getattr(m.sql_store, "_async_engine", None)
            if engine is not None:
                asyncio.run(engine.dispose())
        self._memories.clear()

    # ------------------------------------------------- live instances: scan and erase
    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *, read_only: bool) -> MemorySystem:
        """The live instance named by ``chat_db`` and/or ``persist_dir`` (refused, before anything
        is opened, when neither is given or one does not exist)."""
        if not isinstance(config, LlamaIndexConfig):
            raise ConfigError(f"llamaindex: attach takes a LlamaIndexConfig, not {type(config).__name__}")
        if not config.chat_db and not config.persist_dir:
            raise ConfigError("llamaindex: give the live instance's chat store file (`chat_db`) and/or its "
                              "index persist dir (`persist_dir`) in the memory config")
        chat = Path(config.chat_db) if config.chat_db else None
        persist = Path(config.persist_dir) if config.persist_dir else None
        if chat is not None and not chat.is_file():
            raise ConfigError(f"llamaindex: {chat} does not exist; give the path of the Memory's SQLite file")
        if persist is not None and not (persist / "docstore.json").is_file():
            raise ConfigError(f"llamaindex: {persist} does not exist or holds no docstore.json; give the "
                              "StorageContext persist dir")
        base = chat.parent if chat is not None else persist
        assert base is not None
        # only the paths named are read: without `persist_dir`, a path that holds nothing
        return cls(base, config, runtime, chat_db=chat, persist=persist or base / "\0none", read_only=read_only)

    def _chat(self) -> Path | None:
        return self._chat_db if self._chat_db.is_file() else None

    def instance_files(self) -> list[Path]:
        chat = sorted(p for p in self._chat_db.parent.glob(self._chat_db.name + "*") if p.is_file())
        return chat + (sorted(p for p in self._persist.rglob("*") if p.is_file()) if self._persist.is_dir() else [])

    def instance(self) -> li_live.LlamaIndexInstance:
        return li_live.LlamaIndexInstance(self._chat(), self._persist)

    def bystander_digests(self, user: str | None) -> dict[str, kernel.StoreDigest]:
        """Digested per container: the chat table's rows and each JSON collection's entries hashed
        as one stream each (``LlamaIndexInstance.bystander_digests``)."""
        literals, removed = self._planned
        return self.instance().bystander_digests(user, literals, removed, self._resumed)

    def resume_bystanders(self, before: Mapping[str, kernel.StoreDigest]) -> None:
        """A re-run: each JSON collection's entries the interrupted run digested are compared
        apart from those the application appended since (``stream_counts``)."""
        self._resumed = {store: li_live.stream_counts(d) for store, d in before.items()}

    def native_erasure(self, plan: ErasurePlan) -> None:
        """LlamaIndex's own deletion of the user's chat (``Memory.reset()``), and with
        ``index_native_deletion`` its ``delete_ref_doc`` of each of the user's documents (then
        the kernel removes what they leave)."""
        if plan.user is None:
            return
        if self.cfg.index_native_deletion:
            self.own_deletion(plan.user)
        elif self._chat() is not None:
            self._memory(plan.user).reset()

    def own_deletion(self, user: str) -> None:
        """LlamaIndex's own deletions of a user: ``Memory.reset()``, ``delete_ref_doc`` with the
        docstore of each of the user's documents (the index loaded and persisted whole)."""
        if self._chat() is not None:
            self._memory(user).reset()
        recs = li_live.owner_records(li_live.indexes(self._persist))
        refs = li_live.owned_refs(recs, user)
        if refs and (self._persist / "docstore.json").is_file():
            indexed = li_live.indexed_refs(recs)
            for ref in sorted(refs):  # a ref doc an earlier delete_ref_doc left in the docstore only
                if ref in indexed:
                    self.index.delete_ref_doc(ref, delete_from_docstore=True)
                else:
                    self.index.docstore.delete_ref_doc(ref, raise_error=False)
            self._save()

    def execute_erasure(self, plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        """The native deletions, then (connections closed) the kernel: what they leave, VACUUM,
        the JSON rewrite."""
        if self.read_only:
            raise ConfigError("llamaindex: this instance was attached read-only; attach it with read_only=False")
        try:
            self.native_erasure(plan)
        except (KeyError, ValueError) as e:  # its files changed between the docstore's and the index's read
            raise ConfigError(f"llamaindex: the index in {self._persist} changed while it was erased ({type(e).__name__}: "
                              f"{e}): a running application is writing it. Stop the application, then run the same "
                              "command again: an interrupted erasure is completed by the re-run") from None
        # the chat's answers are kept by SQLite's change counter (``Memory.reset`` changes it); the
        # JSON stores' by size, mtime and inode: LlamaIndex's own persist writes them in place,
        # so what its deletion changed is read again; else the plan's indexes stand
        self._close_chat()
        if self.cfg.index_native_deletion or self._index is not None:
            li_live.clear_kept()
        self._index = None
        out = kernel.execute(self.instance(), plan, literals)
        rewritten = sum(o.rewritten for o in out if o.store == "docstore")
        for o in (o for o in out if o.store == "vector_store" and rewritten):
            o.notes.append(f"{rewritten} docstore record(s) rewritten without the literal keep the embedding "
                           "of their original text (not re-embedded: no embedder is attached)")
        return out
