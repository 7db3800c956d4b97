"""``traceless study run --json``: one JSON document per run (docs/schemas/study-run.json),
built from the runner's ``RunSummary`` and the results dir's manifest as stored on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from traceless.run._results import RunRecord, read_manifest
from traceless.run._study import RunSummary

__all__ = ["ManifestSummary", "RunState", "StudyRunResult", "run_state", "study_run_result"]

RunState = Literal["finished", "shard_finished", "stopped"]


class ManifestSummary(BaseModel):
    """The results dir's manifest after the run (``DIR/manifest.json``)."""

    study_version: str
    """The study's version string (a dir is only resumed by the same version)."""
    results_format: int
    """Layout version of the results dir."""
    code_version: str
    """traceless version that created the dir."""
    created: float
    """Unix time the dir was created."""
    config: dict[str, Any]
    """The study config of the most recent (re)start."""
    runs: dict[str, RunRecord]
    """Per model tag: identity (weights digest, backend) and progress."""


class StudyRunResult(BaseModel):
    """What one ``traceless study run`` did and where its results are."""

    study: str
    """Study name."""
    results_dir: str
    """The results dir (absolute path): ``traceless report`` reads it."""
    model_tag: str
    """The model's tag in the dir (rows are keyed by it)."""
    state: RunState
    """``finished`` (every cell has a row), ``shard_finished`` (this shard's cells have rows,
    others are missing) or ``stopped`` (--max-cells or interrupted: resume with --resume)."""
    rows_written: int
    """Cells run and stored by this call."""
    rows_resumed: int
    """Cells already stored in the dir when this call started (skipped on resume)."""
    cells_total: int
    """Cells in the study's grid."""
    seconds: float
    """Wall time of this call."""
    cache_hits: int
    """Model calls answered by the generation cache."""
    cache_misses: int
    """Model calls generated."""
    manifest: ManifestSummary
    """The dir's manifest as stored after this call."""
    report_command: str | None
    """The command that renders the report (when finished), else None."""


def run_state(summary: RunSummary, shard: tuple[int, int] | None) -> RunState:
    """finished / shard_finished / stopped for a run (with its shard, if any)."""
    if summary.finished:
        return "finished"
    if summary.part_finished and shard is not None:
        return "shard_finished"
    return "stopped"


def study_run_result(summary: RunSummary, shard: tuple[int, int] | None = None) -> StudyRunResult:
    """The JSON document of a run: the summary plus the manifest it left on disk."""
    man = read_manifest(summary.out_dir)
    out_dir = str(Path(summary.out_dir).resolve())
    state = run_state(summary, shard)
    return StudyRunResult(
        study=summary.study, results_dir=out_dir, model_tag=summary.model_tag, state=state,
        rows_written=summary.cells_run, rows_resumed=summary.cells_skipped, cells_total=summary.cells_total,
        seconds=summary.seconds, cache_hits=summary.cache_hits, cache_misses=summary.cache_misses,
        manifest=ManifestSummary(study_version=man.study_version, results_format=man.results_format,
                                 code_version=man.code_version, created=man.created, config=man.config,
                                 runs=man.runs),
        report_command=f"traceless report {out_dir}" if state == "finished" else None,
    )
