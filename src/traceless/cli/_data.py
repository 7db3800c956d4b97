"""``traceless data list|path|import``: shipped datasets and dataset importers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from traceless.datasets import DATASETS, IMPORTERS, dataset_path, import_file, write_sessions_atomic

__all__ = ["data_app"]

data_app = typer.Typer(
    help="Datasets shipped with traceless, and importers from LoCoMo, LongMemEval and OpenAI-style chat logs.",
    no_args_is_help=True,
)


@data_app.command("list")
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Show the shipped datasets, their license and what they hold."""
    rows = [{"name": d.name, "license": d.obj.license, "description": d.obj.description} for d in DATASETS.entries()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        typer.echo(f"{r['name']}\t{r['description']}\n\tlicense: {r['license']}")


@data_app.command("path")
def path_cmd(name: str = typer.Argument(..., help="A name from `traceless data list`.")) -> None:
    """Print the path of a plain JSON copy of a shipped dataset (decompressed once into the cache)."""
    typer.echo(str(dataset_path(name)))


@data_app.command("import")
def import_cmd(
    fmt: str = typer.Argument(..., help=f"Input format: {', '.join(IMPORTERS.names())}."),
    file: Path = typer.Argument(..., help="The file to convert."),
    out: Path | None = typer.Option(None, "-o", "--out", help="Output sessions.jsonl (default: stdout)."),
    user: str = typer.Option("user", "--user", help="Owner of conversations that name none (openai-messages)."),
) -> None:
    """Convert a dataset to the generic session format (README "Sessions format").

    The whole file is validated first; on error the first offending record is named and
    nothing is written."""
    res = import_file(fmt, file, default_user=user)
    if out is None:
        for s in res.sessions:
            sys.stdout.write(s.model_dump_json(exclude_defaults=True) + "\n")
    else:
        write_sessions_atomic(res.sessions, out)
    users = len({s.user_id for s in res.sessions})
    qa = sum(len(s.qa) for s in res.sessions)
    where = f" → {out}" if out is not None else ""
    typer.echo(f"imported {len(res.sessions)} session(s) of {users} user(s), {qa} QA pair(s){where}", err=True)
    for n in res.notes:
        typer.echo(f"note: {n}", err=True)
