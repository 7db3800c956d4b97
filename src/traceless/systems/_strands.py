"""Strands Agents sessions (``strands-agents``): the ``FileSessionManager`` directory, written
through Strands' own session repository API, scanned and erased through the erasure kernel.

A live instance is the manager's ``storage_dir``: ``session_<id>/session.json``, per agent
``agents/agent_<id>/agent.json`` and ``messages/message_<n>.json``. Every JSON file is one
record (store ``sessions``, ``agents``, ``messages`` or ``multi_agents``); a file belongs to
the user of its session: the ``user_id`` an agent of the session keeps in its state, else the
user the session id names under ``session_template`` (``{user_id}__{session_id}``, whole ids
only). The erasure runs Strands' own ``delete_session`` for every session of the user, then
the kernel removes what is left and rewrites another user's file that quotes a literal (the
literal replaced, the file written to a new name and renamed over the old one, as Strands
writes its files).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import Field

from traceless.errors import ConfigError
from traceless.memory import Session
from traceless.systems import (
    Capability,
    ContextItem,
    DeletionTarget,
    ErasurePlan,
    LiveInstance,
    MemorySystem,
    Op,
    Record,
    Remove,
    StoreOutcome,
    SystemConfig,
    SystemRuntime,
    memory_system,
)
from traceless.systems.kernel import replace_literals

__all__ = ["StrandsConfig", "StrandsSystem"]

AGENT = "default"
STORES = {"session.json": "sessions", "agent.json": "agents"}


class StrandsConfig(SystemConfig):
    """Settings of the Strands Agents adapter."""

    storage_dir: str | None = None
    """The live instance: the ``FileSessionManager``'s ``storage_dir`` (``scan``/``forget``)."""
    session_template: str = "{user_id}__{session_id}"
    """How a user's conversation is named as a Strands session id (whole ids are matched)."""
    k: int = Field(20, ge=1)
    """Messages of the user's sessions shown to the agent."""


def _store(path: Path) -> str:
    if path.name in STORES:
        return STORES[path.name]
    return "multi_agents" if "multi_agents" in path.parts else "messages"


class StrandsFiles(LiveInstance):
    """A ``FileSessionManager`` directory as the erasure kernel reads and changes it."""

    others_policy = "rewrite"

    def __init__(self, root: Path, template: str) -> None:
        self.root = root
        pattern = re.escape(template).replace(r"\{user_id\}", "(?P<user_id>.+?)").replace(r"\{session_id\}", ".+")
        self.rx = re.compile(f"^{pattern}$")

    def _owner(self, session_dir: Path) -> str | None:
        for agent in sorted(session_dir.glob("agents/agent_*/agent.json")):
            user = json.loads(agent.read_text(encoding="utf-8")).get("state", {}).get("user_id")
            if isinstance(user, str):
                return user
        m = self.rx.match(session_dir.name.removeprefix("session_"))
        return m.group("user_id") if m else None

    def stores(self) -> list[str]:
        return ["sessions", "agents", "messages", "multi_agents"]

    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Record]:
        for session_dir in sorted(self.root.glob("session_*")) if self.root.is_dir() else []:
            owner = self._owner(session_dir)
            for f in sorted(session_dir.rglob("*.json")):
                rel = str(f.relative_to(self.root))
                yield Record(_store(f), rel, owner, {"json": f.read_text(encoding="utf-8")}, ref=f)

    def files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*") if p.is_file()) if self.root.is_dir() else []

    def apply(self, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
        out = {s: StoreOutcome(store=s, compacted=False) for s in self.stores()}
        for op in ops:
            path = self.root / op.record.id
            if not path.is_file():
                continue
            if isinstance(op, Remove):
                path.unlink()
                out[op.record.store].removed += 1
                continue
            text = path.read_text(encoding="utf-8")
            new = replace_literals(text, literals)
            json.loads(new)  # still the JSON Strands reads
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".traceless_", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                f.write(new)
            os.replace(tmp, path)
            out[op.record.store].rewritten += 1
        return [o for o in out.values() if o.removed or o.rewritten]


@memory_system("strands", help="Strands Agents FileSessionManager sessions; deletion delete_session")
class StrandsSystem(MemorySystem):
    """Strands sessions in ``work_dir/sessions`` (an audit) or the user's ``storage_dir``."""

    extra = "strands"
    install_note = "in the CrewAI/ADK venv (`pip install torch==2.13.0 -e '.[test,crewai,adk,strands]'`)"
    requires = ("strands",)
    config_class = StrandsConfig
    capabilities = frozenset({Capability.LIVE, Capability.ONLINE, Capability.REWRITE})

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime | None, *,
                 storage: Path | None = None, read_only: bool = False) -> None:
        super().__init__(work_dir, config, runtime)  # type: ignore[arg-type]
        assert isinstance(config, StrandsConfig)
        self.cfg, self.read_only = config, read_only
        self.storage = storage or work_dir / "sessions"

    @cached_property
    def files_view(self) -> StrandsFiles:
        return StrandsFiles(self.storage, self.cfg.session_template)

    def _manager(self, session_id: str) -> Any:
        from strands.session.file_session_manager import FileSessionManager

        return FileSessionManager(session_id=session_id, storage_dir=str(self.storage))

    def write(self, sessions: Sequence[Session]) -> None:
        from strands.types.session import SessionAgent, SessionMessage

        for s in sessions:
            sid = self.cfg.session_template.format(user_id=s.user_id, session_id=s.session_id)
            mgr = self._manager(sid)
            if mgr.read_agent(sid, AGENT) is None:
                mgr.create_agent(sid, SessionAgent(agent_id=AGENT, state={"user_id": s.user_id},
                                                   conversation_manager_state={}))
            start = len(mgr.list_messages(sid, AGENT))
            for i, t in enumerate(t for t in s.turns if t.role in ("user", "assistant")):
                msg = {"role": t.role, "content": [{"text": t.content}]}
                mgr.create_message(sid, AGENT, SessionMessage(message=msg, message_id=start + i))

    def _sessions(self, owner: str) -> list[str]:
        return [d.name.removeprefix("session_") for d in sorted(self.storage.glob("session_*"))
                if self.files_view._owner(d) == owner]

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        out: list[ContextItem] = []
        for sid in self._sessions(owner):
            for m in self._manager(sid).list_messages(sid, AGENT):
                text = " ".join(str(c.get("text", "")) for c in m.message["content"])
                out.append(ContextItem(id=f"{sid}/{m.message_id}", text=text))
        return out[-self.cfg.k:]

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        return ("delete_session",)

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        self.check_deletion(operation)
        sid = self.cfg.session_template.format(user_id=target.owner, session_id=target.session_id)
        self._manager(sid).delete_session(sid)
        return {"deleted_session": sid}

    def stores(self) -> dict[str, Iterable[str]]:
        out: dict[str, list[str]] = {s: [] for s in self.files_view.stores()}
        for r in self.files_view.records():
            out[r.store].append(r.text())
        return dict(out)

    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *, read_only: bool) -> MemorySystem:
        if not isinstance(config, StrandsConfig) or not config.storage_dir:
            raise ConfigError("strands: give the live instance's FileSessionManager directory (`storage_dir`)")
        root = Path(config.storage_dir).expanduser()
        if not root.is_dir():
            raise ConfigError(f"strands: {root} does not exist; give the FileSessionManager's storage_dir")
        return cls(root.parent, config, runtime, storage=root, read_only=read_only)

    @classmethod
    def attach_config(cls, work_dir: Path, config: SystemConfig) -> SystemConfig | None:
        assert isinstance(config, StrandsConfig)
        return config.model_copy(update={"storage_dir": str(work_dir / "sessions")})

    def instance(self) -> LiveInstance:
        return self.files_view

    def instance_files(self) -> list[Path]:
        return self.files_view.files()

    def native_erasure(self, plan: ErasurePlan) -> None:
        if plan.user is not None:  # Strands' own deletion first, then the kernel removes what it leaves
            for sid in self._sessions(plan.user):
                self._manager(sid).delete_session(sid)
