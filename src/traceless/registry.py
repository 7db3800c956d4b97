"""One typed registry for every pluggable kind (forget modes, probes, auditors,
contracts, backends, embedders, studies, memory systems, replay operators), and one door for
plug-ins: the entry-point groups in ``ENTRY_POINT_GROUPS``.

Adding a kind of thing is one decorated function or class::

    FORGET_MODES: Registry[ForgetMode] = Registry("forget mode", entry_points="traceless.forget_modes")

    @FORGET_MODES.register("noop", help="control; nothing changes")
    def noop(...): ...

A third-party package registers through the same decorator: its entry point (in the group of
the kind) names a module, and importing that module runs the decorator. The built-ins come
through the same door (simonw/llm's ``DEFAULT_PLUGINS``): a registry's ``defaults`` name the
in-tree modules that register its built-ins, and they are imported, in that order, the first
time the registry is listed or asked for a name it does not hold, just before the entry
points of its group. So importing the package of a registry imports none of its built-ins
(nor mem0, LangGraph, ...), and listing is the same whatever was imported first: built-ins
in ``defaults`` order, then plug-ins in discovery order. A plug-in that fails to import is a
``PluginWarning`` naming its package, never an error of the command; a built-in that fails
to import is a bug of traceless and raises.
"""

from __future__ import annotations

import importlib
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Generic, TypeVar

from traceless.errors import UnknownNameError

__all__ = ["ENTRY_POINT_GROUPS", "Entry", "PluginWarning", "Registry", "load_plugins"]

T = TypeVar("T")

ENTRY_POINT_GROUPS = {
    "memory system": "traceless.memory_systems",
    "forget mode": "traceless.forget_modes",
    "backend": "traceless.backends",
    "embedder": "traceless.embedders",
    "study": "traceless.studies",
}
"""The entry-point group of every pluggable kind (``pyproject.toml``:
``[project.entry-points."traceless.forget_modes"] mine = "my_pkg.modes"``)."""


class PluginWarning(UserWarning):
    """A third-party plug-in could not be loaded; it is skipped, nothing else is affected."""


def _dist(ep: metadata.EntryPoint) -> str:
    return ep.dist.name if ep.dist is not None else "an unknown package"


def load_plugins(group: str, kind: str) -> Iterator[tuple[metadata.EntryPoint, object]]:
    """Load every entry point of ``group``: ``(entry point, loaded object)`` each. One that
    fails to import is a ``PluginWarning`` that names its package and is skipped."""
    for ep in metadata.entry_points(group=group):
        dist = _dist(ep)
        try:
            obj = ep.load()
        except Exception as e:  # a broken plug-in must not break `traceless`: it is a warning
            warnings.warn(f"{kind} plug-in {ep.name!r} ({ep.value}) of {dist} failed to import "
                          f"({type(e).__name__}: {e}); skipped: fix or uninstall {dist}", PluginWarning,
                          stacklevel=3)
            continue
        yield ep, obj


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered object with its name and one-line help."""

    name: str
    obj: T
    help: str
    module: str = ""
    """The module that registered it (the decorated object's ``__module__`` unless given)."""


class Registry(Generic[T]):
    """A name → object map with a decorator and helpful lookup errors."""

    def __init__(self, kind: str, hint: str = "", *, entry_points: str | None = None,
                 defaults: Sequence[str] = ()) -> None:
        self.kind = kind
        self.hint = hint
        self.group = entry_points
        """The entry-point group of this kind's plug-ins (None: built-ins only)."""
        self.defaults = tuple(defaults)
        """The in-tree modules that register the built-ins, imported in this order on first use."""
        self._entries: dict[str, Entry[T]] = {}
        self._discovered = entry_points is None and not self.defaults
        self._loading = False
        self._lock = threading.RLock()
        self.adopt: Callable[[str, object], bool] | None = None
        """How a plug-in object that its module's import did not register is registered under
        its entry point's name (returns False when it is not one of this kind; None: never)."""

    def discover(self, *, force: bool = False) -> list[str]:
        """Load the built-ins (``defaults``), then this kind's plug-ins (once; ``force``:
        again); returns the names the plug-ins added."""
        if self._discovered and not force:
            return []
        with self._lock:  # another thread's first lookup waits for the full registry
            if (self._discovered and not force) or self._loading:  # _loading: a default's own import
                return []
            self._loading = True
            try:
                added = self._load()
            finally:
                self._loading = False
            self._discovered = True
            return added

    def _load(self) -> list[str]:
        for module in self.defaults:
            importlib.import_module(module)
        self._builtins_first()
        before = set(self._entries)
        for ep, obj in load_plugins(self.group, self.kind) if self.group is not None else ():
            if ep.name not in self._entries and not (self.adopt is not None and self.adopt(ep.name, obj)):
                warnings.warn(f"entry point {ep.name!r} = {ep.value} of {_dist(ep)} is not a traceless "
                              f"{self.kind} (its import registered none named {ep.name!r}); skipped: fix or "
                              f"uninstall {_dist(ep)}", PluginWarning, stacklevel=3)
        return [n for n in self._entries if n not in before]

    def _builtins_first(self) -> None:
        """Order the entries: built-ins by their module's place in ``defaults`` (a built-in
        module imported before the registry was first used registered early), then the rest."""
        rank = {m: i for i, m in enumerate(self.defaults)}

        def place(e: Entry[T]) -> int:
            return min((i for m, i in rank.items() if e.module == m or e.module.startswith(m + ".")),
                       default=len(rank))

        self._entries = {e.name: e for e in sorted(self._entries.values(), key=place)}

    def register(self, name: str, *, help: str = "", module: str | None = None) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            doc = help or (getattr(obj, "__doc__", None) or "").strip().splitlines()[0:1]
            text = doc if isinstance(doc, str) else (doc[0] if doc else "")
            where = module if module is not None else str(getattr(obj, "__module__", "") or "")
            self._entries[name] = Entry(name, obj, text, where)
            return obj

        return deco

    def get(self, name: str) -> T:
        if name not in self._entries:
            self.discover()
        try:
            return self._entries[name].obj
        except KeyError:
            raise UnknownNameError(self.kind, name, list(self._entries), self.hint) from None

    def entry(self, name: str) -> Entry[T]:
        self.get(name)
        return self._entries[name]

    def names(self) -> list[str]:
        self.discover()
        return list(self._entries)

    def entries(self) -> list[Entry[T]]:
        self.discover()
        return list(self._entries.values())

    def __contains__(self, name: object) -> bool:
        if name not in self._entries:
            self.discover()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self.discover()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self.discover()
        return len(self._entries)
