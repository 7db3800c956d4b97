"""``traceless audit``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from traceless.cli._engine import with_engine_options

if TYPE_CHECKING:
    from traceless.models import EngineOptions

__all__ = ["audit_cmd"]


@with_engine_options()  # its options after the command's; a bad value: named before anything runs
def audit_cmd(
    model: str = typer.Option(
        "qwen2.5-coder-0.5b-instruct",
        "--model",
        "-m",
        help="Embedded model name (served by llama.cpp, one slot without the prompt cache so reruns repeat, when xllamacpp is installed; "
        "transformers:NAME keeps the transformers engine), llamacpp:NAME, openai:MODEL@URL, or a local GGUF path.",
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
        help="Deletions to evaluate after the baseline: 'all', 'none', 'ladder' (paper 000's five forget modes) "
        "or a comma list (forget modes for traceless, see `traceless forget modes`; else the system's deletions).",
    ),
    wordings: int = typer.Option(1, "--wordings", min=1, help="Probe wordings per level."),
    max_new_tokens: int = typer.Option(40, "--max-new-tokens", min=4, help="Reply budget per probe."),
    out: Path = typer.Option(Path("traceless-audit"), "--out", "-o",
                             help="Results dir (rerunning the same command there resumes it)."),
    fmt: str = typer.Option("jsonl", "--format", help="Results file format: jsonl or parquet."),
    embedder_name: str = typer.Option(
        "all-MiniLM-L6-v2", "--embedder", help="Retrieval embedder (all-MiniLM-L6-v2 or 'hashing')."
    ),
    reveal: bool = typer.Option(False, "--reveal", help="Keep canary values in results (off: exact copies and near copies, within "
                                "edit distance 2 of a canary, are redacted)."),
    memory: str = typer.Option(
        "traceless", "--memory", help="Memory system audited (see `traceless memory systems`): each of its native "
        "deletions on a copy, residue per store and file. Default: traceless's own store, every forget mode."),
    memory_config: Path | None = typer.Option(
        None, "--memory-config", help="The memory system's settings (JSON or TOML; for mem0 also its own "
        "Memory.from_config dict). The audit builds a FRESH instance from it in its work dir with synthetic canaries: "
        "it never opens your data (it prints what it moved there; see docs/memory-systems.md)."),
    data: Path | None = typer.Option(
        None, "--data", help="Plant the canaries in these conversations (sessions JSONL) instead of synthetic users."),
    keep_memory: bool = typer.Option(
        False, "--keep-memory", help="Keep the audited memory files (they hold the canaries in plaintext)."),
    serving_cache: int = typer.Option(
        0, "--serving-cache", min=0, max=300, help="Records per group (fixed in advance) of the serving-cache tier, "
        "run after every deletion when traceless serves the model: time to the first token of prompts the server "
        "saw against matched controls (KS), as the native deletion leaves it and after traceless's erasure clears it. "
        "0: not run."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the result as one JSON document (docs/schemas/audit-result.json) instead of "
        "the table."),
    *, engine: EngineOptions,
) -> None:
    """Plant a canary in each user's memory, probe the agent (direct, indirect, jailbreak),
    apply each native deletion of the memory system on a copy (for traceless: every forget
    mode), probe again and count the canary's copies per store and file.

    One engine for every memory system; the results dir is resumable and `traceless report
    DIR` renders it."""
    if fmt not in ("jsonl", "parquet"):
        raise typer.BadParameter("use --format jsonl or --format parquet")
    from traceless.cli._systems import system_audit

    system_audit(memory=memory, memory_config=memory_config, data=data, model=model, S=S, k=k,
                 profiles=profiles, seed=seed, modes=modes, wordings=wordings, max_new_tokens=max_new_tokens,
                 out=out, embedder_name=embedder_name, reveal=reveal, keep_memory=keep_memory, fmt=fmt,
                 as_json=as_json, engine=engine, serving_cache=serving_cache)
