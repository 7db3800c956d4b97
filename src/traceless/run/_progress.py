"""The one progress bar of long work (studies, the audit, requests across a deployment):
rich's bar on stderr with the count, elapsed time and ETA, and what is running beside it."""

from __future__ import annotations

from typing import Any

__all__ = ["progress_bar"]


def progress_bar(unit: str) -> Any:
    """A ``rich.progress.Progress`` counting ``unit`` on stderr; a task's ``what`` field is shown
    beside it (names of phases, groups or instances only: never a user id or a secret)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[what]}"),
                    console=Console(stderr=True), transient=False)
