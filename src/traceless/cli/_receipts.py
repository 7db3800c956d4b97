"""Printing a signed receipt and the exit of a failed verification: one place for
``traceless forget`` and ``traceless forget --memory`` (``cli/_erase.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from traceless.cli._common import safe

if TYPE_CHECKING:
    from traceless.forget import Receipt

__all__ = ["VERIFICATION_FAILED_EXIT", "echo_receipt", "exit_if_unverified"]

VERIFICATION_FAILED_EXIT = 11
"""The receipt's verification failed (a check is false)."""


def echo_receipt(receipt: Receipt, path: Path, as_json: bool) -> None:
    """The signed receipt as JSON, or its summary lines and the file it was written to."""
    if as_json:
        typer.echo(receipt.model_dump_json(indent=2))
    else:
        for line in receipt.summary_lines():
            typer.echo(safe(line))
        typer.echo(f"receipt written to {path}")


def exit_if_unverified(receipt: Receipt, see: str) -> None:
    """Exit ``VERIFICATION_FAILED_EXIT`` naming the failed checks (and where the receipt says
    why: ``see``) when the receipt's verification did not pass."""
    if not receipt.verification.passed:
        failed = [k for k, ok in receipt.verification.checks.items() if not ok]
        typer.secho(f"verification FAILED ({', '.join(failed)}); see the receipt's {see}", fg=typer.colors.RED,
                    err=True)
        sys.exit(VERIFICATION_FAILED_EXIT)


def echo_proofs(what: str, stamped_at: object, tsa_cert: Path | None, entry: int | None, size: int | None,
                log: Path | None) -> None:
    """The verified time-stamp and log inclusion of ``what`` (a receipt, a bundle's summary)."""
    if stamped_at is not None:
        typer.echo(f"time-stamp OK: {tsa_cert} vouches the {what} was signed by {stamped_at}")
    if entry is not None:
        typer.echo(f"{log}: the {what} is entry {entry} of {size}; inclusion proof verified against the signed "
                   "checkpoint")
