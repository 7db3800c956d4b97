"""One typed registry for every pluggable kind (forget modes, probes, auditors,
contracts, backends, studies, replay operators).

Adding a kind of thing is one decorated function or class::

    FORGET_MODES: Registry[ForgetMode] = Registry("forget mode")

    @FORGET_MODES.register("noop", help="control; nothing changes")
    def noop(...): ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from traceless.errors import UnknownNameError

__all__ = ["Registry", "Entry"]

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered object with its name and one-line help."""

    name: str
    obj: T
    help: str


class Registry(Generic[T]):
    """A name → object map with a decorator and helpful lookup errors."""

    def __init__(self, kind: str, hint: str = "") -> None:
        self.kind = kind
        self.hint = hint
        self._entries: dict[str, Entry[T]] = {}

    def register(self, name: str, *, help: str = "") -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            doc = help or (getattr(obj, "__doc__", None) or "").strip().splitlines()[0:1]
            text = doc if isinstance(doc, str) else (doc[0] if doc else "")
            self._entries[name] = Entry(name, obj, text)
            return obj

        return deco

    def get(self, name: str) -> T:
        try:
            return self._entries[name].obj
        except KeyError:
            raise UnknownNameError(self.kind, name, list(self._entries), self.hint) from None

    def entry(self, name: str) -> Entry[T]:
        self.get(name)
        return self._entries[name]

    def names(self) -> list[str]:
        return list(self._entries)

    def entries(self) -> list[Entry[T]]:
        return list(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
