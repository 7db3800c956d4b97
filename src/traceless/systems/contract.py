"""The erasure kernel's contract: what an adapter gives the kernel of a **live instance**.

Modelled on langgraph's ``BaseStore.batch(ops)``: an instance has one reader and one writer,
and every verb (``scan``, ``plan``, the bystander digest, the audit's per-store copy count,
the erasure) is the kernel's (``traceless.systems.kernel``), the same for every system:

* ``records(user, literals)``: the instance's records as ``Record(store, id, owner, fields)``;
  at least every record of ``user`` and every record whose text may hold a literal (the kernel
  decides which do, with its one match rule); with neither, every record;
* ``apply(ops, literals)``: carry out ``Remove`` / ``Rewrite`` ops, idempotently (an op on a
  record that is gone is a no-op), then the physical compaction the back end allows;
* ``stores()``: every store's name, an empty one included (an empty result stays visible);
* ``files()``: every file the instance's configured paths hold (the byte scan's input);
* ``online_bystanders(rows)`` (optional): which rows the bystander digest covers while an
  application keeps writing other users' records (default: every row as read);
* ``counts()`` (optional): every store's record count where the instance can count without
  reading every record (a server's ``count(*)``); the kernel's scan then reads only
  ``records(user, literals)`` (default None: the scan counts the full read);
* ``server_bystanders(user, literals, removed)`` (optional): the bystander rows as the instance
  digests them where they live (a server's ``md5`` per row), instead of the kernel's digest of
  every record read (default None).

What an instance can do is **declared** (``capabilities``, ``others_policy``), never probed:
the policy for another user's record that quotes an erased literal is printed in the plan
and the receipt.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from traceless.systems._erase import StoreOutcome

__all__ = ["Capability", "LiveInstance", "Op", "OthersPolicy", "Record", "Remove", "Rewrite"]


class Capability(enum.Enum):
    """What an adapter declares it can do (``MemorySystem.capabilities``)."""

    AGENT = "agent"
    """It answers a probe through its own agent (``agent_reply``: the user's graph, a Runner)."""
    LIVE = "live"
    """It attaches to the user's own instance (``attach``) for ``scan`` and ``forget``."""
    REWRITE = "rewrite"
    """It can rewrite a record in place (the literal replaced, the rest kept)."""
    CERTIFY = "certify"
    """It can probe its own retrieval after an erasure (``forget --certify``)."""
    ENCRYPTED_VIEW = "encrypted-view"
    """Some of its records are encrypted at rest and read through a key the user gives."""
    ONLINE = "online"
    """Its application may keep running during an erasure: the erasure is refused before any
    change while the instance is in use, or it is safe beside the application's writes (no
    write lost, nothing of the user written back). Without it the application must be stopped
    (LlamaIndex holds the instance in memory and writes it back whole with ``persist``; LanceDB,
    under CrewAI, removes a version's files while a reader is on them):
    the receipt says so, and ``traceless scan --since RECEIPT`` finds what a running one restored."""


OthersPolicy = Literal["rewrite", "leave"]
"""What an erasure does with another user's record that quotes an erased literal: ``rewrite``
it (the literal replaced by ``[erased]``, the rest kept, reported as rewritten), or ``leave``
it (the erasure is then refused for that literal: its bytes would stay)."""


@dataclass(frozen=True)
class Record:
    """One record of one store of a live instance, as the kernel reads it."""

    store: str
    """The store's name (``history``, ``vector_store``, a table, ``checkpoints`` …)."""
    id: str
    """The record's id in that store (primary key, point id, row id …)."""
    owner: str | None
    """The user it belongs to, by the system's own user field or namespace (None: nobody's)."""
    fields: Mapping[str, str]
    """Field name → text: what the literal match reads (and what a rewrite rewrites)."""
    linked: tuple[tuple[str, str], ...] = ()
    """(store, id) of records that go with this one when it is removed (a memory's history rows)."""
    ref: Any = field(default=None, compare=False, hash=False, repr=False)
    """The adapter's own locator for ``apply`` (a rowid, a key tuple); opaque to the kernel."""

    def text(self) -> str:
        """The fields joined (tab-separated): the record's text for digests and copy counts."""
        return "\t".join(self.fields.values())


@dataclass(frozen=True)
class Remove:
    """Remove the record."""

    record: Record
    """The record, as ``records`` returned it."""
    reason: str
    """Why (``owned by the user``, ``holds a literal``, ``history of an erased memory`` …)."""


@dataclass(frozen=True)
class Rewrite:
    """Rewrite the record without the literals (each occurrence replaced by ``[erased]``)."""

    record: Record
    """The record, as ``records`` returned it."""
    reason: str
    """Why (``holds a literal``)."""


Op = Remove | Rewrite
"""One change ``apply`` makes."""


class LiveInstance(abc.ABC):
    """A live instance of one memory system, as the kernel reads and changes it."""

    others_policy: ClassVar[OthersPolicy] = "rewrite"
    """What an erasure does with another user's record that quotes an erased literal."""

    @abc.abstractmethod
    def stores(self) -> list[str]:
        """Every store's name, empty ones included."""

    @abc.abstractmethod
    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterable[Record]:
        """At least every record of ``user`` and every record that may hold a literal; with
        neither, every record. Never writes a byte."""

    @abc.abstractmethod
    def apply(self, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
        """Carry out ``ops`` (idempotent) and compact; one outcome per store touched."""

    @abc.abstractmethod
    def files(self) -> list[Path]:
        """Every file under the instance's configured paths."""

    def compaction(self) -> list[str]:
        """What ``apply`` compacts afterwards, in words (printed in the plan)."""
        return []

    def online_bystanders(self, rows: list[tuple[tuple[str, str], str]]) -> list[tuple[tuple[str, str], str]]:
        """The bystanders the digest covers, given them as read now (((store, id), text), the
        kernel's ``bystander_rows``). Default: as read (no other writer shares the instance). An
        instance whose tables a running application keeps writing returns the first digest's
        rows less those this erasure removed (``postgres.OnlineBystanders``)."""
        return rows

    def counts(self) -> dict[str, int] | None:
        """Every store's record count, counted where the records live (a server's ``count(*)``),
        or None (the default): the kernel's scan counts the records it reads (every record)."""
        return None

    def server_bystanders(self, user: str | None, literals: Sequence[str],
                          removed: Iterable[tuple[str, str]]) -> list[tuple[tuple[str, str], str]] | None:
        """The bystanders (((store, id), digest text) of every record that is not ``user``'s and
        not in ``removed``) digested where they live, or None (the default): the kernel digests
        every record it reads. What ``online_bystanders`` is then given."""
        return None
