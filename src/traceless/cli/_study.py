"""``traceless study list|run`` and ``traceless report DIR`` (mounted by cli/__init__)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from traceless.cli._engine import with_engine_options
from traceless.errors import ConfigError
from traceless.studies import (
    MANIFEST,
    STUDIES,
    get_study,
    load_config,
    read_manifest,
    run_state,
    run_study,
    study_run_result,
)

if TYPE_CHECKING:
    from traceless.models import EngineOptions

__all__ = ["study_app", "report_cmd"]

study_app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                        help="Run the papers' studies into resumable results dirs.")


@study_app.command("list")
def list_cmd() -> None:
    """List the registered studies and their config fields."""
    console = Console()
    for e in STUDIES.entries():
        cls = e.obj
        console.print(f"[bold]{escape(e.name)}[/bold] (version {cls.version}) — {escape(e.help)}")
        for name, f in cls.config_cls.model_fields.items():
            default = f.default if f.default_factory is None else f.default_factory()  # type: ignore[call-arg]
            doc = " ".join((f.description or "").split()).split(". ")[0]
            console.print(f"    {name} = {default!r}" + (f"  — {doc}" if doc else ""), markup=False, soft_wrap=True)


@study_app.command("run")
@with_engine_options(threads_help="CPU threads of the local engine (transformers or a llama.cpp server; default: the "
                                  "CPUs free when it starts; use 1 on a machine shared with other jobs: "
                                  "oversubscribed threads are several times slower).")
def run_cmd(
    name: str = typer.Argument(..., help="Study name (see `traceless study list`)."),
    out: Path = typer.Option(..., "--out", "-o", help="Results dir (created; must be new unless --resume)."),
    config: Path | None = typer.Option(None, "--config", "-c", help="TOML or JSON file of config fields."),
    sets: list[str] = typer.Option([], "--set", "-s",  # noqa: B006
                                   help="Override a field: --set S=0,1 --set k=1,3 (repeatable)."),
    resume: bool = typer.Option(False, "--resume", help="Continue DIR: skip cells already stored (also adds "
                                                         "another --model to the same dir)."),
    n: int | None = typer.Option(None, "--n", "-n", help="Instances (sets the config field n)."),
    data: Path | None = typer.Option(None, "--data", help="Dataset file (sets the config field data)."),
    longmemeval: Path | None = typer.Option(
        None, "--longmemeval", envvar="TRACELESS_LONGMEMEVAL",
        help="The LongMemEval file (or JSON Lines sessions) a study reads where its config names none (its data or "
             "longmemeval field is empty): set into that field, so the run records it; default: the shipped "
             "longmemeval-oracle-99."),
    model: str | None = typer.Option(None, "--model", "-m",
                                     help="Backend spec: embedded model name, openai:MODEL@URL, a GGUF path."),
    tag: str | None = typer.Option(None, "--tag", help="Name of this model's rows in DIR (default: from --model)."),
    workers: int | None = typer.Option(None, "--workers", min=1,
                                       help="Groups run at once (default: the backend's max_concurrency)."),
    max_cells: int | None = typer.Option(None, "--max-cells", min=1,
                                         help="Stop after this many new cells (resume continues)."),
    embedder_name: str = typer.Option("all-MiniLM-L6-v2", "--embedder",
                                      help="Embedder (all-MiniLM-L6-v2, or hashing for smoke tests)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
    shard: str | None = typer.Option(None, "--shard", help="I/N: run only every N-th instance group starting at "
                                                           "I (start N processes with --resume to share a run)."),
    executor: str = typer.Option("local", "--executor", help="local (this process) or ray (groups as Ray "
                                                             "tasks; this process writes the results)."),
    address: str | None = typer.Option(None, "--address", help="With --executor ray: the cluster's HOST:PORT "
                                                              "or auto (default: a private Ray runtime on "
                                                              "this machine, loopback only)."),
    device: str | None = typer.Option(None, "--device", help="Local transformers model only: cpu (default), "
                                                             "cuda or cuda:N."),
    dtype: str | None = typer.Option(None, "--dtype", help="Local transformers model only: float32 (default), "
                                                           "bfloat16 or float16 (weights and KV cache)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout (results dir, rows "
                                                       "written/resumed, manifest summary; docs/schemas/study-run.json)"
                                                       " instead of the summary line; implies --no-progress."),
    *, engine: EngineOptions,
) -> None:
    """Run (or resume) a study into DIR; every finished cell is stored at once."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    study = get_study(name)
    cfg = _with_longmemeval(name, _study_config(name, study.config_cls, out, config, sets, resume, n, data),
                            longmemeval)
    shard_t = _parse_shard(shard)

    from traceless.cli._common import embedder

    console = Console(stderr=True)
    with _sigterm_as_interrupt():
        summary = run_study(study, out, cfg, resume=resume, model=model, model_tag=tag,
                            embedder=lambda: embedder(embedder_name), workers=workers,
                            progress=progress and not as_json, max_cells=max_cells,
                            backend_options=_backend_options(engine, device, dtype),
                            shard=shard_t, executor=executor, address=address)
    if as_json:
        typer.echo(study_run_result(summary, shard_t).model_dump_json(indent=2))
        return
    _print_summary(console, summary, shard, shard_t, out)


def _study_config(name: str, cls: type[Any], out: Path, config: Path | None, sets: list[str], resume: bool,
                  n: int | None, data: Path | None) -> Any:
    """The run's config: a resumed dir's recorded config, then --n/--data, then --config/--set."""
    base: dict[str, Any] = {}
    if resume and (out / MANIFEST).exists():
        man = read_manifest(out)
        if man.study == name:
            base = dict(man.config)
    for field, value in (("n", n), ("data", None if data is None else str(data.resolve()))):
        if value is None:
            continue
        if field not in cls.model_fields:
            raise ConfigError(f"study {name!r} has no {field!r} field; use --set with one of "
                              f"{', '.join(cls.model_fields)}")
        base[field] = value
    return load_config(cls, config, sets, base=base)


LONGMEMEVAL_FIELDS = {"frontier": "data", "frontier-residue": "data", "replay": "longmemeval"}
"""The config field of each study that reads LongMemEval (an empty one: the shipped subset),
filled with ``--longmemeval`` / ``$TRACELESS_LONGMEMEVAL`` when empty."""


def _with_longmemeval(name: str, cfg: Any, longmemeval: Path | None) -> Any:
    """``cfg`` with its empty LongMemEval field set to ``longmemeval`` (checked to be a file first)."""
    field = LONGMEMEVAL_FIELDS.get(name)
    if longmemeval is None or field is None or getattr(cfg, field) is not None:
        return cfg
    if not longmemeval.expanduser().is_file():
        from traceless.errors import InputFormatError

        raise InputFormatError(f"--longmemeval (or $TRACELESS_LONGMEMEVAL) {longmemeval}: no such file; give an "
                               "existing LongMemEval file, or unset it to use the shipped longmemeval-oracle-99")
    return cfg.model_copy(update={field: str(longmemeval.expanduser().resolve())})


def _parse_shard(shard: str | None) -> tuple[int, int] | None:
    if shard is None:
        return None
    i, sep, n_ = shard.partition("/")
    if not (sep and i.strip().isdigit() and n_.strip().isdigit()):
        raise ConfigError(f"--shard {shard!r}: use I/N, e.g. --shard 0/2")
    return int(i), int(n_)


def _print_summary(console: Console, summary: Any, shard: str | None, shard_t: tuple[int, int] | None,
                   out: Path) -> None:
    state = {"finished": "finished", "stopped": "stopped (resume with --resume)",
             "shard_finished": f"shard {shard} finished (the other shards' cells are still missing)"
             }[run_state(summary, shard_t)]
    console.print(
        f"{summary.study} ({summary.model_tag}): {summary.cells_run} cells run, {summary.cells_skipped} already "
        f"done, {summary.cells_total} in the grid; {state}; {summary.seconds:.0f}s; generation cache "
        f"{summary.cache_hits} hits / {summary.cache_misses} generated. Results: {out}", soft_wrap=True, markup=False
    )
    if summary.finished:
        console.print(f"report: traceless report {out}", soft_wrap=True, markup=False)


def _backend_options(engine: EngineOptions, device: str | None, dtype: str | None) -> dict[str, Any]:
    """``load_backend``'s options: the engine options (built once here, at the edge) and a
    local model's placement."""
    return {"engine": engine, **{k: v for k, v in (("device", device), ("dtype", dtype)) if v}}


@study_app.command("merge")
def merge_cmd(
    dirs: list[Path] = typer.Argument(..., help="Results dirs of one run (e.g. its shards from several machines)."),
    out: Path = typer.Option(..., "--out", "-o", help="The merged dir (new or empty)."),
) -> None:
    """Merge results dirs of one study run into a new dir; refuses other studies, configs, code
    versions or weights, keeps identical rows once and stops on conflicting rows."""
    from traceless.studies import merge_results

    s = merge_results(dirs, out)
    state = ", ".join(f"{t}: {'finished' if f else 'cells missing (resume it to finish)'}"
                      for t, f in sorted(s.finished.items()))
    Console(stderr=True).print(
        f"{s.study}: merged {len(s.sources)} dirs into {s.out_dir}: {s.rows} rows ({s.duplicates} duplicates "
        f"kept once), {s.generations} cached generations; {state}", soft_wrap=True, markup=False)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler's stop) stops a run like Ctrl-C: stored cells stay, the
    manifest records this process's time and any model server it started is shut down."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    old = signal.signal(signal.SIGTERM, _term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@study_app.command("purge")
def purge_cmd(results_dir: Path = typer.Argument(
        ..., help="A results dir of a stopped run: a study's (`study run`), an audit's (`audit --out`) or a bundle.")
) -> None:
    """Remove prompts and replies from a results dir (rows' prompt/reply and text-bearing extra,
    an audit's results.jsonl, generation caches, work/), then scan every file left for them;
    metrics stay and `traceless report` renders the same numbers."""
    from traceless.studies import purge_results

    s = purge_results(results_dir)
    if s.layout == "bundle":
        typer.echo(f"{results_dir} is an export bundle: it holds no prompts or replies; nothing to purge")
        return
    removed = ", ".join(s.removed) or "nothing else"
    typer.echo(f"purged {results_dir} ({s.layout} dir): prompt/reply cleared in {s.rows_cleared} row(s), extra "
               f"trimmed in {s.extra_trimmed}; removed {removed}; none of {s.texts_checked} checked prompt/reply "
               f"texts is left in any file ({s.seconds:.1f}s)")


@study_app.command("export")
def export_cmd(
    results_dir: Path = typer.Argument(..., help="A study results dir."),
    out: Path = typer.Option(..., "--out", "-o", help="The bundle folder to write (new or empty)."),
) -> None:
    """Write a shareable bundle of DIR: metrics-level rows (Parquet) plus the manifest, without
    prompts, replies, canaries or expected answers; `traceless report BUNDLE` renders the same tables."""
    from traceless.studies import export_bundle

    s = export_bundle(results_dir, out)
    typer.echo(f"exported {results_dir} to {s.bundle}: {s.rows} rows, {s.bytes / 1024:.1f} KiB (extra kept: "
               f"{', '.join(s.extra_kept) or 'none'}); report: traceless report {s.bundle}")


def report_cmd(
    results_dir: Path = typer.Argument(..., help="A study results dir, an export bundle, a request bundle "
                                       "(forget --deployment: request.md / request.html for the DPO), or (with "
                                       "--html) a marked docs page such as docs/scorecard.md."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Where to write (default DIR/report)."),
    html: bool = typer.Option(False, "--html", help="Also write report.html: one self-contained page that opens "
                              "offline (tables, embedded figures, findings, run metadata)."),
) -> None:
    """Write the study's report (tables, figures, findings) from its results; no model is called."""
    from traceless.report import render_html_report, render_report

    p = render_html_report(results_dir, out) if html else render_report(results_dir, out)
    typer.echo(str(p))
