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
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from pydantic import (
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
    model_validator,
)

from traceless import prompts
from traceless.errors import ConfigError, UnsupportedError
from traceless.memory import Session
from traceless.models import ChatMessage, Generation, GenerationConfig
from traceless.systems import (
    AgentAnswer,
    Capability,
    ContextItem,
    DeletionTarget,
    ErasurePlan,
    LiveInstance,
    MemorySystem,
    ScanReport,
    StoreOutcome,
    SystemConfig,
    SystemRuntime,
    memory_system,
)
from traceless.systems._langgraph_live import LiveLangGraph, NamespaceMap, refuse_shared
from traceless.systems._langgraph_pg import PgLangGraph
from traceless.systems.kernel import StoreDigest

__all__ = ["CheckpointerConfig", "LangGraphConfig", "LangGraphSystem", "StoreConfig", "StoreIndexConfig", "UserMapping"]

_DELETIONS = ("store.delete", "delete_thread", "store.delete+delete_thread")
_NS = "memories"


class _Shaped(SystemConfig):
    """A nested section: an unknown key is named with the keys the section takes."""

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(cls.model_fields))
            if unknown:
                raise ValueError(f"unknown key {unknown[0]!r}; this section takes: {', '.join(cls.model_fields)}")
        return data


class StoreIndexConfig(_Shaped):
    """The store's vector index (LangGraph's ``index={"dims", "embed", "fields"}``)."""

    dims: int = Field(ge=1)
    """Embedding dimensions."""
    embed: str = "traceless"
    """``traceless`` (the audit's embedder) or ``module:callable`` (texts → vectors)."""
    fields: list[str] = Field(default_factory=lambda: ["$"])
    """Value fields to embed (JSON paths, LangGraph's default ``$``: the whole value)."""
    distance_type: str | None = None
    """``PostgresStore``'s ``distance_type`` (as the app gives it; scan/forget do not need it)."""
    ann_index_config: dict[str, Any] | None = None
    """``PostgresStore``'s ``ann_index_config`` (as the app gives it; scan/forget do not need it)."""


class CheckpointerConfig(_Shaped):
    """Where the threads live: ``{"kind": "sqlite", "path": "checkpoints.db"}``,
    ``{"kind": "postgres", "url": "postgresql://…"}`` or ``{"kind": "memory"}``."""

    kind: Literal["sqlite", "postgres", "memory"] = "sqlite"
    """The saver: ``SqliteSaver``, ``PostgresSaver`` or ``InMemorySaver``."""
    path: str | None = None
    """The SQLite file (``sqlite``; the audit puts its own in the work dir)."""
    url: str | None = Field(None, repr=False)
    """The PostgreSQL connection string exactly as the app passes it to
    ``PostgresSaver.from_conn_string(...)`` / ``PostgresStore.from_conn_string(...)`` (a
    ``postgresql://`` URL or ``key=value`` string; ``sslmode`` and the TLS options pass through).
    Read once here; written nowhere (a dump shows it without its password)."""
    _dsn: dict[str, Any] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _read_url(self) -> CheckpointerConfig:
        if self.kind == "postgres":
            if not self.url:
                raise ValueError("kind \"postgres\" needs url: the connection string your app passes to "
                                 "from_conn_string(...)")
            from traceless.systems.postgres import parse_dsn

            self._dsn = parse_dsn(self.url, "url")
        return self

    @field_serializer("url")
    def _no_password(self, url: str | None) -> str | None:
        if url is None or self._dsn is None:
            return url
        from traceless.systems.postgres import shown_dsn

        return shown_dsn(self._dsn)

    def dsn(self) -> dict[str, Any]:
        """The connection string's libpq keywords (``postgres`` only; never printed)."""
        assert self._dsn is not None, "kind postgres: validated with a url"
        return dict(self._dsn)


class StoreConfig(CheckpointerConfig):
    """Where long-term memories live (``SqliteStore``, ``PostgresStore``, ``InMemoryStore``)."""

    index: StoreIndexConfig | None = None
    """The store's vector index (none: the store is searched without one)."""


class ServerOptions(_Shaped):
    """traceless's own keys for a server-backed instance (the config's ``traceless:`` section)."""

    pg_compaction: Literal["vacuum", "full"] = "vacuum"
    """PostgreSQL: the physical step after the rows are deleted; ``vacuum`` (default: ``VACUUM
    (INDEX_CLEANUP ON)``, online, the app's queries do not wait; the erased tuples' bytes may stay
    in the pages' free space, counted in the receipt) or ``full`` (opt-in: ``VACUUM FULL`` rewrites
    the tables and indexes, the bytes gone; an ``ACCESS EXCLUSIVE`` lock: the app's queries on
    them wait while it runs)."""
    pg_replicas: list[str] | None = Field(None, repr=False)
    """PostgreSQL: connection strings of the server's physical streaming replicas (one without a
    database names the primary's); each must be a standby before anything changes, and after the
    erasure it is waited for until it replayed past it, checkpointed, and its relation files and
    ``pg_wal`` read (the receipt says per replica verified or not; replicas not named: out of
    scope). Read once here; written nowhere (a dump shows each without its password)."""

    @model_validator(mode="after")
    def _read_replicas(self) -> ServerOptions:
        from traceless.systems.postgres import parse_dsn

        for i, dsn in enumerate(self.pg_replicas or ()):
            parse_dsn(dsn, f"traceless.pg_replicas[{i}]")  # refused here, in one line that never repeats it
        return self

    @field_serializer("pg_replicas")
    def _no_passwords(self, dsns: list[str] | None) -> list[str] | None:
        from traceless.systems.postgres import shown_dsns

        return shown_dsns(dsns, "traceless.pg_replicas")


class UserMapping(_Shaped):
    """How a user maps to the graph: store namespace, thread ids, ``configurable`` keys."""

    namespace: list[str] = Field(default_factory=lambda: ["{user_id}", "memories"])
    """The user's store namespace, one template per label (e.g. ``["memories", "{user_id}"]``);
    items in it and below it are the user's."""
    thread_id: str = "{user_id}/{session_id}"
    """A session's thread id; the threads whose id matches it (any session) are the user's."""
    configurable: dict[str, str] = Field(default_factory=dict)
    """Extra ``config["configurable"]`` keys the graph reads, e.g. ``{"langgraph_user_id": "{user_id}"}``
    (LangMem's tools); a checkpoint whose metadata carries one with the user's value is the user's."""
    state_key: str | None = "user_id"
    """A key of the graph's state that names the thread's user (apps that keep ``user_id`` in the
    state and name threads freely): a thread whose checkpoints' state holds the user there is the
    user's, whatever its id; one whose state names another user is not. None: not read."""

    @model_validator(mode="after")
    def _templates(self) -> UserMapping:
        if not any("{user_id}" in label for label in self.namespace):
            raise ValueError("namespace must hold {user_id} in one label, e.g. [\"memories\", \"{user_id}\"]")
        if "{user_id}" not in self.thread_id:
            raise ValueError("thread_id must hold {user_id}, e.g. \"{user_id}/{session_id}\"")
        for t in (*self.namespace, self.thread_id, *self.configurable.values()):
            bad = set(re.findall(r"\{([^}]*)\}", t)) - {"user_id", "session_id"}
            if bad:
                raise ValueError(f"unknown placeholder {{{sorted(bad)[0]}}} in {t!r}; known: {{user_id}}, {{session_id}}")
        return self

    def mapping(self) -> NamespaceMap:
        return NamespaceMap(tuple(self.namespace), self.thread_id, dict(self.configurable), self.state_key)


class LangGraphConfig(SystemConfig):
    """Settings of the LangGraph agent: traceless's two-node graph by default, or the user's
    own (``graph``) with the user's checkpointer, store and user mapping."""

    k: int = Field(3, ge=1)
    """Store memories retrieved per query (``store.search(limit=k)``)."""
    summarize: bool = True
    """Run the summarization node after each session (one model call per session)."""
    summary_max_tokens: int = Field(96, ge=8)
    """Token budget of one thread summary."""
    graph: str | None = None
    """The user's graph: ``module:factory``, called as ``factory(checkpointer=…, store=…)`` (and
    ``model=…``, a LangChain chat model on the audit's model, if it takes one), returning a
    compiled graph. None: traceless's ``remember → summarize`` graph."""
    checkpointer: CheckpointerConfig | None = None
    """The checkpointer (None: SQLite in the audit's work dir). ``scan``/``forget`` read its path."""
    store: StoreConfig | None = None
    """The store (None: SQLite in the audit's work dir). ``scan``/``forget`` read its path."""
    users: UserMapping = Field(default_factory=UserMapping)
    """How users map to namespaces, threads and ``configurable`` keys."""
    traceless: ServerOptions | None = None
    """traceless's options for an instance on a server (``{"pg_compaction": "full"}``)."""

    @model_serializer(mode="wrap")
    def _drop_unset_traceless(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """No ``traceless`` section given: left out, so an audit's identity is what it was before it existed."""
        d: dict[str, Any] = handler(self)
        return {k: v for k, v in d.items() if k != "traceless" or v is not None}


def _add(left: list[dict[str, str]], right: list[dict[str, str]]) -> list[dict[str, str]]:
    return [*left, *right]


class _State(TypedDict, total=False):
    messages: Annotated[list[dict[str, str]], _add]
    summary: str
    user_id: str
    session_id: str


def _thread(owner: str, session_id: str) -> str:
    return f"{owner}/{session_id}"


def _item_text(value: dict[str, Any]) -> str:
    """The text of a store item: ``text`` (traceless's graph), ``content`` (LangMem), else the value."""
    for k in ("text", "content"):
        if isinstance(value.get(k), str):
            return str(value[k])
    return json.dumps(value, ensure_ascii=False, default=str)


def _audit_factory(config: LangGraphConfig) -> Callable[..., Any] | None:
    """The user's graph factory (None: traceless's); the audit builds SQLite files in its work
    dir (the configured paths are replaced: the audit never touches the user's instance)."""
    for what, c in (("store", config.store), ("checkpointer", config.checkpointer)):
        if c is not None and c.kind != "sqlite":
            raise UnsupportedError(f"langgraph: the audit builds its instance as SQLite files in its work dir; "
                                   f"{what}.kind {c.kind!r} is not supported there yet (give \"sqlite\")")
    return _graph_factory(config)


def _graph_factory(config: LangGraphConfig) -> Callable[..., Any] | None:
    """The user's graph factory (``graph``), imported; None: none named."""
    if config.graph is None:
        return None
    from traceless.systems._langgraph_byo import load_factory

    return load_factory(config.graph)


def _user_index(config: LangGraphConfig, emb: Any) -> dict[str, Any] | None:
    idx = config.store.index if config.store is not None else None
    if idx is None:
        return None
    if idx.embed != "traceless":
        from traceless.systems._langgraph_byo import load_factory

        return {"dims": idx.dims, "embed": load_factory(idx.embed), "fields": idx.fields}
    if idx.dims != emb.dim:
        raise ConfigError(f"langgraph: store.index.dims is {idx.dims} but the audit's embedder gives {emb.dim}; "
                          f"give dims {emb.dim} (or your own embed as 'module:callable')")
    return {"dims": idx.dims, "embed": lambda texts: emb.embed(list(texts)).tolist(), "fields": idx.fields}


def _input_keys(graph: Any) -> tuple[set[str], set[str]]:
    """The keys of a compiled graph's input schema, and those it requires."""
    schema = graph.get_input_jsonschema()
    return set(schema.get("properties") or {}), set(schema.get("required") or [])


@memory_system("langgraph", help="LangGraph agent: SqliteStore memories + SqliteSaver thread + summary node")
class LangGraphSystem(MemorySystem):
    """The agent graph ``remember → summarize`` compiled with a store and a checkpointer."""

    capabilities = frozenset({Capability.AGENT, Capability.LIVE, Capability.ONLINE, Capability.CERTIFY})

    extra = "langgraph"
    requires = ("langgraph", "langgraph.checkpoint.sqlite", "langgraph.store.sqlite", "sqlite_vec")
    config_class = LangGraphConfig
    _live: LiveLangGraph | None = None
    """The attached live instance (``attach``); None for an audit's instance."""
    _pg: PgLangGraph | None = None
    """The attached instance on a PostgreSQL server (``PostgresSaver`` / ``PostgresStore``)."""
    _factory: Callable[..., Any] | None = None
    """The user's graph factory (``graph``); None: traceless's graph."""
    _probe_graph: Any = None
    """The user's graph compiled for probing (in-memory threads), built on the first probe."""
    _probes: int = 0
    """Probes answered (each in a thread of its own)."""
    _literals: tuple[str, ...] = ()
    """The literals of the last plan (records holding one are targets, not bystanders)."""
    _store_only: bool = False
    """The agent's context is the store's search alone (a live instance's probe, no graph)."""
    _probe_close: Callable[[], None] | None = None
    """Closes a server probe's read-only connection (``probe_instance`` on PostgreSQL)."""

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime) -> None:
        super().__init__(work_dir, config, runtime)
        assert isinstance(config, LangGraphConfig)
        self.cfg = config
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph
        from langgraph.runtime import Runtime
        from langgraph.store.sqlite import SqliteStore

        factory = _audit_factory(config)  # a bad graph or kind is refused before any file is opened
        self._users = config.users.mapping()
        emb = runtime.embedder
        self._store_conn = sqlite3.connect(str(work_dir / "store.db"), check_same_thread=False,
                                           isolation_level=None)
        # the store's vector index loads the sqlite-vec extension; a Python whose sqlite3 cannot
        # load extensions gets the same ranking (cosine over the audit's embedder) done here
        self._indexed = hasattr(self._store_conn, "enable_load_extension")
        index: Any = {"dims": emb.dim, "embed": lambda texts: emb.embed(list(texts)).tolist(), "fields": ["text"]}
        if factory is not None:
            index = _user_index(config, emb)
            self._indexed = self._indexed and index is not None
        self.store = SqliteStore(self._store_conn, index=index if self._indexed else None)
        self.store.setup()
        self._ckpt_conn = sqlite3.connect(str(work_dir / "checkpoints.db"), check_same_thread=False)
        self.saver = SqliteSaver(self._ckpt_conn)
        self.saver.setup()
        self._factory = factory
        if factory is not None:
            from traceless.systems._langgraph_byo import audit_chat_model, build_graph

            self._chat = audit_chat_model(runtime.model, self.cfg.summary_max_tokens)
            self.graph = build_graph(factory, self.saver, self.store, self._chat)
            return

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
        if self._factory is not None:
            self._write_user_graph(sessions)
            return
        for s in sessions:
            msgs = [{"role": t.role, "content": t.content} for t in s.turns if t.role in ("user", "assistant")]
            cfg: Any = {"configurable": {"thread_id": _thread(s.user_id, s.session_id)}}
            self.graph.invoke({"messages": msgs, "user_id": s.user_id, "session_id": s.session_id}, cfg)

    def _threads(self, owner: str) -> list[str]:
        rows = self._ckpt_conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id").fetchall()
        return [r[0] for r in rows if r[0].startswith(f"{owner}/")]

    def _namespace(self, owner: str) -> tuple[str, ...]:
        return tuple(label.format(user_id=owner) for label in self._users.namespace)

    def _tid(self, owner: str, session_id: str) -> str:
        return self._users.thread_id.format(user_id=owner, session_id=session_id)

    def _write_user_graph(self, sessions: Sequence[Session]) -> None:
        """One thread per session; each user turn invokes the user's graph (its agent replies)."""
        for s in sessions:
            extra = {k: v.format(user_id=s.user_id, session_id=s.session_id) for k, v in self._users.configurable.items()}
            cfg: Any = {"configurable": {"thread_id": self._tid(s.user_id, s.session_id), **extra}}
            for t in s.turns:
                if t.role == "user":
                    self.graph.invoke({"messages": [{"role": "user", "content": t.content}]}, cfg)

    def agent_reply(self, owner: str, query: str) -> AgentAnswer | None:
        """The user's graph answering ``query`` for ``owner`` in a new thread (None: traceless's
        graph, whose reply the audit's prompt makes). The probe's thread is kept in memory
        (``InMemorySaver``), so probing writes nothing to the thread files being measured."""
        if self._factory is None:
            return None
        from langgraph.checkpoint.memory import InMemorySaver

        from traceless.systems._langgraph_byo import build_graph

        if self._probe_graph is None:
            self._probe_graph = build_graph(self._factory, InMemorySaver(), self.store, self._chat)
        extra = {k: v.format(user_id=owner, session_id="probe") for k, v in self._users.configurable.items()}
        self._probes += 1
        cfg: Any = {"configurable": {"thread_id": f"traceless-probe-{self._probes}", **extra}}
        self._chat.last_request, self._chat.last = [], None  # a graph that calls no model stores no prompt
        t0 = time.monotonic()
        inp: dict[str, Any] = {"messages": [{"role": "user", "content": query}]}
        key = self._users.state_key
        if key and key in _input_keys(self._probe_graph)[0]:  # the app keeps its user in the state
            inp[key] = owner
        out = self._probe_graph.invoke(inp, cfg)
        last = out["messages"][-1]
        text = last.content if isinstance(last.content, str) else json.dumps(last.content, default=str)
        g = self._chat.last
        reply = Generation(text=text, prompt_tokens=g.prompt_tokens if g else 0,
                           completion_tokens=g.completion_tokens if g else 0, total_seconds=time.monotonic() - t0,
                           model="langgraph:" + (self.cfg.graph or ""))
        return AgentAnswer(reply, tuple(self._chat.last_request))

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        ns = self._namespace(owner)
        if self._indexed:
            hits = self.store.search(ns, query=query, limit=self.cfg.k)
        else:
            items = self.store.search(ns, limit=100_000)
            vecs = self.runtime.embedder.embed([query, *(_item_text(i.value) for i in items)])
            scores = vecs[1:] @ vecs[0]
            order = sorted(range(len(items)), key=lambda j: (-float(scores[j]), items[j].key))
            hits = [items[j] for j in order[: self.cfg.k]]
        out = [ContextItem(f"store:{h.key}", _item_text(h.value)) for h in hits]
        if self._factory is not None or self._store_only:
            return [c for c in out if c.text.strip()]
        for tid in self._threads(owner):
            cfg: Any = {"configurable": {"thread_id": tid}}
            summary = self.graph.get_state(cfg).values.get("summary", "")
            if summary.strip():
                out.append(ContextItem(f"thread:{tid}", summary))
        return [c for c in out if c.text.strip()]

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        self.check_deletion(operation)
        notes: dict[str, Any] = {}
        if operation.startswith("store.delete"):
            ns = self._namespace(target.owner)
            items = self.store.search(ns, limit=100_000)
            keys = [i.key for i in items if target.literal in json.dumps(i.value, ensure_ascii=False)]
            for key in keys:
                self.store.delete(ns, key)
            notes["deleted_keys"] = keys
        if operation.endswith("delete_thread"):
            tid = self._tid(target.owner, target.session_id)
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
        if self._probe_close is not None:  # a server's probe: the certificate's copies are the re-scan's
            return {}
        return {
            "store": self._store_items(),  # the scan's and the receipt's name of the store table
            "checkpoints": self._decoded("SELECT type, checkpoint, metadata FROM checkpoints"),
            "writes": self._decoded("SELECT type, value, channel FROM writes"),
        }

    def close(self) -> None:
        if self._probe_close is not None:  # a --certify probe on a server: its read-only connection
            self._probe_close()
            return
        if self._pg is not None:  # a connection per read: nothing held open
            return
        if self._live is not None:
            self._live.close()
            return
        self._store_conn.close()
        self._ckpt_conn.close()

    # ------------------------------------------------- live instances: scan and erase
    @classmethod
    def attach_config(cls, work_dir: Path, config: SystemConfig) -> SystemConfig | None:
        """The instance an audit built in ``work_dir`` (its two SQLite files), as a user's config names it."""
        assert isinstance(config, LangGraphConfig)
        return config.model_copy(update={
            "store": StoreConfig(kind="sqlite", path=str(work_dir / "store.db")),
            "checkpointer": CheckpointerConfig(kind="sqlite", path=str(work_dir / "checkpoints.db"))})

    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *,
               read_only: bool) -> LangGraphSystem:
        if not isinstance(config, LangGraphConfig):
            raise ConfigError(f"memory system 'langgraph' takes a LangGraphConfig, not {type(config).__name__}")
        if any(c is not None and c.kind == "postgres" for c in (config.store, config.checkpointer)):
            return cls._attach_server(config, runtime, read_only=read_only)
        paths: dict[str, Path | None] = {}
        for what, c in (("store", config.store), ("checkpointer", config.checkpointer)):
            if c is not None and c.kind != "sqlite":
                raise UnsupportedError(f"langgraph: scan/forget on a live instance reads SQLite files; the {what} is "
                                       f"{c.kind!r} (give {what}.kind \"sqlite\" and {what}.path)")
            paths[what] = Path(c.path).expanduser() if c is not None and c.path else None
        live = LiveLangGraph(paths["store"], paths["checkpointer"], config.users.mapping(), read_only=read_only)
        self = cls.__new__(cls)
        root = next(p for p in paths.values() if p is not None).parent
        MemorySystem.__init__(self, root, config, runtime)  # type: ignore[arg-type]
        self._live = live
        return self

    @classmethod
    def _attach_server(cls, config: LangGraphConfig, runtime: SystemRuntime | None, *,
                       read_only: bool) -> LangGraphSystem:
        """``PostgresSaver`` / ``PostgresStore`` on a server: its tables checked (nothing created)."""
        from traceless.systems._langgraph_pg import pg_instance

        pg = pg_instance(config, read_only=read_only)
        self = cls.__new__(cls)
        MemorySystem.__init__(self, Path("."), config, runtime)  # type: ignore[arg-type]
        self._pg = pg
        return self

    def instance(self) -> LiveInstance:
        if self._pg is None:
            raise UnsupportedError("langgraph: the kernel's instance is the PostgreSQL one; SQLite files are "
                                   "scanned and erased by LiveLangGraph")
        return self._pg

    def read_only_instance(self) -> bool:
        return self._pg is not None and self._pg.read_only

    def check_erasable(self) -> None:
        if self._pg is not None:
            self._pg.precheck()

    def probe_instance(self, runtime: SystemRuntime) -> LangGraphSystem:
        """The attached instance as the audit's agent reads it, for ``forget --certify``: the
        user's graph (``graph``) answering in threads kept in memory, over the instance's
        store (``SqliteStore`` with the config's index); no graph: the audit's agent with the
        store's own search of the user's namespace as its context. Store and threads are
        in-memory copies of the files (probing writes nothing to them); on a server, LangGraph's
        ``PostgresStore`` read on a read-only session, the graph's writes kept in memory
        (``probe_store``). Close it."""
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.store.sqlite import SqliteStore

        cfg = self.config
        assert isinstance(cfg, LangGraphConfig)  # attach checked it
        probe = LangGraphSystem.__new__(LangGraphSystem)
        MemorySystem.__init__(probe, self.work_dir, cfg, runtime)
        probe.cfg, probe._users = cfg, cfg.users.mapping()
        index = self._probe_index(runtime)
        if self._pg is not None:  # the server's store, read through PostgresStore (``probe_store``)
            from traceless.systems._langgraph_pg import probe_store

            probe.store, probe._probe_close = probe_store(self._pg, index)
            probe._indexed = index is not None
            return self._probe_graph_of(probe, runtime)
        live = self._attached()
        probe._store_conn = live.snapshot("store") or sqlite3.connect(":memory:", check_same_thread=False)
        probe._ckpt_conn = live.snapshot("checkpoints") or sqlite3.connect(":memory:", check_same_thread=False)
        index = index if hasattr(probe._store_conn, "enable_load_extension") else None  # sqlite-vec loads
        probe._indexed = index is not None
        probe.store = SqliteStore(probe._store_conn, index=index)  # type: ignore[arg-type]  # a TypedDict
        probe.saver = SqliteSaver(probe._ckpt_conn)
        probe.store.setup()  # on the copies: a file not attached gets its (empty) tables
        probe.saver.setup()
        return self._probe_graph_of(probe, runtime)

    @staticmethod
    def _probe_graph_of(probe: LangGraphSystem, runtime: SystemRuntime) -> LangGraphSystem:
        """The probe answers through the user's graph (``graph``), else the audit's agent over
        the store's search of the user's namespace."""
        probe._factory, probe._store_only = _graph_factory(probe.cfg), True
        if probe._factory is not None:
            from traceless.systems._langgraph_byo import audit_chat_model

            probe._chat = audit_chat_model(runtime.model, probe.cfg.summary_max_tokens)
        return probe

    def probe_ready(self, runtime: SystemRuntime) -> None:
        """Refuse, before anything is erased, what ``probe_instance`` would fail on after it:
        the user's graph module and the store index's embedder are imported, and the graph is
        built (on an in-memory saver and store: nothing of the instance is opened) and its input
        schema checked against the probes' input (``messages``, and the user under
        ``users.state_key`` where the graph's state has that key); on a server, the probes'
        read-only connection opened and one search of the store run (``probe_store``)."""
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.store.memory import InMemoryStore

        from traceless.systems._langgraph_byo import audit_chat_model, build_graph

        cfg = self.config
        assert isinstance(cfg, LangGraphConfig)
        factory = _graph_factory(cfg)
        index = self._probe_index(runtime)
        if self._pg is not None:  # the probes' read-only session on the server opens and reads the store
            from langgraph.store.base import SearchOp

            from traceless.systems._langgraph_pg import probe_store

            store, close = probe_store(self._pg, index)
            try:
                store.batch([SearchOp(tuple(x.format(user_id="traceless-probe") for x in cfg.users.mapping().namespace),
                                      limit=1)])
            finally:
                close()
        # without an index (or without sqlite-vec) the probes rank the user's items with it
        runtime.embedder.embed(["traceless --certify: can the probes' searches run"])
        if factory is None:
            return
        graph = build_graph(factory, InMemorySaver(), InMemoryStore(), audit_chat_model(runtime.model, 8))
        props, required = _input_keys(graph)
        given = {"messages", *([cfg.users.state_key] if cfg.users.state_key in props else [])}
        missing = sorted(required - given)
        if "messages" not in props or missing:
            need = ", ".join(missing) if missing else "messages"
            raise ConfigError(f"langgraph: --certify cannot run: the graph {cfg.graph} needs {need!r} in its input, "
                              "the probes give {\"messages\": [...]} and the user under users.state_key "
                              f"({cfg.users.state_key!r}); set users.state_key to the key that names the user, or "
                              "give the key a default in the graph's state, or run without --certify; "
                              "nothing was erased")

    def _probe_index(self, runtime: SystemRuntime) -> dict[str, Any] | None:
        """The instance's vectors are its own embedder's: searched with it where the config names
        it (``module:callable``), else without the index (the store's filter search)."""
        assert isinstance(self.config, LangGraphConfig)
        idx = self.config.store.index if self.config.store is not None else None
        return _user_index(self.config, runtime.embedder) if idx is not None and idx.embed != "traceless" else None

    def _attached(self) -> LiveLangGraph:
        if self._live is None:
            raise UnsupportedError("langgraph: scan/erase need a live instance: open it with LangGraphSystem.attach")
        return self._live

    def scan(self, user: str | None, literals: Sequence[str], *, reveal: bool = False) -> ScanReport:
        if self._pg is not None:  # a server: the kernel's scan
            self._pg.requester = user
            return super().scan(user, literals, reveal=reveal)
        return self._attached().scan(self.name, user, literals, reveal)

    def plan_erasure(self, user: str | None, literals: Sequence[str]) -> ErasurePlan:
        if self._pg is not None:
            if user is not None:
                refuse_shared(self.name, self._pg.shared(user))
            self._pg.requester = user
            self._pg.reset()  # a new erasure: the online bystander rule takes its own first count
            return super().plan_erasure(user, literals)
        live = self._attached()
        self._literals = tuple(literals)
        return live.plan(self.name, user, literals)

    def execute_erasure(self, plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        if self._pg is not None:
            self._pg.requester = plan.user
            return super().execute_erasure(plan, literals)
        return self._attached().execute(plan, literals)

    def bystander_digests(self, user: str | None) -> dict[str, StoreDigest]:
        if self._pg is not None:  # counted on the server, one aggregate per table (``PgLangGraph.bystanders``)
            self._pg.requester = user
            return self._pg.bystanders(user, self._planned[1])
        # records holding a literal are the erasure's targets, not bystanders: the literals
        # are those of the last plan (the driver plans before it digests)
        return self._attached().bystanders(user, self._literals)

    def resume_bystanders(self, before: Mapping[str, StoreDigest]) -> None:
        if self._pg is not None:  # the server's tallies carry the snapshot they counted in
            self._pg.resume(before)
        else:  # the file's digests carry their scope (``LiveLangGraph.resume_scope``)
            self._attached().resume_scope(before)

    def instance_files(self) -> list[Path]:
        if self._pg is not None:  # the relation files of its tables, when the data directory is readable
            return self._pg.files()
        return self._attached().files()

    def out_of_scope(self) -> list[str]:
        if self._pg is not None:
            return [*super().out_of_scope(), *self._pg.out_of_scope()]
        return [*super().out_of_scope(), "VACUUM's temporary files (freed blocks of the temp directory)",
                "the -shm index of a file a live writer holds open (no data; SQLite rewrites it)"]
