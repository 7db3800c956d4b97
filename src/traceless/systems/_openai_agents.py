"""The ``openai-agents`` memory system: the OpenAI Agents SDK's ``SQLiteSession`` on the real
``openai-agents`` package, offline.

* one SQLite file, ``sessions.db`` in the work dir (the SDK's tables ``agent_sessions`` and
  ``agent_messages``, one JSON input item per message row);
* a user's conversations go into one session, ``session_id`` = the user id (the SDK has no
  user concept: an app keys the session by its user), every user and assistant turn as one
  input item (``add_items``, what ``Runner.run(agent, input, session=...)`` appends);
  ``per_session: true`` keeps one session per conversation (``USER/SESSION``);
* what the agent reads: the session's items (``get_items``), which the Runner prepends to
  the agent's input (the newest ``limit`` items; all by default); with ``per_session`` every
  session of the user;
* tracing off (``OPENAI_AGENTS_DISABLE_TRACING=1`` before import, ``set_tracing_disabled``):
  the SDK would export traces to api.openai.com.

Native deletions: ``pop_item`` (``SQLiteSession.pop_item()``: it removes only the newest
item, so it is called until no item holding the secret is left, as a user undoing turns
would) and ``clear_session`` (``SQLiteSession.clear_session()`` of the session that carried it).

A live instance (``db_file``) is scanned read-only (``mode=ro``) and erased: ``clear_session``
of every session of the user, then the rows it leaves and rows quoting a literal, then ``VACUUM``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from traceless.errors import ConfigError
from traceless.memory import Session
from traceless.systems import (
    ContextItem,
    DeletionTarget,
    ErasurePlan,
    StoreOutcome,
    SystemConfig,
    SystemRuntime,
    memory_system,
)
from traceless.systems import sqlite as live

__all__ = ["OpenAIAgentsConfig", "OpenAIAgentsSystem"]

OPENAI_AGENTS_VERSION = "0.24.0"
DB_NAME = "sessions.db"
_DELETIONS = ("pop_item", "clear_session")


class OpenAIAgentsConfig(SystemConfig):
    """Settings of the OpenAI Agents SDK adapter."""

    per_session: bool = False
    """One SDK session per conversation (``USER/SESSION``) instead of one per user."""
    limit: int | None = Field(None, ge=1)
    """Newest items the agent is given (``get_items(limit)``; None: all, the Runner's default)."""
    db_file: str | None = None
    """A live instance's SQLite file (``scan``/``forget --memory openai-agents``)."""


def _import_sdk() -> Any:
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # tracing off: the SDK would export traces to OpenAI
    import agents

    agents.set_tracing_disabled(True)
    return agents


def _text(item: dict[str, Any]) -> str:
    content = item.get("content", "")
    if isinstance(content, list):
        return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content)


@memory_system("openai-agents", help="OpenAI Agents SDK SQLiteSession (one session per user); "
                                     "deletions pop_item/clear_session")
class OpenAIAgentsSystem(live.SqliteInstance):
    """``SQLiteSession``s in ``work_dir/sessions.db`` (or a live ``db_file``)."""

    extra = "openai-agents"
    requires = ("agents", "agents.memory")
    config_class = OpenAIAgentsConfig
    db_name = DB_NAME

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime | None,
                 *, db_path: Path | None = None, read_only: bool = False) -> None:
        super().__init__(work_dir, config, runtime, db_path=db_path, read_only=read_only)
        assert isinstance(config, OpenAIAgentsConfig)
        self.cfg = config
        self._open: dict[str, Any] = {}
        if not read_only:
            _import_sdk()

    def _session(self, sid: str) -> Any:
        if self.read_only:
            raise ConfigError("openai-agents: this instance was attached read-only; attach it with read_only=False")
        if sid not in self._open:
            from agents import SQLiteSession

            self._open[sid] = SQLiteSession(sid, str(self.path))
        return self._open[sid]

    def _sid(self, owner: str, session_id: str) -> str:
        return f"{owner}/{session_id}" if self.cfg.per_session else owner

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        return _DELETIONS

    def write(self, sessions: Sequence[Session]) -> None:
        for s in sessions:
            items = [{"role": t.role, "content": t.content} for t in s.turns if t.role in ("user", "assistant")]
            asyncio.run(self._session(self._sid(s.user_id, s.session_id)).add_items(items))

    def _user_sessions(self, owner: str) -> list[str]:
        if not self.path.exists():
            return []
        con = live.ro_connect(self.path)
        try:
            sids = [r[0] for r in con.execute("SELECT session_id FROM agent_sessions ORDER BY session_id")]
        finally:
            con.close()
        return [s for s in sids if s == owner or s.startswith(f"{owner}/")]

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        out = []
        for sid in self._user_sessions(owner):
            items = asyncio.run(self._session(sid).get_items(self.cfg.limit))
            out += [ContextItem(f"{sid}#{i}", _text(it)) for i, it in enumerate(items) if _text(it).strip()]
        return out

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        if operation not in _DELETIONS:
            raise ConfigError(f"openai-agents: unknown deletion {operation!r}; known: {', '.join(_DELETIONS)}")
        sess = self._session(self._sid(target.owner, target.session_id))
        if operation == "clear_session":
            asyncio.run(sess.clear_session())
            return {"cleared": sess.session_id}
        popped = 0
        while any(target.literal in json.dumps(it, ensure_ascii=False) for it in asyncio.run(sess.get_items())):
            asyncio.run(sess.pop_item())
            popped += 1
        return {"popped": popped}

    # ------------------------------------------------------------------ scanning
    def stores(self) -> dict[str, Iterable[str]]:
        if not self.path.exists():
            return {}
        return {t: [r.text() for r in rs] for t, rs in live.rows(self.path).items()}

    def close(self) -> None:
        for s in self._open.values():
            s.close()
        self._open.clear()

    # ------------------------------------------------- live instances: scan and erase
    def row_owner(self, table: str, row: dict[str, Any]) -> str | None:
        sid = row.get("session_id")
        return sid.split("/", 1)[0] if isinstance(sid, str) else None

    def execute_erasure(self, plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        if plan.user is not None:  # the SDK's own deletion first, then what it leaves
            for sid in self._user_sessions(plan.user):
                asyncio.run(self._session(sid).clear_session())
        return self.erase_residue(plan, literals)
