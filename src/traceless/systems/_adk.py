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
  ``preload_memory`` tool puts into its instruction for each user message (FTS5 bm25 over
  the user's events); ADK calls no LLM to store or search, so the audit's model is not used;
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
(a deleted row's terms otherwise stay in the index segments) and ``VACUUM``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from traceless.errors import ConfigError
from traceless.memory import Session
from traceless.systems import (
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


def _import_adk() -> Any:
    os.environ.setdefault("OTEL_SDK_DISABLED", "true")
    import google.adk.memory as memory

    return memory


def _owner(table: str, row: dict[str, Any]) -> str | None:
    user = row.get("user_id")
    return user if isinstance(user, str) else None


@memory_system("adk", help="Google ADK DatabaseSessionService (SQLite) + SqliteMemoryService; deletions "
                           "delete_session/delete_sessions (its memory has no delete)")
class AdkSystem(live.SqliteInstance):
    """ADK's session and memory services on one SQLite file in ``work_dir`` (or a live ``db_file``)."""

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
        for s in sessions:
            sess = await svc.create_session(app_name=self.app, user_id=s.user_id, session_id=s.session_id)
            for i, t in enumerate(s.turns):
                if t.role not in ("user", "assistant"):
                    continue
                author, role = ("user", "user") if t.role == "user" else (AGENT, "model")
                ev = Event(id=f"{s.session_id}-{i:03d}", invocation_id=f"{s.session_id}-{i:03d}", author=author,
                           content=types.Content(role=role, parts=[types.Part(text=t.content)]))
                await svc.append_event(sess, ev)
            done = await svc.get_session(app_name=self.app, user_id=s.user_id, session_id=s.session_id)
            await mem.add_session_to_memory(done)

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
        if operation not in _DELETIONS:
            raise ConfigError(f"adk: unknown deletion {operation!r}; known: {', '.join(_DELETIONS)}")
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

    def row_owner(self, table: str, row: dict[str, Any]) -> str | None:
        return _owner(table, row)

    def bystander_digests(self, user: str | None) -> dict[str, tuple[int, str]]:
        # the FTS5 index's shadow tables are derived from memory_events (and rebuilt by the
        # erasure): not records of any user
        return {t: d for t, d in super().bystander_digests(user).items() if not t.startswith(FTS)}

    def execute_erasure(self, plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        if plan.user is not None:  # ADK's own deletion first (its memory service has none)
            svc, _ = self._open()
            for sid in self._session_ids(plan.user):
                self._run(svc.delete_session(app_name=self.app, user_id=plan.user, session_id=sid))
        out = self.erase_residue(plan, literals)
        _rebuild_fts(self.path)
        return out


def _rebuild_fts(path: Path) -> None:
    """Rebuild the memory service's FTS5 index from its content table: FTS5 records a deleted
    row as a tombstone and keeps the row's terms in its segments until they merge (measured: a
    term of the deleted canary is still in ``memory_events_fts_data`` after DELETE and VACUUM)."""
    con = sqlite3.connect(str(path))
    try:
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_events_fts'").fetchone():
            con.execute("INSERT INTO memory_events_fts(memory_events_fts) VALUES('rebuild')")
            con.commit()
        con.execute("VACUUM")
    finally:
        con.close()
