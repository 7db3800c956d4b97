"""``traceless audit``."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from traceless.audit import PROBE_LEVELS, AuditConfig, run_audit
from traceless.cli._common import backend, embedder, split_list
from traceless.forget import FORGET_MODES
from traceless.models import CachingBackend

__all__ = ["audit_cmd"]


def audit_cmd(
    model: str = typer.Option(
        "qwen2.5-coder-0.5b-instruct",
        "--model",
        "-m",
        help="Embedded model name, openai:MODEL@URL, or a local GGUF path.",
    ),
    S: int = typer.Option(
        1,
        "--S",
        "-S",
        min=0,
        max=2,
        help="Summarization level: 0 raw turns, 1 key facts, 2 one-sentence summaries.",
    ),
    k: int = typer.Option(3, "--k", "-k", min=1, help="Retrieval breadth (chunks injected)."),
    profiles: int | None = typer.Option(
        None, "--profiles", "-n", min=1, help="Users audited, one canary each (default 3 synthetic users, or "
        "every user of --data)."),
    seed: int = typer.Option(0, "--seed", help="Seed for users, canaries and placement."),
    modes: str = typer.Option(
        "all",
        "--modes",
        help="Forget modes to evaluate after the baseline: 'all', 'none', 'ladder' (paper 000's five) "
        "or a comma list (see `traceless forget modes`).",
    ),
    wordings: int = typer.Option(1, "--wordings", min=1, help="Probe wordings per level."),
    max_new_tokens: int = typer.Option(40, "--max-new-tokens", min=4, help="Reply budget per probe."),
    out: Path = typer.Option(Path("traceless-audit"), "--out", "-o", help="Output directory."),
    fmt: str = typer.Option("jsonl", "--format", help="Results file format: jsonl or parquet."),
    embedder_name: str = typer.Option(
        "all-MiniLM-L6-v2", "--embedder", help="Retrieval embedder (all-MiniLM-L6-v2 or 'hashing')."
    ),
    reveal: bool = typer.Option(False, "--reveal", help="Keep canary values in results (off: redacted)."),
    memory: str | None = typer.Option(
        None, "--memory", help="Audit this memory system (see `traceless memory systems`): each of its native "
        "deletions on a copy, residue per store and file. Without it: traceless's own store, as before."),
    memory_config: Path | None = typer.Option(
        None, "--memory-config", help="The memory system's settings (JSON or TOML; see docs/memory-systems.md)."),
    data: Path | None = typer.Option(
        None, "--data", help="Plant the canaries in these conversations (sessions JSONL) instead of synthetic users "
        "(with --memory)."),
    keep_memory: bool = typer.Option(
        False, "--keep-memory", help="Keep the audited memory files (they hold the canaries in plaintext)."),
) -> None:
    """Plant a canary in each synthetic user's memory, probe the agent (direct, indirect,
    jailbreak), forget with each mode, and print extraction and residue per tier.

    With --memory NAME: audit that memory system's own deletion operations instead."""
    if fmt not in ("jsonl", "parquet"):
        raise typer.BadParameter("use --format jsonl or --format parquet")
    if memory is not None or data is not None or memory_config is not None:
        from traceless.cli._systems import system_audit

        system_audit(memory=memory or "traceless", memory_config=memory_config, data=data, model=model, S=S, k=k,
                     profiles=profiles, seed=seed, modes=modes, wordings=wordings, max_new_tokens=max_new_tokens,
                     out=out, embedder_name=embedder_name, reveal=reveal, keep_memory=keep_memory)
        return
    profiles = profiles or 3
    if modes == "all":
        mode_list = [m for m in FORGET_MODES.names()]
    elif modes == "ladder":
        mode_list = ["noop", "raw_only", "raw_plus_resummarize", "full_purge", "tombstone"]
    elif modes == "none":
        mode_list = []
    else:
        mode_list = split_list(modes)
        for m in mode_list:
            FORGET_MODES.get(m)
    cfg = AuditConfig(
        model=model,
        S=S,
        k=k,
        profiles=profiles,
        seed=seed,
        modes=tuple(mode_list),
        wordings=wordings,
        max_new_tokens=max_new_tokens,
        reveal=reveal,
        keep_memory=keep_memory,
    )
    console = Console(stderr=True)
    t0 = time.perf_counter()
    with console.status(f"loading {model} and the embedder ..."):
        be = CachingBackend(backend(model))
        emb = embedder(embedder_name)
    load_s = time.perf_counter() - t0
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("writing memory", total=None)

        def on_progress(done: int, total: int, what: str) -> None:
            progress.update(task, completed=done, total=total, description=f"probing {what}")

        result = run_audit(cfg, be, emb, out, on_progress=on_progress)
    if fmt == "parquet":
        import pyarrow.json as pj
        import pyarrow.parquet as pq

        src = out / "results.jsonl"
        pq.write_table(pj.read_json(src), out / "results.parquet")
        src.unlink()
    table = Table(
        title=f"Canary extraction before/after forgetting — {model}, S={S}, k={k}, {profiles} profiles",
        caption="AER: extraction rate with the agent's normal memory view; FRS: with only the raw or "
        "only the summary tier's surviving artifacts in context (paper 000 §2.4)",
    )
    cols = [f"AER_{lv}" for lv in PROBE_LEVELS] + ["AER_max", "FRS_raw", "FRS_summary", "FRS_worst"]
    heads = ["AER direct", "AER indirect", "AER jailbreak", "AER max", "FRS raw", "FRS summary", "FRS worst"]
    table.add_column("phase / mode")
    for h in heads:
        table.add_column(h, justify="right")
    for phase, row in result.table.items():
        table.add_row(phase, *(f"{row[c]:.2f}" if c in row else "—" for c in cols))
    Console(width=max(120, Console().width)).print(table)
    typer.echo(
        f"{result.rows} probe rows in {out}/results.{fmt}; receipts in {out}/receipts/. "
        f"Took {time.perf_counter() - t0:.1f}s (model load {load_s:.1f}s, cache hits {be.hits})."
    )
