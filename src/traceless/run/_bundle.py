"""Export bundles: the shareable, metrics-level form of a study results dir.

A bundle is a folder holding two files::

    BUNDLE/manifest.json     the results dir's manifest, unchanged (study, version, config, runs)
    BUNDLE/results.parquet   one row per cell: the ResultRow fields without any conversation text

``export_bundle(DIR, BUNDLE)`` writes one; ``read_rows``/``read_manifest`` read a bundle like
a results dir, so ``traceless report BUNDLE`` renders what ``traceless report DIR`` renders.

What a bundle keeps and drops (a results dir holds user text in several places):

* ``prompt`` and ``reply`` are dropped (null in every row): they are the conversation.
* ``extra`` is study bookkeeping and holds the canary, the dataset's expected answers, the
  auditors' queries, replies and predictions. A bundle keeps only the paths the study lists
  in ``Study.bundle_extra`` (labels, ids and flags its report reads); every other key is dropped.
* ``metrics``, ``timing``, ``config`` (study config and cell parameters), ``model``
  (backend identity), ``key``, ``group``, ``seed`` and ``code_version`` are kept: they are what
  the tables are computed from. Metrics are numbers, flags and short labels; a metric or kept
  extra that holds text (whitespace, or longer than ``MAX_LABEL`` characters) stops the export,
  because it would carry what the bundle promises to drop.

The Parquet file is zstd-compressed (a bundle is committed next to the docs); what it holds is
checked on the decoded values and on the file's bytes (its footer keeps column statistics in
clear). Dict-valued fields are stored as JSON text columns, so floats round-trip exactly and
reports compute the same numbers.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from traceless.errors import StudyError
from traceless.run._results import MANIFEST, RESULTS_DB, ResultRow, ResultsStore, read_manifest

__all__ = ["BUNDLE_ROWS", "MAX_LABEL", "BundleSummary", "export_bundle", "is_bundle", "read_bundle_rows", "read_rows"]

BUNDLE_ROWS = "results.parquet"
"""File name of a bundle's rows."""
MAX_LABEL = 80
"""Longest string a kept metric or extra may hold: labels, ids and hex digests fit; sentences do not."""

_JSON_COLS = ("study_config", "config", "model", "timing", "metrics", "extra")
"""JSON text columns. The study config, the same in every row of a run, has its own column so
Parquet's dictionary encoding stores it once (``config`` holds the rest: the cell parameters)."""


class BundleSummary(BaseModel):
    """What an export wrote."""

    bundle: str
    """The bundle folder."""
    rows: int
    """Rows exported (every row of the results dir)."""
    extra_kept: list[str]
    """The ``extra`` paths kept (the study's ``bundle_extra``); every other key was dropped."""
    bytes: int
    """Size of the bundle's two files."""


def is_bundle(path: str | Path) -> bool:
    """True for a bundle folder (rows in Parquet, no SQLite results store)."""
    p = Path(path)
    return (p / BUNDLE_ROWS).exists() and not (p / RESULTS_DB).exists()


def _project(extra: Mapping[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """The sub-dict of ``extra`` at the dotted ``paths`` (``receipt.verified`` keeps that leaf only)."""
    out: dict[str, Any] = {}
    for path in paths:
        src: Any = extra
        parts = path.split(".")
        for part in parts:
            if not isinstance(src, Mapping) or part not in src:
                break
            src = src[part]
        else:
            dst = out
            for part in parts[:-1]:
                dst = dst.setdefault(part, {})
            dst[parts[-1]] = src
    return out


def _check_labels(value: Any, where: str) -> None:
    """Refuse text in a kept field (see the module docstring)."""
    if isinstance(value, str):
        if len(value) > MAX_LABEL or any(ch.isspace() for ch in value):
            raise StudyError(f"{where} holds text ({len(value)} characters), not a metric; a bundle keeps no "
                             "conversation text. Move it to the row's extra (dropped on export) in the study")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _check_labels(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_labels(v, f"{where}[{i}]")


def _bundle_row(r: ResultRow, keep: tuple[str, ...]) -> dict[str, Any]:
    extra = _project(r.extra, keep)
    _check_labels(r.metrics, f"row {r.key!r}: metrics")
    _check_labels(extra, f"row {r.key!r}: extra")
    return {
        "model_tag": r.model_tag, "key": r.key, "group": r.group, "seed": r.seed, "code_version": r.code_version,
        "created": r.created, "study_config": json.dumps(r.config.get("study"), sort_keys=True, default=str),
        "config": json.dumps({k: v for k, v in r.config.items() if k != "study"}, sort_keys=True, default=str),
        "model": json.dumps(r.model, sort_keys=True, default=str), "timing": json.dumps(r.timing, sort_keys=True),
        "metrics": json.dumps(r.metrics, sort_keys=True, default=str),
        "extra": json.dumps(extra, sort_keys=True, default=str),
    }


def read_rows(out_dir: str | Path, model_tag: str | None = None) -> list[ResultRow]:
    """Every row of a results dir or of an export bundle (read-only), ordered by (model tag, key)."""
    read_manifest(out_dir)
    if is_bundle(out_dir):
        return read_bundle_rows(out_dir, model_tag)
    with ResultsStore(Path(out_dir) / RESULTS_DB, readonly=True) as rs:
        return list(rs.rows(model_tag))


def export_bundle(results_dir: str | Path, out: str | Path) -> BundleSummary:
    """Write the bundle of ``results_dir`` into the new folder ``out`` (see the module docstring).

    Written into a temporary folder next to ``out`` and renamed at the end, so a failed export
    leaves nothing behind."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from traceless.run._study import registered_studies

    studies = registered_studies()

    src, dst = Path(results_dir), Path(out)
    man = read_manifest(src)
    if is_bundle(src):
        raise StudyError(f"{src} is already a bundle; copy the folder to share it")
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise StudyError(f"{dst} exists and is not an empty folder; choose a new --out path")
    # a dir of another kind (e.g. a memory-system audit) declares nothing: its extra is dropped whole
    keep = tuple(studies.get(man.study).bundle_extra) if man.study in studies.names() else ()
    rows = [_bundle_row(r, keep) for r in read_rows(src)]  # read_rows: ordered by (model tag, key)
    schema = pa.schema([("model_tag", pa.string()), ("key", pa.string()), ("group", pa.string()),
                        ("seed", pa.int64()), ("code_version", pa.string()), ("created", pa.float64()),
                        *((c, pa.string()) for c in _JSON_COLS)])
    table = pa.Table.from_pylist(rows, schema=schema)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        pq.write_table(table, tmp / BUNDLE_ROWS, compression="zstd")
        shutil.copyfile(src / MANIFEST, tmp / MANIFEST)
        if dst.exists():
            dst.rmdir()
        os.replace(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    size = sum((dst / f).stat().st_size for f in (BUNDLE_ROWS, MANIFEST))
    return BundleSummary(bundle=str(dst), rows=len(rows), extra_kept=list(keep), bytes=size)


def read_bundle_rows(bundle: str | Path, model_tag: str | None = None) -> list[ResultRow]:
    """The rows of a bundle as ``ResultRow`` (prompt and reply None), ordered by (model tag, key)."""
    import pyarrow.parquet as pq

    p = Path(bundle) / BUNDLE_ROWS
    try:
        recs = pq.read_table(p).to_pylist()
    except (OSError, ValueError) as e:
        raise StudyError(f"{p} is not a readable bundle ({e}); export it again with `traceless study export`") from None
    out = []
    for rec in recs:
        if model_tag is None or rec["model_tag"] == model_tag:
            d = {**rec, **{c: json.loads(rec[c]) for c in _JSON_COLS}}
            study = d.pop("study_config")
            d["config"] = d["config"] if study is None else {"study": study, **d["config"]}
            out.append(ResultRow(prompt=None, reply=None, **d))
    return sorted(out, key=lambda r: (r.model_tag, r.key))
