"""The ``agno`` memory system: Agno's ``SqliteDb`` (user memories, sessions and their runs)
on the real ``agno`` package, offline.

* one SQLite file, ``agno.db`` in the work dir (tables ``agno_memories``, ``agno_sessions``,
  ``agno_runs``, ``agno_schema_versions``), created by ``SqliteDb`` itself;
* a session is stored as an agent stores it: one ``AgentSession`` (``session_id`` =
  ``USER/SESSION``: Agno's session ids are global) and one run per user turn (the user message
  and the assistant reply that followed, ``upsert_run``);
* user memories: every user turn verbatim as one ``UserMemory`` (``MemoryManager.add_user_memory``;
  the LLM-free analogue of mem0's ``infer=false``);
* what the agent reads: every memory of the user (an ``Agent`` with memories in context puts
  ``MemoryManager.get_user_memories(user_id)`` into its system message);
* telemetry off (``AGNO_TELEMETRY=false`` before agno is imported).

Native deletions: ``delete_user_memory`` (each memory of the user whose text holds the
secret), ``clear_user_memories`` (``MemoryManager.clear_user_memories(user_id)``),
``delete_session`` (``SqliteDb.delete_session`` of the session that carried it),
``clear_user_memories+delete_sessions`` (both, every session of the user), and
``clear_memory`` (the agent's ``clear_memory`` memory tool: ``db.clear_memories()``, which
deletes every user's memories, agno #9983).

A live instance (``db_file`` in the config) is scanned read-only (``mode=ro``) and erased:
Agno's own deletions, then the rows they leave and rows quoting a literal, then ``VACUUM`` where
a deletion left bytes (``sqlite.compact``).

On a PostgreSQL server (``db_url``: the URL the app gives ``PostgresDb(db_url=...)``, with its
``db_schema`` and table names): the tables (``PgTables``) are read in one read-only
transaction; the erasure removes every row of the user (memories, sessions, runs) and
rewrites other rows quoting a literal in **one** transaction (Agno's own
``clear_user_memories`` and ``delete_sessions`` each commit on their own, so they are not
called), then ``VACUUM (INDEX_CLEANUP ON)`` (or ``pg_compaction: full``: ``VACUUM FULL``),
``CHECKPOINT``, and the relation files read for the erased texts.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import SecretStr, field_serializer, field_validator

from traceless.errors import ConfigError
from traceless.memory import Session
from traceless.systems import (
    Capability,
    ContextItem,
    DeletionTarget,
    ErasurePlan,
    SystemConfig,
    SystemRuntime,
    memory_system,
)
from traceless.systems import sqlite as live
from traceless.systems.postgres import PgServerOptions

__all__ = ["AgnoConfig", "AgnoSystem"]

AGNO_VERSION = "3.1.10"
DB_NAME = "agno.db"
_DELETIONS = ("delete_user_memory", "clear_user_memories", "delete_session", "clear_user_memories+delete_sessions",
              "clear_memory")


class AgnoConfig(SystemConfig, PgServerOptions):
    """Settings of the Agno adapter."""

    db_file: str | None = None
    """A live instance's SQLite file (``scan``/``forget --memory agno``); the audit uses its work dir."""
    db_url: SecretStr | None = None
    """A live instance on a PostgreSQL server: the URL the app gives ``PostgresDb(db_url=...)``
    (``postgresql+psycopg://USER:PASSWORD@HOST:PORT/DBNAME``); never written anywhere."""
    db_schema: str = "ai"
    """``PostgresDb``'s ``db_schema`` (Agno's default ``ai``)."""
    session_table: str = "agno_sessions"
    """``PostgresDb``'s ``session_table``."""
    memory_table: str = "agno_memories"
    """``PostgresDb``'s ``memory_table``."""
    runs_table: str = "agno_runs"
    """``PostgresDb``'s ``runs_table`` (erased when it exists)."""

    @field_validator("db_url")
    @classmethod
    def _postgres(cls, v: SecretStr | None) -> SecretStr | None:
        from traceless.systems.postgres import check_url

        check_url(v.get_secret_value() if v is not None else None, "db_url")
        return v

    @field_serializer("db_url")
    def _no_password(self, v: SecretStr | None) -> str | None:
        from traceless.systems.postgres import shown_url

        return shown_url(v)


def _import_agno() -> Any:
    os.environ["AGNO_TELEMETRY"] = "false"  # read when an agent or team is built
    import agno.db.sqlite as sqlite_db

    return sqlite_db


def _row_owner(table: str, row: dict[str, Any]) -> str | None:
    user = row.get("user_id")
    return user if isinstance(user, str) else None


def _sid(owner: str, session_id: str) -> str:
    return f"{owner}/{session_id}"


@memory_system("agno", help="Agno SqliteDb: user memories + sessions/runs; deletions delete_user_memory/"
                            "clear_user_memories/delete_session/clear_memory")
class AgnoSystem(live.SqliteInstance):
    """Agno's ``SqliteDb`` and ``MemoryManager`` in ``work_dir`` (or on a live ``db_file``)."""

    capabilities = frozenset({Capability.LIVE, Capability.ONLINE, Capability.REWRITE})

    extra = "agno"
    requires = ("agno", "agno.db.sqlite", "sqlalchemy")
    config_class = AgnoConfig
    db_name = DB_NAME

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime | None,
                 *, db_path: Path | None = None, read_only: bool = False) -> None:
        super().__init__(work_dir, config, runtime, db_path=db_path, read_only=read_only)
        assert isinstance(config, AgnoConfig)
        self._db: Any = None
        self._mm: Any = None
        if not read_only:
            _import_agno()

    def _open(self) -> tuple[Any, Any]:
        if self.read_only:
            raise ConfigError("agno: this instance was attached read-only; attach it with read_only=False to change it")
        if self._db is None:
            from agno.memory import MemoryManager

            self._db = _import_agno().SqliteDb(db_file=str(self.path))
            self._mm = MemoryManager(db=self._db)
        return self._db, self._mm

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        return _DELETIONS

    def write(self, sessions: Sequence[Session]) -> None:
        from agno.db.schemas import UserMemory
        from agno.models.message import Message
        from agno.run.agent import RunOutput
        from agno.session import AgentSession

        db, mm = self._open()
        for s in sessions:
            sid = _sid(s.user_id, s.session_id)
            db.upsert_session(AgentSession(session_id=sid, agent_id="traceless", user_id=s.user_id))
            run = 0
            for i, t in enumerate(s.turns):
                if t.role != "user":
                    continue
                msgs = [Message(role="user", content=t.content)]
                nxt = s.turns[i + 1] if i + 1 < len(s.turns) else None
                if nxt is not None and nxt.role == "assistant":
                    msgs.append(Message(role="assistant", content=nxt.content))
                out = RunOutput(run_id=f"{sid}/{run:03d}", agent_id="traceless", session_id=sid, user_id=s.user_id,
                                content=msgs[-1].content if len(msgs) > 1 else None, messages=msgs)
                db.upsert_run(out, session_id=sid, user_id=s.user_id, run_index=run)
                mm.add_user_memory(UserMemory(memory=t.content, memory_id=f"{sid}/{i:03d}", input=t.content),
                                   user_id=s.user_id)
                run += 1

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        _, mm = self._open()
        mems = sorted(mm.get_user_memories(user_id=owner) or [], key=lambda m: str(m.memory_id))
        return [ContextItem(str(m.memory_id), str(m.memory)) for m in mems if str(m.memory).strip()]

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        self.check_deletion(operation)
        db, mm = self._open()
        notes: dict[str, Any] = {}
        if operation == "delete_user_memory":
            ids = [str(m.memory_id) for m in mm.get_user_memories(user_id=target.owner) or []
                   if target.literal in str(m.memory)]
            for i in ids:
                mm.delete_user_memory(memory_id=i, user_id=target.owner)
            notes["deleted_memories"] = ids
        if operation.startswith("clear_user_memories"):
            mm.clear_user_memories(user_id=target.owner)
        if operation == "delete_session":
            sid = _sid(target.owner, target.session_id)
            notes["deleted_session"] = bool(db.delete_session(sid, user_id=target.owner))
        if operation.endswith("delete_sessions"):
            sids = self._sessions(target.owner)
            db.delete_sessions(sids, user_id=target.owner)
            notes["deleted_sessions"] = sids
        if operation == "clear_memory":
            db.clear_memories()
        return notes

    def _sessions(self, owner: str) -> list[str]:
        # read-only: through ``ro_connect``; else a plain read (Agno's own connection holds a
        # ``-wal`` open, which ``ro_connect`` would copy the whole file for)
        con = live.ro_connect(self.path) if self.read_only else sqlite3.connect(str(self.path))
        try:
            return [r[0] for r in con.execute("SELECT session_id FROM agno_sessions WHERE user_id = ? "
                                              "ORDER BY session_id", (owner,))]
        finally:
            con.close()

    # ------------------------------------------------------------------ scanning
    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # ------------------------------------------------- live instances: scan and erase
    @classmethod
    def server_tables(cls, config: SystemConfig) -> Any:
        """``PostgresDb``'s tables on the server ``db_url`` names (sessions and memories
        required, runs when present), reached and checked before anything else."""
        assert isinstance(config, AgnoConfig)
        if config.db_url is None:
            return None
        from traceless.systems.postgres import pg_tables, replica_targets, url_target

        target = url_target(config.db_url.get_secret_value(), "db_url", config.pg_compaction)
        q = f"{config.db_schema}."
        return pg_tables(target, [q + config.memory_table, q + config.session_table],
                         [q + config.runs_table, q + "agno_schema_versions"], _row_owner,
                         replica_targets(config.pg_replicas or (), target), " (Agno's PostgresDb tables)")

    def init_server(self) -> None:
        self._db = self._mm = None

    def owner_filter(self) -> live.OwnerSql:
        return live.user_column("user_id")

    def row_owner(self, table: str, row: dict[str, Any]) -> str | None:
        return _row_owner(table, row)

    def native_erasure(self, plan: ErasurePlan) -> None:
        if plan.user is not None:  # Agno's own deletions first, then the kernel removes what they leave
            db, mm = self._open()
            mm.clear_user_memories(user_id=plan.user)
            db.delete_sessions(self._sessions(plan.user), user_id=plan.user)
