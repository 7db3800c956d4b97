"""``traceless memory systems`` and ``traceless audit --memory NAME``: thin layers over
``traceless.systems`` and ``traceless.audit.run_system_audit``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from traceless.cli._common import backend, embedder, split_list
from traceless.systems import SystemRuntime, load_system_config, system_class, system_status

if TYPE_CHECKING:  # the audit engine pulls in the studies (torch): imported when an audit runs
    from traceless.audit import SystemAuditResult

__all__ = ["systems_cmd", "system_audit"]


def systems_cmd() -> None:
    """List the memory systems `traceless audit --memory` can measure, and what a missing one needs."""
    table = Table(title="Memory systems (traceless audit --memory NAME)")
    for col in ("name", "installed", "native deletions", "about"):
        table.add_column(col)
    for st in system_status():
        inst = "yes" if st.installed else f"no: {st.install}"
        table.add_row(st.name, inst, ", ".join(st.deletions) or "—", st.help)
    Console(width=max(120, Console().width)).print(table)


def _system_config(memory: str, memory_config: Path | None, S: int, k: int, modes: str) -> dict[str, Any]:
    cfg = load_system_config(memory, memory_config).model_dump(mode="json", exclude_unset=True)
    if memory == "traceless":  # the native store keeps the plain audit's options
        if modes not in ("all", "none"):
            from traceless.audit import PAPER_LADDER

            cfg.setdefault("modes", list(PAPER_LADDER) if modes == "ladder" else split_list(modes))
        cfg.setdefault("S", S)
        cfg.setdefault("k", k)
    return cfg


def system_audit(*, memory: str, memory_config: Path | None, data: Path | None, model: str, S: int, k: int,
                 profiles: int | None, seed: int, modes: str, wordings: int, max_new_tokens: int, out: Path,
                 embedder_name: str, reveal: bool, keep_memory: bool) -> None:
    """Run the engine on one memory system and print its table."""
    from traceless.audit import SystemAuditConfig, run_system_audit
    from traceless.models import CachingBackend, load_backend

    system_class(memory)  # unknown name: lists the installed ones before any model loads
    cfg = SystemAuditConfig(
        system=memory, system_config=_system_config(memory, memory_config, S, k, modes), model=model,
        profiles=profiles, data=None if data is None else str(data), seed=seed, wordings=wordings,
        max_new_tokens=max_new_tokens, reveal=reveal, keep_memory=keep_memory)
    ctx = system_class(memory).context_tokens(load_system_config(memory, cfg.system_config))
    console = Console(stderr=True)
    t0 = time.perf_counter()
    with console.status(f"loading {model} and the embedder ..."):
        be = CachingBackend(load_backend(model, ctx=ctx) if ctx and model.startswith("llamacpp:") else backend(model))
        emb = embedder(embedder_name)
    try:
        with console.status(f"auditing {memory} ...") as status:
            def on_progress(done: int, total: int, what: str) -> None:
                status.update(f"auditing {memory}: {what} ({done}/{total} users)")

            result = run_system_audit(cfg, SystemRuntime(be, emb, model), out, on_progress=on_progress)
    finally:
        be.close()
    print_result(result, model)
    typer.echo(f"{result.rows} probe rows in {out}/results.jsonl; `traceless report {out}` renders them. "
               f"Took {time.perf_counter() - t0:.1f}s.")


def print_result(result: SystemAuditResult, model: str) -> None:
    """The one table: rows = deletions (and 'before'), columns = AER per level, copies per store."""
    stores = list(next(iter(result.copies.values()), {}))
    rates = [c for c in next(iter(result.table.values()), {}) if c.startswith("AER")]
    frs = sorted({c for row in result.table.values() for c in row if c.startswith("FRS")})
    table = Table(title=f"{result.system}: canary extraction and copies left after each native deletion — {model}",
                  caption="AER: share of probes whose reply holds the canary; per store: copies of the canaries "
                  "it still holds (all users)")
    table.add_column("deletion")
    for c in [*rates, *frs]:
        table.add_column(c.replace("_", " "), justify="right")
    for s in stores:
        table.add_column(f"{s} copies", justify="right")
    for phase, row in result.table.items():
        table.add_row(phase, *(f"{row[c]:.2f}" if c in row else "—" for c in [*rates, *frs]),
                      *(str(result.copies[phase].get(s, 0)) for s in stores))
    Console(width=max(140, Console().width)).print(table)
    for phase, files in result.files.items():
        if files:
            typer.echo(f"files holding a canary after {phase}: " + ", ".join(f"{f} ({n})" for f, n in files.items()))
