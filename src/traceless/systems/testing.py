"""A real, small memory system for tests of the erasure kernel and of the conformance suite
itself (as pydantic-ai's ``FunctionModel`` is a real model): ``DictInstance`` keeps records in
one JSON file, ``DictSystem`` is a ``MemorySystem`` over it (registered as ``dict`` only when a
test calls ``register_dict_system``, never by default).

Two stores: ``messages`` (every turn, owned by the session's user) and ``facts`` (a user
turn's text, owned by the user): a native deletion (``delete_messages``) removes the user's
messages and leaves the facts, as real systems leave derived copies. ``bug`` makes it wrong
on purpose, so a test can show the suite fails an adapter that is: ``"over-delete"`` (the
erasure also removes the records of a user whose id is a prefix of the requester's),
``"keep-fact"`` (it leaves the user's facts), ``"write-on-scan"`` (scan touches the file),
``"certify-unchecked"`` (``probe_ready`` checks nothing: a ``--certify`` whose embedder cannot
run erases, then its probe fails), ``"count-others"`` (its outcome notes count the records
left in each store: the receipt tells the requester about other users' records), ``"unlocked"``
(its erasure reads the file outside the lock and writes it back after an application's write:
what the application wrote meanwhile is lost),
``"stale-read"`` (after its erasure it reads back what it wrote, never what another writer
added: its verification misses the user's records an application wrote meanwhile).

``--certify``: the probes rank the user's records with the runtime's embedder
(``probe_instance``); ``probe_ready`` embeds one text with it before the erasure.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from traceless.memory import Session
from traceless.systems._base import (
    MEMORY_SYSTEMS,
    ContextItem,
    DeletionTarget,
    MemorySystem,
    SystemConfig,
    SystemRuntime,
    memory_system,
)
from traceless.systems._erase import StoreOutcome
from traceless.systems.contract import Capability, LiveInstance, Op, Record, Remove
from traceless.systems.kernel import replace_literals

__all__ = ["DictConfig", "DictInstance", "DictSystem", "register_dict_system"]

Bug = Literal["none", "over-delete", "keep-fact", "write-on-scan", "certify-unchecked", "count-others", "unlocked",
              "stale-read"]
STORES = ("messages", "facts")


class DictInstance(LiveInstance):
    """Records in one JSON file: ``{store: {id: {"owner": str, "text": str}}}``."""

    others_policy = "rewrite"

    def __init__(self, path: Path, bug: Bug = "none") -> None:
        self.path, self.bug = path, bug
        self._seen: dict[str, dict[str, dict[str, str]]] | None = None  # the "stale-read" bug's cache

    def load(self) -> dict[str, dict[str, dict[str, str]]]:
        if not self.path.exists():
            return {s: {} for s in STORES}
        doc: dict[str, dict[str, dict[str, str]]] = json.loads(self.path.read_text(encoding="utf-8"))
        return doc

    def save(self, doc: dict[str, dict[str, dict[str, str]]]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)

    def stores(self) -> list[str]:
        return list(STORES)

    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Record]:
        if self.bug == "write-on-scan" and self.path.exists():
            self.path.touch()
        doc = self._seen if self.bug == "stale-read" and self._seen is not None else self.load()
        for store, recs in doc.items():
            for rid, r in recs.items():
                yield Record(store, rid, r["owner"], {"text": r["text"]})

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Every read-modify-write of the file (the erasure's and the application's) holds an
        exclusive ``flock`` on the instance's lock file: without it the erasure's write-back
        loses what the application wrote in between (the suite's app check finds it)."""
        fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def apply(self, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
        if self.bug == "unlocked":
            # a lost update: the erasure reads outside the lock and writes back inside it, after
            # the application has written (waited for, not slept on: the loss is certain
            # whatever the load, and no write of the application's straddles the write-back)
            doc = self.load()
            self._wait_for_another_writer(doc)
            with self.locked():
                return self._apply(ops, literals, doc)
        with self.locked():
            out = self._apply(ops, literals, self.load())
        if self.bug == "stale-read" and self._seen is not None:
            # the application writes the erased user's memories meanwhile; this reader will not
            # see them (waited for: the bug shows whatever the load). Two of its writes: the
            # first has then returned to the application, before the verification began.
            self._wait_for_another_writer(self._seen, writes=2, owners={op.record.owner for op in ops})
        return out

    def _wait_for_another_writer(self, mine: dict[str, dict[str, dict[str, str]]], writes: int = 1,
                                 owners: set[str | None] | None = None, timeout: float = 60.0) -> None:
        """The bugs' window, made deterministic: returns once the file holds records, not in
        ``mine``, of ``writes`` sessions (another writer's writes: a record's id is
        ``user/session/turn``; of ``owners`` only, when given), or after ``timeout`` seconds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with contextlib.suppress(ValueError, OSError):  # a reader may meet the file mid-replace
                new = {rid.rpartition("/")[0] for store, recs in self.load().items() for rid, r in recs.items()
                       if rid not in mine.get(store, {}) and (owners is None or r["owner"] in owners)}
                if len(new) >= writes:
                    return
            time.sleep(0.01)

    def _apply(self, ops: Sequence[Op], literals: Sequence[str],
               doc: dict[str, dict[str, dict[str, str]]]) -> list[StoreOutcome]:
        out = {s: StoreOutcome(store=s, compacted=True) for s in STORES}
        for op in ops:
            rec = doc.get(op.record.store, {}).get(op.record.id)
            if rec is None or (self.bug == "keep-fact" and op.record.store == "facts"):
                continue
            if isinstance(op, Remove):
                del doc[op.record.store][op.record.id]
                out[op.record.store].removed += 1
                if self.bug == "over-delete":
                    self._over_delete(doc, rec["owner"])
            else:
                rec["text"] = replace_literals(rec["text"], literals)
                out[op.record.store].rewritten += 1
        self.save(doc)
        if self.bug == "stale-read":  # it reads its own last write back, never another writer's
            self._seen = doc
        if self.bug == "count-others":  # tells the requester how many records the store keeps
            for o in out.values():
                o.notes.append(f"{len(doc[o.store])} records left in the store")
        return list(out.values())

    @staticmethod
    def _over_delete(doc: dict[str, dict[str, dict[str, str]]], owner: str) -> None:
        for recs in doc.values():
            for rid in [k for k, r in recs.items() if r["owner"] != owner and owner.startswith(r["owner"])]:
                del recs[rid]

    def files(self) -> list[Path]:
        return [self.path] if self.path.exists() else []


class DictConfig(SystemConfig):
    """The dict system's config."""

    db_file: str | None = None
    """The JSON file of a live instance (``attach``); none: ``dict.json`` in the work dir."""
    bug: Bug = "none"
    """Make the system wrong on purpose (the suite's own tests)."""


class DictSystem(MemorySystem):
    """A ``MemorySystem`` over a ``DictInstance``."""

    config_class = DictConfig
    capabilities = frozenset({Capability.LIVE, Capability.ONLINE, Capability.REWRITE, Capability.CERTIFY})

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime | None,
                 *, read_only: bool = False) -> None:
        super().__init__(work_dir, config, runtime)  # type: ignore[arg-type]
        assert isinstance(config, DictConfig)
        work_dir.mkdir(parents=True, exist_ok=True)
        self.inst = DictInstance(Path(config.db_file) if config.db_file else work_dir / "dict.json", config.bug)
        self.read_only = read_only

    def write(self, sessions: Sequence[Session]) -> None:
        with self.inst.locked():
            self._write(sessions)

    def _write(self, sessions: Sequence[Session]) -> None:
        doc = self.inst.load()
        for s in sessions:
            for i, t in enumerate(s.turns):
                doc["messages"][f"{s.user_id}/{s.session_id}/{i}"] = {"owner": s.user_id, "text": t.content}
                if t.role == "user":
                    doc["facts"][f"{s.user_id}/{s.session_id}/{i}"] = {"owner": s.user_id, "text": t.content}
        self.inst.save(doc)

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        mine = [r for r in self.inst.records() if r.owner == owner]
        if self.runtime is not None:  # the query embedded, the records ranked by it, as a retrieval does
            vecs = self.runtime.embedder.embed([query, *(r.fields["text"] for r in mine)])
            scores = vecs[1:] @ vecs[0]
            mine = [mine[j] for j in sorted(range(len(mine)), key=lambda j: (-float(scores[j]), mine[j].id))]
        return [ContextItem(id=r.id, text=r.fields["text"]) for r in mine]

    def probe_instance(self, runtime: SystemRuntime) -> MemorySystem:
        return DictSystem(self.work_dir, self.config, runtime, read_only=True)

    def probe_ready(self, runtime: SystemRuntime) -> None:
        if self.inst.bug != "certify-unchecked":
            runtime.embedder.embed(["can the probes' ranking run"])

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        return ("delete_messages",)

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        with self.inst.locked():
            doc = self.inst.load()
            gone = [k for k, r in doc["messages"].items() if r["owner"] == target.owner]
            for k in gone:
                del doc["messages"][k]
            self.inst.save(doc)
        return {"removed": len(gone)}

    def stores(self) -> dict[str, Iterable[str]]:
        doc = self.inst.load()
        return {s: [r["text"] for r in doc[s].values()] for s in STORES}

    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *, read_only: bool) -> MemorySystem:
        assert isinstance(config, DictConfig) and config.db_file
        return cls(Path(config.db_file).parent, config, runtime, read_only=read_only)

    @classmethod
    def attach_config(cls, work_dir: Path, config: SystemConfig) -> SystemConfig:
        return DictConfig(db_file=str(work_dir / "dict.json"), bug=config.bug if isinstance(config, DictConfig) else "none")

    def instance(self) -> LiveInstance:
        return self.inst

    def instance_files(self) -> list[Path]:
        return self.inst.files()


def register_dict_system() -> None:
    """Register ``DictSystem`` as ``dict`` (tests only; idempotent)."""
    if "dict" not in MEMORY_SYSTEMS:
        memory_system("dict", help="a small JSON-file test system (traceless.systems.testing)")(DictSystem)
