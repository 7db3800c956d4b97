"""``purge_results(DIR)``: remove the conversation text a results dir keeps, keep its metrics.

Every layout the project writes is covered:

* a study dir (``traceless study run``): ``results.sqlite`` (columns ``prompt``/``reply``
  and each row's ``extra``), the generation caches and ``work/`` (the sessions' text);
* an audit dir (``traceless audit --out DIR``, study ``memory-audit``): the same, plus
  ``results.jsonl`` or, with ``--format parquet``, ``results.parquet`` (every probe row
  again, prompt and reply included);
* an export bundle (``traceless study export``): holds no conversation text; nothing to do.

After a purge: prompts and replies are NULL in every row of ``results.sqlite`` and of
``results.jsonl``/``results.parquet``; each row's ``extra`` keeps only what the study's export keeps
(``Study.bundle_extra``: labels, ids and flags; the canary, probe and expected answer
go; an audit keeps its context ids, request order and the deletion notes, which were
redacted when written, dropped when the audit ran with ``--reveal``); every
``*generations.sqlite`` cache and ``work/`` are deleted; ``results.sqlite`` is rewritten
(``VACUUM``, WAL truncated) so the old pages do not linger in the file. Then every file
left in the dir is scanned for the prompts and replies that were there (up to
``CHECKED_TEXTS`` of them, 24 characters or longer; ``report/`` excepted); one still found stops with a
``StudyError`` naming the file (a byte scan: it does not see into compressed files such
as Parquet, whose text columns the purge nulls itself). Metrics, timings, configs and the manifest stay, so
``traceless report`` renders the same numbers. Freed filesystem blocks and backups are
out of reach of any file-level purge.

Purge a stopped run: a study writing into the dir at the same time would recreate the
cache. A purged dir can still be resumed (missing cells are generated afresh).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from traceless.errors import StudyError
from traceless.run._results import GENERATIONS_DB, RESULTS_DB, Manifest, read_manifest

__all__ = ["CHECKED_TEXTS", "PurgeSummary", "purge_results", "PURGED_MARKER"]

PURGED_MARKER = "purged.json"
"""Written into the dir after a purge (when, and what was removed)."""
AUDIT_ROWS = "results.jsonl"
"""An audit dir's export of its probe rows (prompt and reply included)."""
AUDIT_PARQUET = "results.parquet"
"""The same export written by ``traceless audit --format parquet`` (in a dir that has ``results.sqlite``)."""
AUDIT_EXTRA = ("context_ids", "order", "notes")
"""What an audit's rows keep in ``extra`` after a purge (``notes`` only when not ``--reveal``)."""
CHECKED_TEXTS = 500
"""Prompts and replies the leftover scan looks for (a deterministic sample of the distinct ones)."""
_MIN_TEXT = 24


class PurgeSummary(BaseModel):
    """What a purge removed."""

    layout: str = "study"
    """``study``, ``audit`` or ``bundle`` (see the module docstring)."""
    rows_cleared: int
    """Rows whose prompt or reply was set to NULL (``results.sqlite`` and ``results.jsonl``)."""
    extra_trimmed: int = 0
    """Rows whose ``extra`` lost keys that are not labels (see the module docstring)."""
    removed: list[str]
    """Files and folders deleted (relative to the dir)."""
    texts_checked: int = 0
    """Distinct prompts/replies the leftover scan looked for in every remaining file (none found)."""
    seconds: float
    """Wall time of the purge."""


def _keep_paths(man: Manifest) -> tuple[str, ...]:
    """The ``extra`` paths a purged row keeps: the study's export rule (an audit: its own)."""
    from traceless.run._study import registered_studies

    studies = registered_studies()

    if man.study in studies.names():
        return tuple(studies.get(man.study).bundle_extra)
    return tuple(p for p in AUDIT_EXTRA if p != "notes" or not man.config.get("reveal", False))


def _texts(prompt: Any, reply: Any) -> Iterable[str]:
    if isinstance(reply, str):
        yield reply
    if isinstance(prompt, str):  # a raw column value (JSON text of the messages)
        with contextlib.suppress(ValueError):
            prompt = json.loads(prompt)
    if isinstance(prompt, list):
        yield from (m["content"] for m in prompt if isinstance(m, dict) and isinstance(m.get("content"), str))


def _clear_rows(db: Path, keep: tuple[str, ...], seen: set[str]) -> tuple[int, int]:
    """NULL prompt/reply, trim extra, VACUUM; the texts cleared go into ``seen``."""
    from traceless.run._bundle import _project

    conn = sqlite3.connect(str(db), isolation_level=None, timeout=30.0)
    try:
        conn.execute("PRAGMA secure_delete = ON")  # overwrite freed content as it is freed
        conn.execute("BEGIN IMMEDIATE")
        cleared = trimmed = 0
        for rowid, prompt, reply, extra in conn.execute("SELECT rowid, prompt, reply, extra FROM cells").fetchall():
            seen.update(_texts(prompt, reply))
            old = json.loads(extra)
            new = _project(old, keep)
            if prompt is not None or reply is not None:
                cleared += 1
            if new != old:
                trimmed += 1
            if prompt is not None or reply is not None or new != old:
                conn.execute("UPDATE cells SET prompt = NULL, reply = NULL, extra = ? WHERE rowid = ?",
                             (json.dumps(new, sort_keys=True, ensure_ascii=False, default=str), rowid))
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")  # rebuilt file: no old page survives in it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.DatabaseError as e:
        raise StudyError(f"{db} is not a readable results store ({e}); nothing was purged from it") from None
    finally:
        conn.close()
    return cleared, trimmed


def _clear_jsonl(path: Path, seen: set[str]) -> int:
    """An audit's ``results.jsonl`` rewritten with prompt and reply null (atomically)."""
    lines, cleared = [], 0
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise StudyError(f"{path} line {n} is not JSON; the file is damaged: delete it (the rows are "
                             f"in {RESULTS_DB}) and purge again") from None
        if not isinstance(row, dict):
            raise StudyError(f"{path} line {n} is not a row object; delete the file and purge again")
        seen.update(_texts(row.get("prompt"), row.get("reply")))
        if row.get("prompt") is not None or row.get("reply") is not None:
            cleared += 1
        row["prompt"] = row["reply"] = None
        lines.append(json.dumps(row, ensure_ascii=False) + "\n")
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write("".join(lines))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return cleared


def _clear_parquet(path: Path, seen: set[str]) -> int:
    """An audit's ``results.parquet`` rewritten with prompt and reply null (atomically)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as e:
        raise StudyError(f"{path} is not readable Parquet ({e}); delete it (the rows are in {RESULTS_DB}) "
                         "and purge again") from None
    cleared = 0
    for row in table.select([c for c in ("prompt", "reply") if c in table.column_names]).to_pylist():
        seen.update(_texts(row.get("prompt"), row.get("reply")))
        cleared += row.get("prompt") is not None or row.get("reply") is not None
    for col in ("prompt", "reply"):
        if col in table.column_names:
            i = table.column_names.index(col)
            table = table.set_column(i, col, pa.nulls(len(table), type=table.schema.field(col).type))
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return cleared


def _remove_caches(d: Path) -> list[str]:
    removed = []
    for p in sorted(d.glob(f"*{GENERATIONS_DB}*")):
        if p.is_file() and p.name.split(GENERATIONS_DB)[1] in ("", "-wal", "-shm", "-journal"):
            p.unlink()
            removed.append(p.name)
    if (d / "work").is_dir():
        shutil.rmtree(d / "work")
        removed.append("work/")
    return removed


def _sample(texts: set[str]) -> list[bytes]:
    """Up to CHECKED_TEXTS distinct long texts, chosen by digest (the same set every time)."""
    long = {t.encode("utf-8", "surrogatepass") for t in texts if len(t) >= _MIN_TEXT}
    return sorted(long, key=lambda b: hashlib.sha256(b).digest())[:CHECKED_TEXTS]


def _leftovers(d: Path, needles: list[bytes]) -> dict[str, int]:
    """File (relative to ``d``) → how many of ``needles`` it still holds (``report/``, rendered
    from the metrics, is not scanned: a report may quote a study's own probe wording)."""
    found: dict[str, int] = {}
    for p in sorted(d.rglob("*")):
        if p.is_file() and not p.is_symlink() and p.relative_to(d).parts[0] != "report":
            blob = p.read_bytes()
            n = sum(1 for t in needles if t in blob)
            if n:
                found[str(p.relative_to(d))] = n
    return found


def purge_results(results_dir: str | Path) -> PurgeSummary:
    """Purge prompts and replies from ``results_dir`` (see the module docstring)."""
    from traceless.run._bundle import is_bundle

    t0 = time.perf_counter()
    d = Path(results_dir)
    man = read_manifest(d)  # a results dir, or a StudyError saying what it is not
    if is_bundle(d):
        return PurgeSummary(layout="bundle", rows_cleared=0, removed=[], seconds=time.perf_counter() - t0)
    layout = "audit" if man.study not in _study_names() else "study"
    seen: set[str] = set()
    removed = _remove_caches(d)
    cleared = trimmed = 0
    if (d / RESULTS_DB).exists():
        cleared, trimmed = _clear_rows(d / RESULTS_DB, _keep_paths(man), seen)
    if (d / AUDIT_ROWS).exists():
        cleared += _clear_jsonl(d / AUDIT_ROWS, seen)
    if (d / AUDIT_PARQUET).exists():
        cleared += _clear_parquet(d / AUDIT_PARQUET, seen)
    needles = _sample(seen)
    left = _leftovers(d, needles)
    if left:
        where = ", ".join(f"{f} ({n})" for f, n in left.items())
        raise StudyError(f"{d}: after the purge these files still hold prompts or replies of the run: {where}; "
                         "traceless does not know them: delete them by hand")
    summary = PurgeSummary(layout=layout, rows_cleared=cleared, extra_trimmed=trimmed, removed=removed,
                           texts_checked=len(needles), seconds=time.perf_counter() - t0)
    with contextlib.suppress(OSError):
        (d / PURGED_MARKER).write_text(json.dumps({"purged_at": time.time(), **summary.model_dump()}, indent=1))
    return summary


def _study_names() -> list[str]:
    from traceless.run._study import registered_studies

    studies = registered_studies()

    return list(studies.names())
