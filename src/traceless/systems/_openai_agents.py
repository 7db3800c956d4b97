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

Options, as an app configures the SDK: ``session: "sqlalchemy"`` stores through
``SQLAlchemySession`` (``sqlite+aiosqlite`` on the same file, ``create_tables=True``: the same
two tables); ``encrypted_ttl: SECONDS`` wraps every session in ``EncryptedSession`` (Fernet,
one key per session derived from the instance's key) and adds the deletion ``ttl_expiry``:
the reads' clock moves past the TTL (every item, of every user, is then older than it), what
the SDK's expiry is. Measured (tests/unit/test_openai_agents_sessions.py): an expired item is
skipped by ``get_items`` but its row stays in ``agent_messages``; the file holds only the
Fernet token (no plaintext bytes), which the key still decrypts (Fernet checks the TTL only
when asked): the store ``agent_messages@decrypted`` is every row the key opens.

A live instance (``db_file``) is scanned read-only (``mode=ro``) and erased: ``clear_session``
of every session of the user, then the rows it leaves and rows quoting a literal, then ``VACUUM``
where a deletion left bytes (``sqlite.compact``).

On a PostgreSQL server (``url``: the URL the app gives ``SQLAlchemySession.from_url(url=...)``,
``postgresql+psycopg://`` or ``postgresql+asyncpg://``): the two tables (``PgTables``) are read
in one read-only transaction; the erasure removes the user's sessions and messages and
rewrites other messages quoting a literal in **one** transaction (``clear_session`` commits
per session, so it is not called), then ``VACUUM (INDEX_CLEANUP ON)`` (or ``pg_compaction:
full``: ``VACUUM FULL``), ``CHECKPOINT``, and the relation files read for the erased texts.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field, SecretStr, field_serializer, field_validator

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
    PlannedAction,
    ScanHit,
    ScanReport,
    StoreOutcome,
    SystemConfig,
    SystemRuntime,
    memory_system,
)
from traceless.systems import sqlite as live
from traceless.systems.kernel import StoreDigest, digest
from traceless.systems.postgres import PgServerOptions

__all__ = ["OpenAIAgentsConfig", "OpenAIAgentsSystem"]

OPENAI_AGENTS_VERSION = "0.24.0"
DB_NAME = "sessions.db"
_DELETIONS = ("pop_item", "clear_session")
TTL_EXPIRY = "ttl_expiry"
AUDIT_KEY = "traceless-audit-instance-key"  # the audit's own fresh instance: its key is no secret
DECRYPTED = "agent_messages@decrypted"
T = TypeVar("T")


class OpenAIAgentsConfig(SystemConfig, PgServerOptions):
    """Settings of the OpenAI Agents SDK adapter."""

    per_session: bool = False
    """One SDK session per conversation (``USER/SESSION``) instead of one per user."""
    limit: int | None = Field(None, ge=1)
    """Newest items the agent is given (``get_items(limit)``; None: all, the Runner's default)."""
    db_file: str | None = None
    """A live instance's SQLite file (``scan``/``forget --memory openai-agents``)."""
    session: Literal["sqlite", "sqlalchemy"] = "sqlite"
    """The SDK's session class: ``SQLiteSession``, or ``SQLAlchemySession`` on the same SQLite file."""
    url: SecretStr | None = None
    """A live instance on a PostgreSQL server: the URL the app gives
    ``SQLAlchemySession.from_url(url=...)`` (``postgresql+psycopg://USER:PASSWORD@HOST:PORT/DBNAME``);
    never written anywhere."""
    sessions_table: str = "agent_sessions"
    """``SQLAlchemySession``'s ``sessions_table`` (``schema.name`` allowed)."""
    messages_table: str = "agent_messages"
    """``SQLAlchemySession``'s ``messages_table`` (``schema.name`` allowed)."""
    encrypted_ttl: int | None = Field(None, ge=1)
    """Wrap each session in ``EncryptedSession`` with this TTL in seconds (adds ``ttl_expiry``)."""
    agent: bool = True
    """Probe through the SDK's own ``Runner.run(agent, question, session=...)`` (one session per
    user; with ``per_session`` the audit's prompt over every session is used); False: the
    audit's prompt over ``get_items``."""
    agent_instructions: str = "You are a helpful assistant. Answer the user's question."
    """The ``Agent``'s instructions."""
    agent_max_tokens: int = Field(40, ge=1)
    """Tokens the agent's model may generate per reply (greedy)."""

    @field_validator("url")
    @classmethod
    def _postgres(cls, v: SecretStr | None) -> SecretStr | None:
        from traceless.systems.postgres import check_url

        check_url(v.get_secret_value() if v is not None else None, "url")
        return v

    @field_serializer("url")
    def _no_password(self, v: SecretStr | None) -> str | None:
        from traceless.systems.postgres import shown_url

        return shown_url(v)


def audit_model(backend: ModelBackend, max_new_tokens: int) -> Any:
    """An Agents SDK ``Model`` answering with the audit's ``backend`` (greedy): the Runner's
    system instructions and input items (the session's, then the question) become the chat
    sent; the last one is kept (``last_request``) for the check that the session reached it."""
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    class AuditModel(Model):
        def __init__(self) -> None:
            self.last: Generation | None = None
            self.last_request: list[ChatMessage] = []

        async def get_response(self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
            msgs = [ChatMessage(role="system", content=system_instructions)] if system_instructions else []
            for it in [{"role": "user", "content": input}] if isinstance(input, str) else input:
                role, text = it.get("role"), _text(it)
                if role in ("system", "user", "assistant") and text.strip():
                    msgs.append(ChatMessage(role=role, content=text))
            g = backend.generate(msgs, GenerationConfig(max_new_tokens=max_new_tokens, temperature=0.0))
            self.last, self.last_request = g, msgs
            out = ResponseOutputMessage(id="msg_traceless", type="message", role="assistant", status="completed",
                                        content=[ResponseOutputText(type="output_text", text=g.text, annotations=[])])
            usage = Usage(requests=1, input_tokens=g.prompt_tokens, output_tokens=g.completion_tokens,
                          total_tokens=g.prompt_tokens + g.completion_tokens)
            return ModelResponse(output=[out], usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            # the SDK's abstract streaming entry point: the audit calls Runner.run, never run_streamed
            raise NotImplementedError("the audit's agent model answers Runner.run only (no streaming)")

    return AuditModel()


class _ProbeSession:
    """The user's session as the Runner reads it, with its writes dropped: the probe's turn is
    not added to the store being measured."""

    session_settings: Any = None

    def __init__(self, under: Any) -> None:
        self.under, self.session_id = under, under.session_id

    async def get_items(self, limit: int | None = None) -> Any:
        return await self.under.get_items(limit)

    async def add_items(self, items: Any) -> None:
        return None

    async def pop_item(self) -> Any:
        return None

    async def clear_session(self) -> None:
        return None


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

    capabilities = frozenset({Capability.AGENT, Capability.LIVE, Capability.ONLINE, Capability.REWRITE, Capability.ENCRYPTED_VIEW})

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
        self._loop: asyncio.AbstractEventLoop | None = None
        self.clock_shift = 0
        """Seconds the encrypted sessions' reads are ahead of the wall clock (``ttl_expiry``)."""
        self._model: Any = None
        if not read_only:
            _import_sdk()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:  # one loop: SQLAlchemy's async engine keeps connections bound to it
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def _session(self, sid: str) -> Any:
        if self.read_only:
            raise ConfigError("openai-agents: this instance was attached read-only; attach it with read_only=False")
        if sid not in self._open:
            self._open[sid] = self._encrypted(sid, self._underlying(sid))
        return self._open[sid]

    def _underlying(self, sid: str) -> Any:
        if self.cfg.session == "sqlalchemy":
            from agents.extensions.memory import SQLAlchemySession

            return SQLAlchemySession.from_url(sid, url=f"sqlite+aiosqlite:///{self.path.resolve()}", create_tables=True)
        from agents import SQLiteSession

        return SQLiteSession(sid, str(self.path))

    def _encrypted(self, sid: str, under: Any) -> Any:
        if self.cfg.encrypted_ttl is None:
            return under
        from agents.extensions.memory import EncryptedSession

        sess = EncryptedSession(session_id=sid, underlying_session=under, encryption_key=AUDIT_KEY,
                                ttl=self.cfg.encrypted_ttl)
        sess.cipher = _Clock(sess.cipher, self)  # type: ignore[assignment]
        return sess

    def _sid(self, owner: str, session_id: str) -> str:
        return f"{owner}/{session_id}" if self.cfg.per_session else owner

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        ttl = isinstance(config, OpenAIAgentsConfig) and config.encrypted_ttl is not None
        return (*_DELETIONS, TTL_EXPIRY) if ttl else _DELETIONS

    def write(self, sessions: Sequence[Session]) -> None:
        for s in sessions:
            items = [{"role": t.role, "content": t.content} for t in s.turns if t.role in ("user", "assistant")]
            self._run(self._session(self._sid(s.user_id, s.session_id)).add_items(items))

    def _user_sessions(self, owner: str) -> list[str]:
        if not self.path.exists():
            return []
        con = live.ro_connect(self.path)
        try:
            sids = [r[0] for r in con.execute("SELECT session_id FROM agent_sessions ORDER BY session_id")]
        finally:
            con.close()
        return [s for s in sids if s == owner or s.startswith(f"{owner}/")]

    def agent_reply(self, owner: str, query: str) -> AgentAnswer | None:
        """The SDK's ``Runner`` answering ``query`` with the user's session (its writes
        dropped); None when ``agent`` is off or with ``per_session`` (the audit's prompt)."""
        if not self.cfg.agent or self.cfg.per_session or self.runtime is None:
            return None
        return self._run(self._agent_reply(owner, query))

    async def _agent_reply(self, owner: str, query: str) -> AgentAnswer:
        from agents import Agent, RunConfig, Runner
        from agents.memory import SessionSettings

        assert self.runtime is not None
        if self._model is None:
            self._model = audit_model(self.runtime.model, self.cfg.agent_max_tokens)
        agent = Agent(name="assistant", instructions=self.cfg.agent_instructions, model=self._model)
        self._model.last_request, self._model.last = [], None
        t0 = time.monotonic()
        res = await Runner.run(agent, query, session=_ProbeSession(self._session(owner)),
                               run_config=RunConfig(session_settings=SessionSettings(limit=self.cfg.limit),
                                                    tracing_disabled=True))
        sent = "\n".join(m.content for m in self._model.last_request)
        # against what the session holds, not what the Runner was handed: a wrapper that drops items is caught
        shown = [it for it in await self._session(owner).get_items(self.cfg.limit) if _text(it).strip()]
        if any(_text(it) not in sent for it in shown):
            raise StudyError("openai-agents: the Runner's request lacks items of the user's session; the probe "
                             "would not read what the agent is given")
        g = self._model.last
        assert g is not None
        reply = Generation(text=str(res.final_output), prompt_tokens=g.prompt_tokens,
                           completion_tokens=g.completion_tokens, total_seconds=time.monotonic() - t0,
                           model="openai-agents:Runner")
        return AgentAnswer(reply, tuple(self._model.last_request))

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        out = []
        for sid in self._user_sessions(owner):
            items = self._run(self._session(sid).get_items(self.cfg.limit))
            out += [ContextItem(f"{sid}#{i}", _text(it)) for i, it in enumerate(items) if _text(it).strip()]
        return out

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        known = self.deletions(self.cfg)
        if operation not in known:
            raise ConfigError(f"openai-agents: unknown deletion {operation!r}; known: {', '.join(known)}"
                              + ("" if self.cfg.encrypted_ttl else f" ({TTL_EXPIRY} needs `encrypted_ttl`)"))
        if operation == TTL_EXPIRY:  # the TTL passes: every item, of every user, is older than it
            assert self.cfg.encrypted_ttl is not None
            self.clock_shift = max(self.clock_shift, self.cfg.encrypted_ttl + 1)
            return {"clock_advanced_s": self.clock_shift}
        sess = self._session(self._sid(target.owner, target.session_id))
        if operation == "clear_session":
            self._run(sess.clear_session())
            return {"cleared": sess.session_id}
        popped = 0
        while any(target.literal in json.dumps(it, ensure_ascii=False) for it in self._run(sess.get_items())):
            self._run(sess.pop_item())
            popped += 1
        return {"popped": popped}

    # ------------------------------------------------------------------ scanning
    def stores(self) -> dict[str, Iterable[str]]:
        if self.server is not None:
            return super().stores()
        if not self.path.exists():
            return {}
        tables = live.rows(self.path)
        out: dict[str, Iterable[str]] = {t: [r.text() for r in rs] for t, rs in tables.items()}
        if self.cfg.encrypted_ttl is not None and not self.read_only:
            out[DECRYPTED] = [t for r in tables.get("agent_messages", []) if (t := self._decrypt(r.values)) is not None]
        return out

    def _decrypt(self, row: dict[str, Any]) -> str | None:
        """The plaintext of an encrypted message row, with the instance's key and no TTL check."""
        try:
            env = json.loads(str(row.get("message_data")))
            token = env["payload"].encode("utf-8")
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        from cryptography.fernet import InvalidToken

        cipher = self._session(str(row.get("session_id"))).cipher
        try:
            return str(cipher.fernet.decrypt(token).decode("utf-8"))
        except InvalidToken:  # another key's row: nothing this instance's key can read
            return None

    def close(self) -> None:
        for s in self._open.values():
            under = getattr(s, "underlying_session", s)
            if hasattr(under, "engine"):  # SQLAlchemySession: its async engine's pool
                self._run(under.engine.dispose())
            else:
                under.close()
        self._open.clear()
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    # ------------------------------------------------- live instances: scan and erase
    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *, read_only: bool) -> MemorySystem:
        if isinstance(config, OpenAIAgentsConfig) and config.encrypted_ttl is not None:
            # its rows are Fernet tokens under the app's key: a scan without it would find no
            # literal another user's message quotes, and an erasure would certify that
            raise ConfigError("openai-agents: a live EncryptedSession instance can only be read with the app's key, "
                              "which traceless does not take; remove `encrypted_ttl` to scan its plaintext "
                              "columns, knowing that encrypted messages are then not searched")
        return super().attach(config, runtime, read_only=read_only)

    def owner_filter(self) -> live.OwnerSql:
        return live.id_prefix("session_id", "/")

    def row_owner(self, table: str, row: dict[str, Any]) -> str | None:
        return _row_owner(table, row)

    @classmethod
    def server_tables(cls, config: SystemConfig) -> Any:
        """``SQLAlchemySession``'s two tables on the server ``url`` names (messages first: their
        rows reference the sessions'), reached and checked before anything else."""
        assert isinstance(config, OpenAIAgentsConfig)
        if config.url is None:
            return None
        from traceless.systems.postgres import pg_tables, replica_targets, url_target

        target = url_target(config.url.get_secret_value(), "url", config.pg_compaction)
        return pg_tables(target, [config.messages_table, config.sessions_table], [], _row_owner,
                         replica_targets(config.pg_replicas or (), target), " (SQLAlchemySession's tables)")

    def init_server(self) -> None:
        assert isinstance(self.config, OpenAIAgentsConfig)
        self.cfg, self._open, self._loop, self.clock_shift, self._model = self.config, {}, None, 0, None

    def native_erasure(self, plan: ErasurePlan) -> None:
        if plan.user is not None:  # the SDK's own deletion first, then the kernel removes what it leaves
            for sid in self._user_sessions(plan.user):
                self._run(self._session(sid).clear_session())

    def execute_erasure(self, plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        out = super().execute_erasure(plan, literals)
        if self.cfg.encrypted_ttl is not None:
            out.append(self._reencrypt(literals))
        return out

    # ------------------------------------- EncryptedSession: what the rows' tokens hold
    def _decrypted_rows(self) -> list[tuple[live.Row, str]]:
        """Every ``agent_messages`` row the instance's key opens, with its plaintext (none
        without ``encrypted_ttl``, or read-only: the key is used by an open session only)."""
        if self.cfg.encrypted_ttl is None or self.read_only or not self.path.exists():
            return []
        return [(r, t) for r in live.rows(self.path).get("agent_messages", []) if (t := self._decrypt(r.values))]

    def _mine(self, r: live.Row, user: str | None) -> bool:
        return user is not None and self.row_owner("agent_messages", r.values) == user

    def scan(self, user: str | None, literals: Sequence[str], *, reveal: bool = False) -> ScanReport:
        """The rows (``SqliteInstance.scan``), and with ``encrypted_ttl`` the plaintext of each
        encrypted row (store ``agent_messages@decrypted``): a token hides a literal from the
        byte-level row scan, not from anyone holding the key."""
        rep = super().scan(user, literals, reveal=reveal)
        dec = self._decrypted_rows()
        if dec:
            rep.stores[DECRYPTED] = len(dec)
            for r, t in dec:
                n = live.count_literals(t, literals)
                if self._mine(r, user) or n:
                    rep.hits.append(ScanHit(store=DECRYPTED, record_id=r.record_id, field="message_data (decrypted)",
                                            owner_match=self._mine(r, user), owner=self.row_owner("agent_messages", r.values),
                                            literal_count=n,
                                            value=t if reveal else None))
        return rep

    def plan_erasure(self, user: str | None, literals: Sequence[str]) -> ErasurePlan:
        plan = super().plan_erasure(user, literals)
        extra = [PlannedAction(store=DECRYPTED, record_id=r.record_id, action="rewrite", reason="its token holds a literal")
                 for r, t in self._decrypted_rows() if not self._mine(r, user) and live.count_literals(t, literals)]
        return plan.model_copy(update={"actions": [*plan.actions, *extra]}) if extra else plan

    def _reencrypt(self, literals: Sequence[str]) -> StoreOutcome:
        """Every other user's row whose plaintext quotes a literal: the literal replaced, then
        encrypted again with the session's key (a new Fernet token); then VACUUM."""
        todo = [(r, t) for r, t in self._decrypted_rows() if live.count_literals(t, literals)]
        o = StoreOutcome(store=DECRYPTED, compacted=True)
        updates = []
        for r, t in todo:
            env = json.loads(str(r.values["message_data"]))
            fernet = self._session(str(r.values.get("session_id"))).cipher.fernet
            env["payload"] = fernet.encrypt(str(live.replace_literals(t, literals)).encode("utf-8")).decode("ascii")
            updates.append((json.dumps(env), r.rowid))
        self.close()
        con = sqlite3.connect(str(self.path))
        try:
            con.executemany("UPDATE agent_messages SET message_data = ? WHERE rowid = ?", updates)
            con.commit()
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            con.execute("VACUUM")  # the old tokens' pages: still decryptable with the key
        finally:
            con.close()
        o.rewritten = len(updates)
        return o

    def bystander_digests(self, user: str | None) -> dict[str, StoreDigest]:
        """With ``encrypted_ttl`` the other users' messages are compared by plaintext (the
        literals replaced): re-encryption changes every byte of a token, not what it says."""
        out = super().bystander_digests(user)
        if self.cfg.encrypted_ttl is not None and not self.read_only and self.path.exists():
            rs = live.rows(self.path).get("agent_messages", [])
            out["agent_messages"] = digest(
                f"{r.values.get('session_id')}\t"
                f"{live.replace_literals(self._decrypt(r.values) or r.text(), self._planned[0])}"
                for r in rs if not self._mine(r, user))
        return out


def _row_owner(table: str, row: dict[str, Any]) -> str | None:
    sid = row.get("session_id")
    return sid.split("/", 1)[0] if isinstance(sid, str) else None


class _Clock:
    """An ``EncryptedSession``'s Fernet with its reads' clock ``system.clock_shift`` seconds
    ahead: what the SDK's TTL check (``decrypt(token, ttl)``) sees once that time has passed."""

    def __init__(self, fernet: Any, system: OpenAIAgentsSystem) -> None:
        self.fernet, self.system = fernet, system

    def encrypt(self, data: bytes) -> bytes:
        return bytes(self.fernet.encrypt(data))

    def decrypt(self, token: bytes, ttl: int | None = None) -> bytes:
        if ttl is None:
            return bytes(self.fernet.decrypt(token))
        return bytes(self.fernet.decrypt_at_time(token, ttl, int(time.time()) + self.system.clock_shift))

    def extract_timestamp(self, token: bytes) -> int:
        return int(self.fernet.extract_timestamp(token))
