"""The progress bar of long commands (``audit``, ``forget --deployment``, ``scan --deployment``,
``export``): rich's bar with elapsed time and ETA on stderr, shown only when stderr is a
terminal (never in a pipe, a log or CI), so ``--json`` on stdout stays one document. Names
of phases and instances only: no user id, literal or secret is ever shown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Advance", "progress_bar"]

Advance = Callable[[int, int, str], None]
"""``advance(done, total, what)``: the bar at ``done`` of ``total``, ``what`` beside it."""


@contextmanager
def progress_bar(label: str, unit: str) -> Iterator[Advance]:
    """A bar for ``label`` counting ``unit`` (``users``, ``instances``); a no-op off a terminal."""
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield lambda done, total, what: None
        return
    from rich.markup import escape

    from traceless.run import progress_bar as rich_bar

    bar = rich_bar(unit)
    task = bar.add_task(escape(label), total=None, what="")

    def advance(done: int, total: int, what: str) -> None:
        bar.update(task, completed=done, total=total, what=escape(what))

    with bar:
        yield advance
