"""``purge_results(DIR)``: remove the conversation text a study run keeps, keep its metrics.

A results dir holds the exact prompts and raw replies of every cell (``results.sqlite``
columns ``prompt``/``reply``), the generation cache (``generations.sqlite``: every prompt
and reply again) and the working memory stores (``work/``: the sessions' text). After a
purge: prompts and replies are NULL in every row, the cache and ``work/`` are deleted,
and ``results.sqlite`` is rewritten (``VACUUM``, WAL truncated) so the old pages do not
linger in the file. Metrics, timings, configs and the manifest stay, so ``traceless
report`` renders the same numbers (reports fall back to the per-cell metrics recorded at
run time). Kept: each row's ``extra`` (study bookkeeping such as the synthetic canary
and the dataset's expected answer). Freed filesystem blocks and backups are out of
reach of any file-level purge.

Purge a stopped run: a study writing into the dir at the same time would recreate the
cache. A purged dir can still be resumed (missing cells are generated afresh).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import time
from pathlib import Path

from pydantic import BaseModel

from traceless.studies._results import GENERATIONS_DB, RESULTS_DB, read_manifest

__all__ = ["PurgeSummary", "purge_results", "PURGED_MARKER"]

PURGED_MARKER = "purged.json"
"""Written into the dir after a purge (when, and what was removed)."""


class PurgeSummary(BaseModel):
    """What a purge removed."""

    rows_cleared: int
    """Rows whose prompt or reply was set to NULL."""
    removed: list[str]
    """Files and folders deleted (relative to the dir)."""
    seconds: float
    """Wall time of the purge."""


def _clear_rows(db: Path) -> int:
    conn = sqlite3.connect(str(db), isolation_level=None, timeout=30.0)
    try:
        conn.execute("PRAGMA secure_delete = ON")  # overwrite freed content as it is freed
        conn.execute("BEGIN IMMEDIATE")
        n = conn.execute("UPDATE cells SET prompt = NULL, reply = NULL "
                         "WHERE prompt IS NOT NULL OR reply IS NOT NULL").rowcount
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")  # rebuilt file: no old page survives in it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return int(n)


def purge_results(results_dir: str | Path) -> PurgeSummary:
    """Purge prompts and replies from ``results_dir`` (see the module docstring)."""
    t0 = time.perf_counter()
    d = Path(results_dir)
    read_manifest(d)  # a results dir, or a StudyError saying what it is not
    removed: list[str] = []
    for name in (GENERATIONS_DB, f"{GENERATIONS_DB}-wal", f"{GENERATIONS_DB}-shm", f"{GENERATIONS_DB}-journal"):
        p = d / name
        if p.exists():
            p.unlink()
            removed.append(name)
    if (d / "work").is_dir():
        shutil.rmtree(d / "work")
        removed.append("work/")
    n = _clear_rows(d / RESULTS_DB) if (d / RESULTS_DB).exists() else 0
    summary = PurgeSummary(rows_cleared=n, removed=removed, seconds=time.perf_counter() - t0)
    with contextlib.suppress(OSError):
        (d / PURGED_MARKER).write_text(json.dumps({"purged_at": time.time(), **summary.model_dump()}, indent=1))
    return summary
