"""Native runtimes that cannot survive CPython's finalization.

Some packages an adapter drives start native worker threads that call into Python at any
time and are never told the interpreter is ending. lancedb 0.30 (the line crewai 1.15 pins,
``lancedb<0.30.1``) is one: its shared Tokio runtime's workers can release a GIL state while
``Py_FinalizeEx`` tears the thread states down, and the process aborts with ``Fatal Python
error: PyGILState_Release`` (exit -6) after a correct report: measured 1 in 40 scans here,
the upstream fix (lancedb#4175, an atexit shutdown of that runtime) is in releases crewai
does not admit. An adapter names such a module here; the ``traceless`` script then ends a
process in which the module was loaded after its atexit handlers, with stdout and stderr
flushed, without finalizing (``os._exit``). Nothing traceless writes is left open at that
point: receipts, logs and state files are written and closed inside the command.
"""

from __future__ import annotations

import sys

__all__ = ["unsafe_at_finalization", "finalization_unsafe"]

_UNSAFE: dict[str, str] = {}


def unsafe_at_finalization(module: str, why: str) -> None:
    """Declare that a process in which ``module`` was imported must not be finalized
    (``why``: the defect, for ``traceless`` to name). Idempotent."""
    _UNSAFE[module] = why


def finalization_unsafe() -> list[str]:
    """Why this process must end without finalizing: one line per declared module that is
    loaded now; empty when finalizing is safe."""
    return [f"{m}: {why}" for m, why in sorted(_UNSAFE.items()) if m in sys.modules]
