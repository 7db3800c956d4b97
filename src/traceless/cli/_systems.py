"""``traceless memory systems`` and ``traceless audit [--memory NAME]``: thin layers over
``traceless.systems`` and the audit engine ``traceless.audit.run_system_audit``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from traceless.cli._common import embedder, split_list
from traceless.cli._progress import progress_bar
from traceless.errors import ConfigError

if TYPE_CHECKING:  # the audit engine pulls in the studies (torch): imported when an audit runs
    from traceless.audit import SystemAuditResult
    from traceless.models import EngineOptions
    from traceless.systems import SystemSpec

# traceless.systems (the native system imports forget, the store and numpy; plug-ins are
# found by an entry-point scan) is imported by the commands that list or run a system, so
# mounting `memory systems` under `traceless memory` costs nothing (issue #13.4).

__all__ = ["systems_cmd", "system_audit"]


def systems_cmd() -> None:
    """List the memory systems `traceless audit --memory` can measure, and what a missing one needs."""
    from traceless.systems import system_status

    table = Table(title="Memory systems (traceless audit --memory NAME)")
    for col in ("name", "installed", "native deletions", "about"):
        table.add_column(col)
    for st in system_status():
        inst = "yes" if st.installed else f"no: {st.install}"
        # plain text: an install hint's 'traceless[mem0]' is not markup
        table.add_row(*(Text(x) for x in (st.name, inst, ", ".join(st.deletions) or "—", st.help)))
    Console(width=max(120, Console().width)).print(table)


def _system_spec(memory: str, memory_config: Path | None, S: int, k: int, modes: str) -> SystemSpec:
    """``--memory`` resolved once (one lookup, one validation), the native store's options filled in."""
    from traceless.systems import resolve_system

    defaults: dict[str, Any] = {}
    if memory == "traceless":  # the native store: --S, --k, and --modes name forget modes
        if modes not in ("all", "none"):
            from traceless.audit import PAPER_LADDER

            defaults["modes"] = list(PAPER_LADDER) if modes == "ladder" else split_list(modes)
        defaults |= {"S": S, "k": k}
    return resolve_system(memory, memory_config, defaults=defaults)


def _operations(memory: str, modes: str, known: tuple[str, ...]) -> tuple[str, ...] | None:
    """--modes as the engine's operations (None: every deletion the system has)."""
    if modes == "none":
        return ()
    if modes == "all" or memory == "traceless":  # the native store's modes are in its config
        return None
    if modes == "ladder":
        raise ConfigError(f"--modes ladder names traceless's forget modes; {memory}'s deletions: {', '.join(known)}")
    ops = tuple(split_list(modes))
    for op in ops:
        if op not in known:
            raise ConfigError(f"{memory} has no deletion {op!r}; its deletions: {', '.join(known)}")
    return ops


_BASELINE_HINT = "raise extraction (--S 0 keeps the raw turns in memory; more --wordings) and rerun"


def system_audit(*, memory: str, memory_config: Path | None, data: Path | None, model: str, S: int, k: int,
                 profiles: int | None, seed: int, modes: str, wordings: int, max_new_tokens: int, out: Path,
                 embedder_name: str, reveal: bool, keep_memory: bool, fmt: str = "jsonl",
                 as_json: bool = False, engine: EngineOptions | None = None, serving_cache: int = 0) -> None:
    """Run the engine on one memory system with the model engine ``engine`` (built at the
    edge from the command's options) and print its table (or its JSON document)."""
    from traceless.audit import SystemAuditConfig, audit_model, run_system_audit
    from traceless.models import fast_spec
    from traceless.systems import SystemRuntime

    spec = _system_spec(memory, memory_config, S, k, modes)  # unknown name: lists the installed ones first
    known = spec.cls.deletions(spec.config)  # a bad mode is named before any model loads
    cfg = SystemAuditConfig(
        system=memory, system_config=spec.config.model_dump(mode="json", exclude_unset=True), model=fast_spec(model),
        operations=_operations(memory, modes, known),
        profiles=profiles, data=None if data is None else str(data), seed=seed, wordings=wordings,
        max_new_tokens=max_new_tokens, reveal=reveal, keep_memory=keep_memory, serving_cache_n=serving_cache)
    ctx = spec.cls.context_tokens(spec.config)
    console = Console(stderr=True)
    for o in spec.cls.audit_overrides(spec.config):
        console.print(f"audit instance (a fresh one in the work dir, never yours): overrode {o}", markup=False)
    t0 = time.perf_counter()
    with console.status(f"loading {escape(cfg.model)} and the embedder ..."):
        be = audit_model(model, ctx, engine=engine)[1]  # the run caches generations
        emb = embedder(embedder_name)
    try:
        with progress_bar(f"auditing {memory}", "users") as on_progress:
            result = run_system_audit(cfg, SystemRuntime(be, emb, model), out, on_progress=on_progress, spec=spec)
    finally:
        be.close()
    rows_file = out / "results.jsonl"
    if fmt == "parquet":
        import pyarrow.json as pj
        import pyarrow.parquet as pq

        pq.write_table(pj.read_json(rows_file), out / "results.parquet")
        rows_file.unlink()
        rows_file = out / "results.parquet"
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        print_result(result, cfg.model)
    from traceless.audit import baseline_note

    for phase, tier in result.serving_cache.items():
        typer.echo(f"serving cache after {phase}: " + ("no model served by traceless" if tier is None else
                   f"{tier.before.verdict} (KS p {tier.before.ks_p:.1e}); after traceless's erasure "
                   f"{tier.after.verdict} (KS p {tier.after.ks_p:.2f}); n {tier.n} per group"), err=True)

    note = baseline_note(result.table, _BASELINE_HINT if memory == "traceless" else "")
    if note:
        typer.echo(f"note: {note}.", err=True)
    typer.echo(f"{result.rows} probe rows in {rows_file}; `traceless report {out}` renders them. "
               f"Took {time.perf_counter() - t0:.1f}s.", err=as_json)


def print_result(result: SystemAuditResult, model: str) -> None:
    """The one table: rows = deletions (and 'before'), columns = AER per level, copies per store."""
    stores = list(next(iter(result.copies.values()), {}))
    rates = [c for c in next(iter(result.table.values()), {}) if c.startswith("AER")]
    frs = sorted({c for row in result.table.values() for c in row if c.startswith("FRS")})
    table = Table(title=Text(f"{result.system}: canary extraction and copies left after each native deletion — {model}"),
                  caption="AER: share of probes whose reply holds the canary; per store: copies of the canaries "
                  "it still holds (all users)")
    table.add_column("deletion", no_wrap=True)  # an operation's name is what the reader looks up
    for c in [*rates, *frs]:
        table.add_column(c.replace("_", " "), justify="right")
    for s in stores:
        table.add_column(f"{s} copies", justify="right")
    from traceless.audit import bystander_cell, files_cell

    bys = result.bystanders
    if bys:
        table.add_column("bystanders intact", justify="right")
    for phase, row in result.table.items():
        b = bys.get(phase)
        cell = bystander_cell(b).replace("**NO**", "[red]NO[/red]")
        table.add_row(phase, *(f"{row[c]:.2f}" if c in row else "—" for c in [*rates, *frs]),
                      *(str(result.copies[phase].get(s, 0)) for s in stores), *([cell] if bys else []))
    Console(width=max(180, Console().width)).print(table)
    for phase, files in result.files.items():
        if files:
            each = ", ".join(f"{f} ({n})" for f, n in files.items())
            typer.echo(f"files holding a canary after {phase}: "
                       + (each if len(files) <= 3 else files_cell(files).replace("`", "")))
    for phase, inv in result.inversion.items():
        if inv is not None and phase != "before":
            typer.echo(f"recoverable from surviving vectors after {phase}: top-1 {inv.top1.successes}/{inv.planted}, "
                       f"{inv.top1.fmt()} (top-{inv.k} {inv.topk.successes}/{inv.planted}; {inv.vectors} vectors read "
                       "from the files)")
