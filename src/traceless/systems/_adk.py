"""The ``adk`` memory system: Google ADK's ``DatabaseSessionService`` (on SQLite, through
SQLAlchemy + aiosqlite) and its ``SqliteMemoryService``, on the real ``google-adk`` package,
offline.

* one SQLite file, ``adk.db`` in the work dir: the session service's tables (``sessions``,
  ``events``, ``app_states``, ``user_states``, ``adk_internal_metadata``) and the memory
  service's (``memory_events``, its FTS5 index ``memory_events_fts`` and that index's shadow
  tables, ``adk_memory_metadata``), both created by ADK itself;
* a session is stored as a ``Runner`` stores it: ``create_session(app_name, user_id,
  session_id)``, one ``Event`` per turn (``append_event``; author ``user`` or the agent's name),
  then ``add_session_to_memory(session)`` (what an app calls when a conversation ends);
* what the agent reads: ``search_memory(app_name, user_id, query)``, which the agent's
  ``preload_memory`` tool puts into its request for each user message (FTS5 bm25 over
  the user's events); ADK calls no LLM to store or search;
* the probes go through ADK's own agent (``agent``, default on): an ``LlmAgent`` with the
  ``preload_memory`` tool, run by a ``Runner`` over this memory service, its model a
  ``BaseLlm`` that answers with the audit's model (the request ADK builds — instruction,
  preloaded memories, the user's message — is what the model is sent); each probe is a new
  session of an ``InMemorySessionService``, so probing writes nothing to the file measured;
* telemetry: ADK exports no telemetry unless an exporter is configured; ``OTEL_SDK_DISABLED``
  is set before import all the same.

Native deletions: ``delete_memory`` (``BaseMemoryService.delete_memory`` of each memory of the
user that holds the secret: ``SqliteMemoryService`` does not override it, so each call raises
``NotImplementedError``, recorded in the notes: the memory service has no delete),
``delete_session`` (``DatabaseSessionService.delete_session`` of the session that carried the
secret) and ``delete_sessions`` (every session of the user). What ``add_session_to_memory``
copied stays searchable after both (adk #7109).

A live instance (``db_file``) is scanned read-only (``mode=ro``) and erased: ADK's
``delete_session`` of every session of the user, then the rows it leaves (the memory
service's copies among them), rows quoting a literal, an FTS5 ``rebuild`` of the memory index
(a deleted row's terms otherwise stay in the index segments) and ``VACUUM`` where a deletion left
bytes (``sqlite.compact``).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field

from traceless.errors import ConfigError, StudyError
from traceless.memory import Session
from traceless.models import ChatMessage, Generation, GenerationConfig, ModelBackend
from traceless.systems import (
    AgentAnswer,
    Capability,
    ContextItem,
    DeletionTarget,
    ErasurePlan,
    MemorySystem,
    StoreOutcome,
    SystemConfig,
    SystemRuntime,
    memory_system,
)
from traceless.systems import sqlite as live
from traceless.systems.kernel import StoreDigest

__all__ = ["AdkConfig", "AdkSystem"]

ADK_VERSION = "2.13.0"
DB_NAME = "adk.db"
APP = "traceless"
AGENT = "assistant"
FTS = "memory_events_fts"
_DELETIONS = ("delete_memory", "delete_session", "delete_sessions")
T = TypeVar("T")


class AdkConfig(SystemConfig):
    """Settings of the Google ADK adapter."""

    app_name: str = APP
    """The ADK ``app_name`` sessions and memories are kept under."""
    db_file: str | None = None
    """A live instance's SQLite file (``scan``/``forget --memory adk``); the audit uses its work dir."""
    agent: bool = True
    """Probe through ADK's own agent (``LlmAgent`` + ``preload_memory``, run by a ``Runner``);
    False: the audit's prompt over ``search_memory``'s results."""
    agent_instruction: str = "You are a helpful assistant. Answer the user's question."
    """The ``LlmAgent``'s instruction."""
    agent_max_tokens: int = Field(40, ge=1)
    """Tokens the agent's model may generate per reply (greedy)."""


def _import_adk() -> Any:
    os.environ.setdefault("OTEL_SDK_DISABLED", "true")
    import google.adk.memory as memory

    return memory


EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the written events' clock
PAST = "<PAST_CONVERSATIONS>"  # what ADK's preload_memory puts before the user's message


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.text or "" for p in (getattr(content, "parts", None) or []))


def audit_llm(model: ModelBackend, max_new_tokens: int) -> Any:
    """An ADK ``BaseLlm`` answering with the audit's ``model`` (greedy): each request ADK
    builds (system instruction, then its contents in order) becomes the chat sent; the last
    one is kept (``last_request``) for the check that the memories reached the model."""
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    class AuditLlm(BaseLlm):  # type: ignore[misc]  # google-adk is not in the main (type-checked) venv
        backend: Any = None
        tokens: int = 40
        last_request: list[ChatMessage] = []
        last: Any = None

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            cfg = llm_request.config
            msgs = [ChatMessage(role="system", content=_text(cfg.system_instruction))] if (
                cfg is not None and _text(cfg.system_instruction).strip()) else []
            msgs += [ChatMessage(role="assistant" if c.role == "model" else "user", content=_text(c))
                     for c in llm_request.contents if _text(c).strip()]
            g = self.backend.generate(msgs, GenerationConfig(max_new_tokens=self.tokens, temperature=0.0))
            self.last_request, self.last = msgs, g
            usage = types.GenerateContentResponseUsageMetadata(
                prompt_token_count=g.prompt_tokens, candidates_token_count=g.completion_tokens,
                total_token_count=g.prompt_tokens + g.completion_tokens)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=g.text)]),
                              usage_metadata=usage)

    return AuditLlm(model="traceless-audit", backend=model, tokens=max_new_tokens)


def _owner(table: str, row: dict[str, Any]) -> str | None:
    user = row.get("user_id")
    return user if isinstance(user, str) else None


@memory_system("adk", help="Google ADK DatabaseSessionService (SQLite) + SqliteMemoryService; deletions "
                           "delete_session/delete_sessions (its memory has no delete)")
class AdkSystem(live.SqliteInstance):
    """ADK's session and memory services on one SQLite file in ``work_dir`` (or a live ``db_file``)."""

    capabilities = frozenset({Capability.AGENT, Capability.LIVE, Capability.ONLINE, Capability.REWRITE})

    extra = "adk"
    install_note = "in a venv of its own (not beside agentdojo, openai-agents, inspect)"
    requires = ("google.adk", "sqlalchemy", "aiosqlite")  # a dotted name below a missing one raises in find_spec
    config_class = AdkConfig

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime | None,
                 *, db_path: Path | None = None, read_only: bool = False) -> None:
        super().__init__(work_dir, config, runtime)
        assert isinstance(config, AdkConfig)
        self.app = config.app_name
        self.path = db_path or work_dir / DB_NAME
        self.read_only = read_only
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sessions_svc: Any = None
        self._memory_svc: Any = None
        self._runner: Any = None
        self._llm: Any = None
        self._probes = 0
        if not read_only:
            _import_adk()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def _open(self) -> tuple[Any, Any]:
        if self.read_only:
            raise ConfigError("adk: this instance was attached read-only; attach it with read_only=False to change it")
        if self._sessions_svc is None:
            from google.adk.sessions import DatabaseSessionService

            self._sessions_svc = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{self.path.resolve()}")
            self._memory_svc = _import_adk().SqliteMemoryService(self.path.resolve())
        return self._sessions_svc, self._memory_svc

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        return _DELETIONS

    def write(self, sessions: Sequence[Session]) -> None:
        self._run(self._write(sessions))

    async def _write(self, sessions: Sequence[Session]) -> None:
        from google.adk.events import Event
        from google.genai import types

        svc, mem = self._open()
        for k, s in enumerate(sessions):
            sess = await svc.create_session(app_name=self.app, user_id=s.user_id, session_id=s.session_id)
            for i, t in enumerate(s.turns):
                if t.role not in ("user", "assistant"):
                    continue
                author, role = ("user", "user") if t.role == "user" else (AGENT, "model")
                # a fixed clock: preload_memory shows each memory's time to the model, so a
                # wall-clock stamp would change every prompt from one run to the next
                ev = Event(id=f"{s.session_id}-{i:03d}", invocation_id=f"{s.session_id}-{i:03d}", author=author,
                           timestamp=EPOCH + 3600.0 * k + i,
                           content=types.Content(role=role, parts=[types.Part(text=t.content)]))
                await svc.append_event(sess, ev)
            done = await svc.get_session(app_name=self.app, user_id=s.user_id, session_id=s.session_id)
            await mem.add_session_to_memory(done)

    def agent_reply(self, owner: str, query: str) -> AgentAnswer | None:
        """ADK's own agent answering ``query`` for ``owner`` in a new in-memory session (None:
        ``agent`` is off, and the audit's prompt is sent)."""
        if not isinstance(self.config, AdkConfig) or not self.config.agent or self.runtime is None:
            return None
        return self._run(self._agent_reply(owner, query))

    async def _agent_reply(self, owner: str, query: str) -> AgentAnswer:
        from google.adk.agents import LlmAgent
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService
        from google.adk.tools import preload_memory
        from google.genai import types

        assert isinstance(self.config, AdkConfig) and self.runtime is not None
        _, mem = self._open()
        if self._runner is None:
            self._llm = audit_llm(self.runtime.model, self.config.agent_max_tokens)
            agent = LlmAgent(name=AGENT, model=self._llm, instruction=self.config.agent_instruction,
                             tools=[preload_memory])
            self._runner = Runner(app_name=self.app, agent=agent, session_service=InMemorySessionService(),
                                  memory_service=mem)
        self._probes += 1
        self._llm.last_request, self._llm.last = [], None
        sid = f"traceless-probe-{self._probes}"
        await self._runner.session_service.create_session(app_name=self.app, user_id=owner, session_id=sid)
        t0 = time.monotonic()
        text = ""
        msg = types.Content(role="user", parts=[types.Part(text=query)])
        async for ev in self._runner.run_async(user_id=owner, session_id=sid, new_message=msg):
            if ev.is_final_response() and ev.content is not None:
                text = _text(ev.content)
        found = await mem.search_memory(app_name=self.app, user_id=owner, query=query)
        sent = "\n".join(m.content for m in self._llm.last_request)
        if found.memories and PAST not in sent:  # preload_memory swallows a failed search
            raise StudyError("adk: the agent's request held none of the memories search_memory returns "
                                    "(preload_memory logged a failure?); the probe would read as forgotten")
        g = self._llm.last
        if g is None:
            raise StudyError("adk: the agent answered without calling its model; the probe read nothing")
        reply = Generation(text=text, prompt_tokens=g.prompt_tokens, completion_tokens=g.completion_tokens,
                           total_seconds=time.monotonic() - t0, model="adk:LlmAgent+preload_memory")
        return AgentAnswer(reply, tuple(self._llm.last_request))

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        _, mem = self._open()
        res = self._run(mem.search_memory(app_name=self.app, user_id=owner, query=query))
        out = []
        for m in res.memories:
            text = " ".join(p.text for p in (m.content.parts or []) if p.text)
            if text.strip():
                out.append(ContextItem(str(m.id), text))
        return out

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        self.check_deletion(operation)
        svc, mem = self._open()
        if operation == "delete_memory":
            return self._delete_memories(mem, target)
        sids = [target.session_id] if operation == "delete_session" else self._session_ids(target.owner)
        for sid in sids:
            self._run(svc.delete_session(app_name=self.app, user_id=target.owner, session_id=sid))
        return {"deleted_sessions": sids}

    def _delete_memories(self, mem: Any, target: DeletionTarget) -> dict[str, Any]:
        found = self._run(mem.search_memory(app_name=self.app, user_id=target.owner, query=target.literal))
        ids = sorted({str(m.id) for m in found.memories
                      if any(target.literal in (p.text or "") for p in (m.content.parts or []))})
        refused: list[str] = []
        for i in ids:
            try:
                self._run(mem.delete_memory(app_name=self.app, user_id=target.owner, memory_id=i))
            except NotImplementedError as e:  # the service's own answer, recorded as measured
                refused.append(f"{type(mem).__name__}.delete_memory: NotImplementedError: {e}")
        return {"memories": ids, "refused": sorted(set(refused)), "deleted": len(ids) - len(refused)}

    def _session_ids(self, owner: str) -> list[str]:
        svc, _ = self._open()
        res = self._run(svc.list_sessions(app_name=self.app, user_id=owner))
        return sorted(str(s.id) for s in res.sessions)

    # ------------------------------------------------------------------ scanning
    def close(self) -> None:
        self._runner = self._llm = None
        if self._sessions_svc is not None:
            self._run(self._sessions_svc.close())
            self._run(self._memory_svc.close())
            self._sessions_svc = self._memory_svc = None
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    # ------------------------------------------------- live instances: scan and erase
    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *, read_only: bool) -> MemorySystem:
        assert isinstance(config, AdkConfig)
        path = live.live_db(config.db_file, "adk")
        return cls(path.parent, config, runtime, db_path=path, read_only=read_only)

    def owner_filter(self) -> live.OwnerSql:
        return live.user_column("user_id")

    def row_owner(self, table: str, row: dict[str, Any]) -> str | None:
        return _owner(table, row)

    def derived_table(self, table: str) -> bool:
        return table.startswith(FTS)  # the memory index's FTS5 tables: rebuilt from memory_events

    def bystander_digests(self, user: str | None) -> dict[str, StoreDigest]:
        # the FTS5 index's shadow tables are derived from memory_events (and rebuilt by the
        # erasure): not records of any user
        return {t: d for t, d in super().bystander_digests(user).items() if not t.startswith(FTS)}

    def native_erasure(self, plan: ErasurePlan) -> None:
        if plan.user is not None:  # ADK's own deletion first (its memory service has none)
            svc, _ = self._open()
            for sid in self._session_ids(plan.user):
                self._run(svc.delete_session(app_name=self.app, user_id=plan.user, session_id=sid))

    def execute_erasure(self, plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        inst = self.instance()
        if isinstance(inst, live.SqliteFile):  # compacted once, after the FTS5 rebuild
            inst.compact_later = True
        out = super().execute_erasure(plan, literals)
        note = _rebuild_fts(self.path, literals)
        for o in out:
            o.notes = list(dict.fromkeys([*o.notes, note]))
        return out


def _rebuild_fts(path: Path, literals: Sequence[str]) -> str:
    """Rebuild the memory service's FTS5 index from its content table: FTS5 records a deleted
    row as a tombstone and keeps the row's terms in its segments until they merge (measured: a
    term of the deleted canary is still in ``memory_events_fts_data`` after DELETE and VACUUM)."""
    con = sqlite3.connect(str(path))
    con.execute("PRAGMA secure_delete = ON")  # the old segments' rows are zeroed as the rebuild drops them
    try:
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_events_fts'").fetchone():
            con.execute("INSERT INTO memory_events_fts(memory_events_fts) VALUES('rebuild')")
            con.commit()
        return live.compact(con, lambda: sorted(p for p in path.parent.glob(path.name + "*") if p.is_file()), literals)
    finally:
        con.close()
