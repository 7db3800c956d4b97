"""Named hook points for deterministic interleaving tests (no sleeps, no stress loops).

Production code calls ``point(name)`` at a place where another process could act; a test
registers a callback there with ``hooked(name, fn)`` and does that other process's work
at exactly that moment. With nothing registered a point costs one dict lookup.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

__all__ = ["point", "hooked"]

_HOOKS: dict[str, list[Callable[[], None]]] = {}


def point(name: str) -> None:
    for fn in _HOOKS.get(name, ()):
        fn()


@contextlib.contextmanager
def hooked(name: str, fn: Callable[[], None]) -> Iterator[None]:
    _HOOKS.setdefault(name, []).append(fn)
    try:
        yield
    finally:
        _HOOKS[name].remove(fn)
