"""The ``langgraph`` memory system: a small LangGraph agent on the real packages.

* long-term memory: a ``SqliteStore`` (``store.db``) searched by vector similarity with the
  audit's embedder (the store's sqlite-vec index where Python's sqlite3 can load
  extensions, else the same cosine ranking over the user's items); the ``remember`` node
  puts every user turn under ``(user_id, "memories")``;
* the thread: a ``SqliteSaver`` checkpointer (``checkpoints.db``), one thread per session
  (``thread_id = "USER/SESSION"``), holding the messages and a running summary;
* a ``summarize`` node asks the audit's model for a one-sentence summary of the thread
  (traceless's S=2 prompt) and keeps it in the thread state.

What the agent reads for a query: the top-k store memories of the user (the store's own
vector search) plus the summary of each of the user's threads (read through the graph's
``get_state``, as a returning-user agent would).

Native deletions: ``store.delete`` (every memory item of the user whose value holds the
secret), ``delete_thread`` (``checkpointer.delete_thread`` of the thread that carried it),
and ``store.delete+delete_thread`` (both).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

from pydantic import Field

from traceless import prompts
from traceless.errors import ConfigError
from traceless.memory import Session
from traceless.models import ChatMessage, GenerationConfig
from traceless.systems._base import (
    ContextItem,
    DeletionTarget,
    MemorySystem,
    SystemConfig,
    SystemRuntime,
    memory_system,
)

__all__ = ["LangGraphConfig", "LangGraphSystem"]

_DELETIONS = ("store.delete", "delete_thread", "store.delete+delete_thread")
_NS = "memories"


class LangGraphConfig(SystemConfig):
    """Settings of the LangGraph agent."""

    k: int = Field(3, ge=1)
    """Store memories retrieved per query (``store.search(limit=k)``)."""
    summarize: bool = True
    """Run the summarization node after each session (one model call per session)."""
    summary_max_tokens: int = Field(96, ge=8)
    """Token budget of one thread summary."""


def _add(left: list[dict[str, str]], right: list[dict[str, str]]) -> list[dict[str, str]]:
    return [*left, *right]


class _State(TypedDict, total=False):
    messages: Annotated[list[dict[str, str]], _add]
    summary: str
    user_id: str
    session_id: str


def _thread(owner: str, session_id: str) -> str:
    return f"{owner}/{session_id}"


@memory_system("langgraph", help="LangGraph agent: SqliteStore memories + SqliteSaver thread + summary node")
class LangGraphSystem(MemorySystem):
    """The agent graph ``remember → summarize`` compiled with a store and a checkpointer."""

    extra = "langgraph"
    requires = ("langgraph", "langgraph.checkpoint.sqlite", "langgraph.store.sqlite", "sqlite_vec")
    config_class = LangGraphConfig

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime) -> None:
        super().__init__(work_dir, config, runtime)
        assert isinstance(config, LangGraphConfig)
        self.cfg = config
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph
        from langgraph.runtime import Runtime
        from langgraph.store.sqlite import SqliteStore

        emb = runtime.embedder
        self._store_conn = sqlite3.connect(str(work_dir / "store.db"), check_same_thread=False,
                                           isolation_level=None)
        # the store's vector index loads the sqlite-vec extension; a Python whose sqlite3 cannot
        # load extensions gets the same ranking (cosine over the audit's embedder) done here
        self._indexed = hasattr(self._store_conn, "enable_load_extension")
        index: Any = {"dims": emb.dim, "embed": lambda texts: emb.embed(list(texts)).tolist(), "fields": ["text"]}
        self.store = SqliteStore(self._store_conn, index=index if self._indexed else None)
        self.store.setup()
        self._ckpt_conn = sqlite3.connect(str(work_dir / "checkpoints.db"), check_same_thread=False)
        self.saver = SqliteSaver(self._ckpt_conn)
        self.saver.setup()

        def remember(state: _State, runtime: Runtime[None]) -> dict[str, Any]:
            assert runtime.store is not None
            owner, session = state["user_id"], state["session_id"]
            for i, m in enumerate(state["messages"]):
                if m["role"] == "user":  # put is idempotent: a key per turn of the thread
                    runtime.store.put((owner, _NS), f"{session}-{i:03d}", {"text": m["content"], "session_id": session})
            return {}

        def summarize(state: _State) -> dict[str, Any]:
            text = "\n".join(f"- {m['content']}" for m in state["messages"] if m["role"] == "user")
            msgs = [ChatMessage(role="user", content=prompts.SUMMARY_ONE_SENTENCE.format(text=text))]
            gen = self.runtime.model.generate(
                msgs, GenerationConfig(max_new_tokens=self.cfg.summary_max_tokens, temperature=0.0))
            return {"summary": gen.text.strip()}

        g = StateGraph(_State)
        g.add_node("remember", remember)
        g.add_edge(START, "remember")
        if config.summarize:
            g.add_node("summarize", summarize)
            g.add_edge("remember", "summarize")
            g.add_edge("summarize", END)
        else:
            g.add_edge("remember", END)
        self.graph = g.compile(checkpointer=self.saver, store=self.store)

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        return _DELETIONS

    def write(self, sessions: Sequence[Session]) -> None:
        for s in sessions:
            msgs = [{"role": t.role, "content": t.content} for t in s.turns if t.role in ("user", "assistant")]
            cfg: Any = {"configurable": {"thread_id": _thread(s.user_id, s.session_id)}}
            self.graph.invoke({"messages": msgs, "user_id": s.user_id, "session_id": s.session_id}, cfg)

    def _threads(self, owner: str) -> list[str]:
        rows = self._ckpt_conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id").fetchall()
        return [r[0] for r in rows if r[0].startswith(f"{owner}/")]

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        if self._indexed:
            hits = self.store.search((owner, _NS), query=query, limit=self.cfg.k)
        else:
            items = self.store.search((owner, _NS), limit=100_000)
            vecs = self.runtime.embedder.embed([query, *(str(i.value.get("text", "")) for i in items)])
            scores = vecs[1:] @ vecs[0]
            order = sorted(range(len(items)), key=lambda j: (-float(scores[j]), items[j].key))
            hits = [items[j] for j in order[: self.cfg.k]]
        out = [ContextItem(f"store:{h.key}", str(h.value.get("text", ""))) for h in hits]
        for tid in self._threads(owner):
            cfg: Any = {"configurable": {"thread_id": tid}}
            summary = self.graph.get_state(cfg).values.get("summary", "")
            if summary.strip():
                out.append(ContextItem(f"thread:{tid}", summary))
        return [c for c in out if c.text.strip()]

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        if operation not in _DELETIONS:
            raise ConfigError(f"langgraph: unknown deletion {operation!r}; known: {', '.join(_DELETIONS)}")
        notes: dict[str, Any] = {}
        if operation.startswith("store.delete"):
            items = self.store.search((target.owner, _NS), limit=100_000)
            keys = [i.key for i in items if target.literal in json.dumps(i.value, ensure_ascii=False)]
            for key in keys:
                self.store.delete((target.owner, _NS), key)
            notes["deleted_keys"] = keys
        if operation.endswith("delete_thread"):
            tid = _thread(target.owner, target.session_id)
            self.saver.delete_thread(tid)
            notes["deleted_thread"] = tid
        return notes

    # ------------------------------------------------------------------ scanning
    def _store_items(self) -> list[str]:
        rows = self._store_conn.execute("SELECT prefix, key, value FROM store").fetchall()
        return ["\t".join(str(v) for v in r) for r in rows]

    def _decoded(self, sql: str) -> list[str]:
        out = []
        for typ, blob, *rest in self._ckpt_conn.execute(sql).fetchall():
            value = self.saver.serde.loads_typed((typ, blob)) if blob is not None else None
            out.append(json.dumps([value, *rest], ensure_ascii=False, default=str))
        return out

    def stores(self) -> dict[str, Iterable[str]]:
        return {
            "store_items": self._store_items(),
            "checkpoints": self._decoded("SELECT type, checkpoint, metadata FROM checkpoints"),
            "writes": self._decoded("SELECT type, value, channel FROM writes"),
        }

    def close(self) -> None:
        self._store_conn.close()
        self._ckpt_conn.close()
