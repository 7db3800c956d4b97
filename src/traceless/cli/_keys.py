"""``traceless keys export``: the public half of the receipt-signing key."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from traceless.keys import key_id, public_key_bytes, signing_key

__all__ = ["keys_app"]

keys_app = typer.Typer(help="The receipt-signing key: export its public half for verifiers.", no_args_is_help=True)


@keys_app.command("export")
def export(out: Path = typer.Option(None, "--out", help="Also write it to this file (for --public-key).")) -> None:
    """Print the Ed25519 public key (and its id) that verifies this machine's receipts.

    Give it to whoever checks receipts: `traceless forget verify R --public-key FILE`.
    It is not a secret; the private key never leaves $TRACELESS_HOME."""
    pub = public_key_bytes(signing_key(create=True))
    text = f"key_id: {key_id(pub)}\npublic_key: {pub.hex()}\n"
    if out is not None:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    typer.echo(text, nl=False)
