"""The results store of a study run: one append-only SQLite file (WAL) plus a manifest.

Layout of an out dir::

    DIR/manifest.json       study name, study version, results format, config, runs
    DIR/results.sqlite      one row per finished cell (this module)
    DIR/generations.sqlite  the generation cache (traceless.models.CachingBackend)
    DIR/work/               scratch files of the study (memory files, copies)
    DIR/report/             written by ``traceless report DIR``

A row is written (and committed, ``synchronous=FULL``) the moment its cell finishes, so a
killed run loses at most the cells in flight. Rows are never updated: a resumed run skips
every (model, cell key) already present.

This module only reads and writes files; it never calls a model, so the report layer
uses it to read results.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from traceless._rows import StoredRow
from traceless.errors import ResumeError, StudyError

__all__ = [
    "RESULTS_FORMAT",
    "MANIFEST",
    "RESULTS_DB",
    "GENERATIONS_DB",
    "RunRecord",
    "Manifest",
    "ResultRow",
    "ResultsStore",
    "StoredRow",
    "read_manifest",
    "write_manifest",
    "atomic_write",
]

RESULTS_FORMAT = 1
"""Version of the out-dir layout and row schema; a dir with another format is not resumed."""
MANIFEST = "manifest.json"
RESULTS_DB = "results.sqlite"
GENERATIONS_DB = "generations.sqlite"


class RunRecord(BaseModel):
    """One model's run inside a results dir (a dir may hold several models)."""

    model_tag: str
    """The name the model was given on the command line (``--model``); rows are keyed by it."""
    identity: dict[str, Any]
    """``backend.describe()`` of the model (weights digest, backend kind); checked on resume."""
    code_version: str
    """traceless.code_version() of the most recent (re)start."""
    started: float
    """Unix time of the first start."""
    updated: float
    """Unix time of the most recent (re)start or finish."""
    cells_total: int = 0
    """Cells in the grid at the most recent (re)start."""
    cells_done: int = 0
    """Cells present in the results store at the most recent finish or interruption."""
    finished: bool = False
    """True once every cell of the grid has a row."""
    seconds: float = 0.0
    """Wall time summed over every (re)start of this model's run."""


class Manifest(BaseModel):
    """What a results dir holds; written atomically next to the results store."""

    study: str
    """Registered study name; a dir is only resumed by the same study."""
    study_version: str
    """The study's version string; a dir is only resumed by the same version."""
    results_format: int = RESULTS_FORMAT
    """Layout version of the dir (``RESULTS_FORMAT``)."""
    config: dict[str, Any]
    """The study config (pydantic dump) of the most recent (re)start."""
    created: float
    """Unix time the dir was created."""
    code_version: str
    """traceless.code_version() when the dir was created."""
    runs: dict[str, RunRecord] = Field(default_factory=dict)
    """Per model tag: identity and progress."""


def read_manifest(out_dir: str | Path) -> Manifest:
    """The manifest of a results dir, or ``StudyError`` saying what is missing."""
    p = Path(out_dir) / MANIFEST
    if not p.exists():
        raise StudyError(
            f"{out_dir} is not a study results dir (no {MANIFEST}); "
            "make one with `traceless study run NAME --out DIR`"
        )
    try:
        return Manifest.model_validate_json(p.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ResumeError(f"{p} is not a valid manifest ({str(e).splitlines()[0]}); the dir is damaged") from None


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temp name next to it, fsync, rename (a reader
    sees the old file or the whole new one)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_manifest(out_dir: str | Path, manifest: Manifest) -> None:
    """Atomic write (temp file, fsync, rename)."""
    atomic_write(Path(out_dir) / MANIFEST, manifest.model_dump_json(indent=2))


class ResultRow(StoredRow):
    """One finished cell as stored."""

    model_tag: str
    """Model tag of the run that produced it."""
    key: str
    """Cell key, unique per model in the dir."""
    group: str
    """The cell's group (cells sharing setup, e.g. one instance's memory)."""
    timing: dict[str, Any]
    """Seconds and token counts."""
    metrics: dict[str, Any]
    """Metric fields of the cell."""
    extra: dict[str, Any]
    """Anything else the study keeps (context ids, tiers …)."""
    created: float
    """Unix time the row was written."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS cells (
    model_tag    TEXT NOT NULL,
    key          TEXT NOT NULL,
    grp          TEXT NOT NULL,
    config       TEXT NOT NULL,
    seed         INTEGER NOT NULL,
    model        TEXT NOT NULL,
    code_version TEXT NOT NULL,
    prompt       TEXT,
    reply        TEXT,
    timing       TEXT NOT NULL,
    metrics      TEXT NOT NULL,
    extra        TEXT NOT NULL,
    created      REAL NOT NULL,
    PRIMARY KEY (model_tag, key)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_COLS = "model_tag, key, grp, config, seed, model, code_version, prompt, reply, timing, metrics, extra, created"


_INSERT = f"INSERT OR IGNORE INTO cells({_COLS}) VALUES ({','.join('?' * 13)})"


def _values(row: ResultRow) -> tuple[Any, ...]:
    return (
        row.model_tag, row.key, row.group, json.dumps(row.config, sort_keys=True, default=str), row.seed,
        json.dumps(row.model, sort_keys=True, default=str), row.code_version,
        None if row.prompt is None else json.dumps(row.prompt, ensure_ascii=False, default=str),
        row.reply, json.dumps(row.timing, sort_keys=True), json.dumps(row.metrics, sort_keys=True, default=str),
        json.dumps(row.extra, sort_keys=True, ensure_ascii=False, default=str), row.created,
    )


def _row(r: tuple[Any, ...]) -> ResultRow:
    return ResultRow(
        model_tag=r[0], key=r[1], group=r[2], config=json.loads(r[3]), seed=r[4], model=json.loads(r[5]),
        code_version=r[6], prompt=None if r[7] is None else json.loads(r[7]), reply=r[8],
        timing=json.loads(r[9]), metrics=json.loads(r[10]), extra=json.loads(r[11]), created=r[12],
    )


class ResultsStore:
    """Append-only cell rows in ``DIR/results.sqlite``. Thread-safe."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        if readonly and not self.path.exists():
            raise StudyError(f"{self.path} does not exist; the dir holds no results yet")
        try:
            if readonly:
                self._conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            else:
                self._conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False,
                                             timeout=30.0)
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = FULL")
                self._conn.executescript(_SCHEMA)
                self._conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('format', ?)",
                                   (str(RESULTS_FORMAT),))
        except sqlite3.DatabaseError as e:
            raise StudyError(f"{self.path} is not a results store ({e}); use a fresh --out dir") from None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def format(self) -> int:
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        return int(row[0]) if row else RESULTS_FORMAT

    def done_keys(self, model_tag: str) -> set[str]:
        with self._lock:
            return {r[0] for r in self._conn.execute("SELECT key FROM cells WHERE model_tag = ?", (model_tag,))}

    def count(self, model_tag: str | None = None) -> int:
        with self._lock:
            if model_tag is None:
                return int(self._conn.execute("SELECT COUNT(*) FROM cells").fetchone()[0])
            return int(self._conn.execute("SELECT COUNT(*) FROM cells WHERE model_tag = ?",
                                          (model_tag,)).fetchone()[0])

    def add(self, row: ResultRow) -> bool:
        """Insert one row (committed at once). False when the key was already present."""
        with self._lock:
            cur = self._conn.execute(_INSERT, _values(row))
            return cur.rowcount == 1

    def add_many(self, rows: Iterable[ResultRow]) -> int:
        """Insert rows in one transaction: all of them or, if the process dies first, none (a
        step whose rows must appear together). Returns how many keys were new."""
        vals = [_values(r) for r in rows]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                added = sum(self._conn.execute(_INSERT, v).rowcount for v in vals)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return added

    def rows(self, model_tag: str | None = None) -> Iterator[ResultRow]:
        """Rows ordered by (model tag, key)."""
        sql = f"SELECT {_COLS} FROM cells"
        params: tuple[Any, ...] = ()
        if model_tag is not None:
            sql += " WHERE model_tag = ?"
            params = (model_tag,)
        with self._lock:
            fetched = self._conn.execute(sql + " ORDER BY model_tag, key", params).fetchall()
        for r in fetched:
            yield _row(r)

    def model_tags(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._conn.execute("SELECT DISTINCT model_tag FROM cells ORDER BY model_tag")]


def now() -> float:
    return time.time()
