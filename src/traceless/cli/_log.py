"""``traceless log verify`` and ``traceless log append``: the append-only receipt log
(``forget --log DIR``). Thin: every check is in ``traceless.forget`` (``_log``, ``_merkle``,
``_note``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from traceless.errors import ReceiptLogError

if TYPE_CHECKING:
    from traceless.forget import LogAppend, LogVerifyResult, Receipt, RequestBundle

__all__ = ["echo_logged", "log_app"]

log_app = typer.Typer(help="The append-only receipt log (forget --log DIR): verify inclusion and consistency "
                           "with the public key alone; append receipts.")

_PUBLIC_KEY_HELP = ("The signer's Ed25519 public key (hex, or the file `traceless keys export` wrote). "
                    "Default: this machine's signing key. No secret is needed.")


def echo_logged(res: LogAppend, *, err: bool = False) -> None:
    """One line (to stderr with ``err``, e.g. after a JSON document): where the receipt sits in
    the log, and the checkpoint that now signs it."""
    if res.already:
        typer.echo(f"already in the log {res.log} as entry {res.index} of {res.size}", err=err)
        return
    typer.echo(f"logged as entry {res.index} of {res.size} in {res.log} (checkpoint {res.log}/checkpoints/"
               f"{res.size}, root {res.root[:16]}…)", err=err)


def _read_old(old: Path) -> str:
    try:
        return old.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReceiptLogError(f"--old {old} cannot be read as a checkpoint ({type(e).__name__}); give a file "
                              "copied from the log's checkpoint") from None


@log_app.command("verify")
def verify_cmd(
    log: Path = typer.Option(..., "--log", help="The log folder (the one given to `forget --log`)."),
    public_key: str = typer.Option(None, "--public-key", help=_PUBLIC_KEY_HELP),
    receipt: Path = typer.Option(None, "--receipt", help="Check this receipt's (or request bundle's: its folder or "
                                 "bundle.json) inclusion proof against the latest signed checkpoint."),
    old: Path = typer.Option(None, "--old", help="A checkpoint kept earlier (a copy of DIR/checkpoint): check "
                             "the consistency proof that the log only grew since."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (docs/schemas/log-verify.json)."),
) -> None:
    """Check the latest checkpoint's signature and that every entry hashes to its root; with
    --receipt the receipt's inclusion proof, with --old the consistency proof. Any failure is
    one line and exit 9. Never creates a key."""
    from traceless.forget import verify_log
    from traceless.keys import load_public_key

    pub = load_public_key(public_key) if public_key is not None else None
    r = _signed(receipt) if receipt is not None else None
    res = verify_log(log, pub, receipt=r, old=_read_old(old) if old is not None else None, old_name=f"--old {old}")
    if as_json:
        typer.echo(res.model_dump_json(indent=2))
        return
    for line in _lines(res, receipt, old):
        typer.echo(line)


def _signed(path: Path) -> Receipt | RequestBundle:
    """A receipt file, or a request bundle (its folder or ``bundle.json``): its signed summary."""
    from traceless.forget import is_bundle, load_bundle, load_receipt

    return load_bundle(path)[0] if is_bundle(path) else load_receipt(path)


def _lines(res: LogVerifyResult, receipt: Path | None, old: Path | None) -> list[str]:
    cp = res.checkpoint
    out = [f"{res.log}: checkpoint OK (origin {cp.origin}, signer {res.signer}); its {cp.size} entries hash to "
           f"its root {cp.root[:16]}…"]
    if res.inclusion is not None:
        inc = res.inclusion
        name = inc.receipt_id if inc.receipt_id.startswith("bundle ") else f"receipt {inc.receipt_id}"
        out.append(f"{receipt}: {name} is entry {inc.index} of {inc.size}; its inclusion proof "
                   f"({len(inc.proof)} hashes) verifies against the checkpoint")
    if res.consistency is not None:
        c = res.consistency
        out.append(f"{old}: consistent: the log of {c.old_size} entries it signs is a prefix of the current "
                   f"{cp.size} (consistency proof, {len(c.proof)} hashes)")
    return out


@log_app.command("append")
def append_cmd(
    receipts: list[Path] = typer.Argument(..., help="Receipt JSON files (or request bundles) signed by this "
                                          "machine's key."),
    log: Path = typer.Option(..., "--log", help="The log folder (created on first use)."),
) -> None:
    """Append receipts written earlier (e.g. by `forget receipt --out`) to the log, signing a
    new checkpoint after each. A receipt already there is not appended twice."""
    from traceless.forget import append_receipt, check_log

    loaded = [_signed(p) for p in receipts]  # every file read before the log changes
    check_log(log)
    for r in loaded:
        echo_logged(append_receipt(log, r))
