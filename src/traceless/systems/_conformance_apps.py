"""The applications the conformance suite runs on a PostgreSQL server (issue #35): each writes
the suite's conversations through the package's own API into one database, as a production
app does, and gives the config its user hands traceless for that deployment:

* ``mem0-pgvector``: mem0's ``Memory`` with ``vector_store: pgvector`` (a connection string),
  ``infer=False``, its history db a local file beside it;
* ``langgraph-pg``: a ``StateGraph`` on ``PostgresSaver`` + ``PostgresStore`` (the app's own
  ``setup()`` makes the tables); each user turn kept in the store under ``(user, "memories")``
  and the thread's state naming the user;
* ``agno-pg``: Agno's ``PostgresDb`` + ``MemoryManager`` (sessions, runs, user memories).

The suite's server check runs at the claim level that removes the bytes (``pg_compaction:
full``, opt-in), so its file-level checks read the relation files after a ``CHECKPOINT``.
"""

from __future__ import annotations

import contextlib
import operator
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from traceless.memory import Session

__all__ = ["SERVER_APPS", "ServerApp"]


@dataclass(frozen=True)
class ServerApp:
    """One application on a server: ``system`` is the registered memory system it is scanned as."""

    name: str
    system: str

    def config(self, url: str, local: Path) -> dict[str, Any]:
        """The user's config for the instance in database ``url`` (local files under ``local``)."""
        if self.name == "mem0-pgvector":
            return _mem0_config(url, local)
        if self.name == "langgraph-pg":
            pg = {"kind": "postgres", "url": url}
            return {"checkpointer": pg, "store": pg, "traceless": {"pg_compaction": "full"}}
        return {"db_url": _sqlalchemy(url), "pg_compaction": "full"}

    @contextlib.contextmanager
    def open(self, url: str, local: Path) -> Iterator[Any]:
        """The app connected to ``url``: a callable that writes sessions through the package's API."""
        opener = {"mem0-pgvector": _mem0_app, "langgraph-pg": _langgraph_app, "agno-pg": _agno_app}[self.name]
        with opener(url, local) as write:
            yield write


SERVER_APPS = {a.name: a for a in (ServerApp("mem0-pgvector", "mem0"), ServerApp("langgraph-pg", "langgraph"),
                                   ServerApp("agno-pg", "agno"))}
"""The server deployments the suite knows, by name."""


def _sqlalchemy(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1]


def _user_turns(s: Session) -> list[dict[str, str]]:
    return [{"role": t.role, "content": t.content} for t in s.turns if t.role in ("user", "assistant")]


# ---------------------------------------------------------------- mem0 on pgvector


def _mem0_config(url: str, local: Path) -> dict[str, Any]:
    from traceless.models import minilm_path

    return {"vector_store": {"provider": "pgvector", "config": {
        "connection_string": url, "collection_name": "memories", "embedding_model_dims": 384}},
        "history_db_path": str(local / "history.db"),
        "embedder": {"provider": "huggingface", "config": {"model": str(minilm_path()), "embedding_dims": 384}},
        "llm": {"provider": "openai", "config": {"model": "unused", "api_key": "unused",
                                                 "openai_base_url": "http://127.0.0.1:9/v1"}},
        "version": "v1.1", "traceless": {"infer": False, "pg_compaction": "full"}}


@contextlib.contextmanager
def _mem0_app(url: str, local: Path) -> Iterator[Any]:
    from traceless.systems._mem0 import _import_mem0

    cfg = {k: v for k, v in _mem0_config(url, local).items() if k != "traceless"}
    mem = _import_mem0(local.parent / "mem0-home").Memory.from_config(cfg)

    def write(sessions: Sequence[Session]) -> None:
        for s in sessions:
            mem.add(_user_turns(s), user_id=s.user_id, metadata={"session_id": s.session_id}, infer=False)
    try:
        yield write
    finally:
        mem.close()
        mem.vector_store.connection_pool.close()


# ---------------------------------------------------------------- LangGraph on PostgresSaver + PostgresStore


class _State(TypedDict, total=False):
    messages: Annotated[list[dict[str, str]], operator.add]
    user_id: str


def _graph(saver: Any, store: Any) -> Any:
    """The app's graph: the user's turn kept in the store under (user, "memories"), a reply appended."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    def remember(state: _State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        turn = state["messages"][-1]["content"]
        key = f"{len(state['messages']):03d}-{zlib.crc32(turn.encode()):08x}"
        runtime.store.put((state["user_id"], "memories"), key, {"text": turn})
        return {"messages": [{"role": "assistant", "content": "Noted, I will remember that."}]}

    g = StateGraph(_State)
    g.add_node("remember", remember)
    g.add_edge(START, "remember")
    g.add_edge("remember", END)
    return g.compile(checkpointer=saver, store=store)


@contextlib.contextmanager
def _langgraph_app(url: str, local: Path) -> Iterator[Any]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    with PostgresSaver.from_conn_string(url) as saver, PostgresStore.from_conn_string(url) as store:
        saver.setup()  # the app's own setup (idempotent): traceless never calls it
        store.setup()
        graph = _graph(saver, store)

        def write(sessions: Sequence[Session]) -> None:
            for s in sessions:
                cfg: Any = {"configurable": {"thread_id": f"{s.user_id}/{s.session_id}"}}
                for t in s.turns:
                    if t.role == "user":
                        graph.invoke({"messages": [{"role": "user", "content": t.content}], "user_id": s.user_id}, cfg)
        yield write


# ---------------------------------------------------------------- Agno on PostgresDb


@contextlib.contextmanager
def _agno_app(url: str, local: Path) -> Iterator[Any]:
    from agno.db.postgres import PostgresDb
    from agno.db.schemas import UserMemory
    from agno.memory import MemoryManager
    from agno.models.message import Message
    from agno.run.agent import RunOutput
    from agno.session import AgentSession

    db = PostgresDb(db_url=_sqlalchemy(url))
    mm = MemoryManager(db=db)

    def write(sessions: Sequence[Session]) -> None:
        for s in sessions:
            sid = f"{s.user_id}/{s.session_id}"
            db.upsert_session(AgentSession(session_id=sid, agent_id="app", user_id=s.user_id, created_at=int(time.time())))
            for i, t in enumerate(s.turns):
                if t.role != "user":
                    continue
                msgs = [Message(role="user", content=t.content), Message(role="assistant", content="Noted.")]
                db.upsert_run(RunOutput(run_id=f"{sid}/{i:03d}", agent_id="app", session_id=sid, user_id=s.user_id,
                                        content="Noted.", messages=msgs), session_id=sid, user_id=s.user_id,
                              run_index=i)
                mm.add_user_memory(UserMemory(memory=t.content, memory_id=f"{sid}/{i:03d}", input=t.content),
                                   user_id=s.user_id)
    try:
        yield write
    finally:
        db.close()
        with contextlib.suppress(Exception):
            db.db_engine.dispose()
