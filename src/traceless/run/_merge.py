"""Merge results dirs produced on different machines (``traceless study merge``).

Shards of one run (``--shard I/N`` on N machines, or Ray clusters that each ran a part)
each hold a results dir; ``merge_results`` combines them into one new dir that reports,
``--resume`` and later merges treat like a dir written by a single run.

It refuses, before writing anything, sources of another study, study version, results
format or config, rows made by other code versions, and one model tag with two
identities. A cell present in several sources is kept once when the rows agree on
everything except when they were written and how long they took (``created``,
``timing``); rows that disagree on anything else (prompt, reply, metrics, seed …) are a
conflict and an error. The merged dir is built next to ``out`` and renamed into place, so
a failed merge leaves nothing behind. Generation caches are merged too (first source
wins on a key), so resuming the merged dir pays for no generation a source already made.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from traceless.errors import StudyError
from traceless.run._bundle import read_rows
from traceless.run._results import (
    GENERATIONS_DB,
    RESULTS_DB,
    Manifest,
    ResultRow,
    ResultsStore,
    RunRecord,
    read_manifest,
    write_manifest,
)

__all__ = ["MergeSummary", "merge_results"]

_VOLATILE = frozenset({"created", "timing"})
"""Row fields that differ between two runs of the same cell and do not make a conflict."""


class MergeSummary(BaseModel):
    """What ``merge_results`` did."""

    study: str
    """Study name of every source."""
    out_dir: str
    """The merged dir."""
    sources: list[str]
    """The source dirs, in the order given (the first wins on a duplicate)."""
    rows: int
    """Rows in the merged dir."""
    duplicates: int
    """Identical rows present in more than one source, kept once."""
    generations: int
    """Entries in the merged generation cache."""
    finished: dict[str, bool]
    """Per model tag: every cell of the grid has a row."""


def _check_same(manifests: list[tuple[Path, Manifest]]) -> None:
    first_dir, first = manifests[0]
    for d, m in manifests[1:]:
        for what, a, b in (("study", first.study, m.study), ("study version", first.study_version, m.study_version),
                           ("results format", first.results_format, m.results_format)):
            if a != b:
                raise StudyError(f"cannot merge {d} into {first_dir}: {what} {b!r} vs {a!r}; merge only dirs of "
                                 "one run (same study, version and config)")
        if m.config != first.config:
            keys = sorted(k for k in set(m.config) | set(first.config) if m.config.get(k) != first.config.get(k))
            detail = "; ".join(f"{k}: {first.config.get(k)!r} vs {m.config.get(k)!r}" for k in keys)
            raise StudyError(f"cannot merge {d} with {first_dir}: the configs differ ({detail}); merge only shards "
                             "of one config")
        for tag, rec in m.runs.items():
            other = first.runs.get(tag)
            if other is not None and other.identity != rec.identity:
                raise StudyError(f"cannot merge {d} with {first_dir}: model {tag!r} is {rec.identity} there and "
                                 f"{other.identity} here; rename one tag or merge only runs of the same weights")


def _check_code(sources: list[tuple[Path, list[ResultRow]]]) -> None:
    versions = [(d, sorted({r.code_version for r in rows})) for d, rows in sources if rows]
    for d, v in versions[1:]:
        if v != versions[0][1]:
            raise StudyError(f"cannot merge {d} with {versions[0][0]}: rows made by code {', '.join(v)} vs "
                             f"{', '.join(versions[0][1])}; rerun one side with the same traceless commit")


def _union(sources: list[tuple[Path, list[ResultRow]]]) -> tuple[list[ResultRow], int]:
    kept: dict[tuple[str, str], tuple[Path, ResultRow]] = {}
    dups = 0
    for d, rows in sources:
        for r in rows:
            k = (r.model_tag, r.key)
            if k not in kept:
                kept[k] = (d, r)
                continue
            od, o = kept[k]
            a, b = o.model_dump(exclude=set(_VOLATILE)), r.model_dump(exclude=set(_VOLATILE))
            if a != b:
                fields = sorted(f for f in a if a[f] != b[f])
                raise StudyError(f"cannot merge: cell {r.key!r} of model {r.model_tag!r} has different rows in {od} "
                                 f"and {d} ({', '.join(fields)} differ); keep one of the two dirs' rows for it")
            dups += 1
    return [r for _, r in kept.values()], dups


def _merged_manifest(manifests: list[tuple[Path, Manifest]], rows: list[ResultRow]) -> Manifest:
    base = min((m for _, m in manifests), key=lambda m: m.created)
    runs: dict[str, RunRecord] = {}
    done: dict[str, int] = {}
    for r in rows:
        done[r.model_tag] = done.get(r.model_tag, 0) + 1
    for _, m in manifests:
        for tag, rec in m.runs.items():
            cur = runs.get(tag)
            if cur is None:
                runs[tag] = rec.model_copy()
                continue
            cur.started, cur.seconds = min(cur.started, rec.started), cur.seconds + rec.seconds
            if rec.updated > cur.updated:
                cur.updated, cur.code_version = rec.updated, rec.code_version
            cur.cells_total = max(cur.cells_total, rec.cells_total)
    for tag, rec in runs.items():
        rec.cells_done = done.get(tag, 0)
        rec.finished = rec.cells_total > 0 and rec.cells_done >= rec.cells_total
    return Manifest(study=base.study, study_version=base.study_version, results_format=base.results_format,
                    config=base.config, created=base.created, code_version=base.code_version, runs=runs)


def _merge_generations(dirs: Sequence[Path], into: Path) -> int:
    db = sqlite3.connect(str(into), isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, body TEXT NOT NULL)")
        for d in dirs:
            src = d / GENERATIONS_DB
            if not src.exists():
                continue
            with contextlib.closing(sqlite3.connect(f"file:{src}?mode=ro", uri=True)) as s:
                entries = s.execute("SELECT key, body FROM generations").fetchall()
            db.executemany("INSERT OR IGNORE INTO generations(key, body) VALUES (?, ?)", entries)
        return int(db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])
    finally:
        db.close()


def merge_results(sources: Sequence[str | Path], out: str | Path) -> MergeSummary:
    """Merge the results dirs ``sources`` into the new dir ``out`` (see the module doc)."""
    dirs = [Path(s) for s in sources]
    out_dir = Path(out)
    if not dirs:
        raise StudyError("nothing to merge; pass the results dirs, e.g. `traceless study merge A B --out AB`")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise StudyError(f"{out_dir} exists and is not empty; choose a new --out dir for the merge")
    if out_dir.resolve() in {d.resolve() for d in dirs}:
        raise StudyError(f"--out {out_dir} is one of the sources; merge into a new dir")
    manifests = [(d, read_manifest(d)) for d in dirs]
    _check_same(manifests)
    sourced = [(d, read_rows(d)) for d in dirs]
    _check_code(sourced)
    rows, dups = _union(sourced)
    man = _merged_manifest(manifests, rows)

    tmp = out_dir.parent / f".{out_dir.name}.merging-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with ResultsStore(tmp / RESULTS_DB) as store:
            for r in sorted(rows, key=lambda r: (r.model_tag, r.key)):
                store.add(r)
        n_gen = _merge_generations(dirs, tmp / GENERATIONS_DB)
        write_manifest(tmp, man)
        if out_dir.exists():
            out_dir.rmdir()  # empty (checked above)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finished: dict[str, Any] = {t: r.finished for t, r in man.runs.items()}
    return MergeSummary(study=man.study, out_dir=str(out_dir), sources=[str(d) for d in dirs], rows=len(rows),
                        duplicates=dups, generations=n_gen, finished=finished)
