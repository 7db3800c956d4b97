"""Run the traceless CLI in-process and return its exit code (not a test module)."""

from __future__ import annotations

from traceless.cli import main


def cli(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as e:
        return int(e.code or 0)
    return 0
