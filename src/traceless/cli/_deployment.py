"""``--deployment D``: ``scan``, ``forget`` and ``export`` across every instance of a
deployment, and ``forget verify`` of a request bundle. Thin: every decision is in
``traceless._deployment``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from traceless.cli._common import safe
from traceless.cli._progress import progress_bar

if TYPE_CHECKING:
    from traceless._deployment import Deployment

__all__ = ["export_cmd", "forget_deployment", "scan_deployment_cmd", "the_deployment", "verify_bundle_cmd"]


def the_deployment(deployment: Path | None, memory: str | None, memory_config: Path | None) -> Deployment:
    """The deployment file, or one instance (``--memory`` + ``--memory-config``); not both."""
    from traceless._deployment import load_deployment, one_instance
    from traceless.errors import ConfigError

    if deployment is None:
        return one_instance(memory, memory_config)
    if memory is not None or memory_config is not None:
        raise ConfigError("--deployment lists the instances itself: drop --memory/--memory-config, or drop "
                          "--deployment")
    return load_deployment(deployment)


def scan_deployment_cmd(dep: Deployment, users: list[str], literals: list[str], reveal: bool, as_json: bool,
                        since: Path | None) -> None:
    """``scan --deployment D``: each instance's table, then who holds the literals."""
    from traceless._deployment import recheck_deployment, scan_deployment
    from traceless.cli._scan_table import CAME_BACK_EXIT, scan_lines

    if since is not None:
        res = recheck_deployment(dep, since, users=users, literals=literals)
        if as_json:
            typer.echo(res.model_dump_json(indent=2))
        for name, c in res.checks.items():
            typer.echo(f"{name}: {'CAME BACK' if c.came_back else 'clean'} ({c.user_records} records of the user, "
                       f"{c.literal_records} holding a literal, {c.files} files)", err=as_json)
        if res.came_back:
            typer.secho(f"CAME BACK: something of the person of request {res.request_id} is there again; erase again",
                        fg=typer.colors.RED, err=True)
            sys.exit(CAME_BACK_EXIT)
        typer.echo("clean: nothing of the person is there again in any instance", err=as_json)
        return
    with progress_bar(f"scanning {dep.name}", "instances") as tick:
        rep = scan_deployment(dep, users=users, literals=literals, reveal=reveal, on_instance=tick)
    if as_json:
        typer.echo(rep.model_dump_json(indent=2))
    else:
        for s in rep.scans:
            who = f" user {s.report.user}" if s.report.user else ""
            typer.echo(f"== {s.instance} ({s.report.system}){who}")
            for line in scan_lines(s.report):
                typer.echo(safe(line))
        for inst, owners in rep.owners().items():
            typer.echo(f"{inst}: literals held by {', '.join(owners) if owners else 'nobody'}")
    if rep.empty():
        typer.secho("nothing of the user or the literals was found in any instance", fg=typer.colors.YELLOW, err=True)
        sys.exit(7)


def forget_deployment(dep: Deployment, users: list[str], literals: list[str], *, request_id: str | None,
                      out_dir: Path | None, as_json: bool, log: Path | None, tsa: str | None = None) -> None:
    """``forget --deployment D --request-id T``: one bundle, ``request-T/``."""
    from traceless._deployment import erase_deployment
    from traceless.cli._receipts import VERIFICATION_FAILED_EXIT
    from traceless.errors import ConfigError

    if request_id is None:
        raise ConfigError("--deployment needs --request-id TICKET: it names the request's bundle folder and is "
                          "signed into every receipt")
    with progress_bar(f"erasing from {dep.name}", "instances") as tick:
        bundle, folder = erase_deployment(dep, users=users, literals=literals, request_id=request_id,
                                          out_dir=out_dir or Path("."), log=log, on_instance=tick, tsa=tsa)
    if as_json:
        typer.echo(bundle.model_dump_json(indent=2))
    for e in bundle.entries:
        where = f"{e.receipt_file} ({', '.join(e.claims)})" if e.receipt_file else "no receipt"
        typer.echo(f"  {e.instance:<14} {e.system:<14} {e.outcome:<13} {where}", err=as_json)
    typer.echo(f"request {bundle.request_id}: {bundle.verdict} in {len(bundle.instances)} instances; signed bundle "
               f"{folder} (verify: traceless forget verify {folder} --public-key KEY)", err=as_json)
    if bundle.verdict != "erased":
        sys.exit(VERIFICATION_FAILED_EXIT)


def verify_bundle_cmd(path: Path, public_key: str | None, as_json: bool, *, log: Path | None = None,
                      tsa_cert: Path | None = None) -> None:
    """``forget verify BUNDLE``: the summary and every receipt, with the public key alone
    (``log``: the summary's inclusion in that receipt log; ``tsa_cert``: its time-stamp)."""
    from traceless.cli._receipts import VERIFICATION_FAILED_EXIT, echo_proofs
    from traceless.errors import ReceiptError
    from traceless.forget import verify_request_bundle
    from traceless.keys import load_public_key

    res = verify_request_bundle(path, public_key=load_public_key(public_key) if public_key is not None else None,
                                log=log, tsa_cert=tsa_cert)
    if as_json:
        typer.echo(res.model_dump_json(indent=2))
    elif not res.signature_ok:
        raise ReceiptError(f"{path}: the bundle's signature does not verify: it was altered or signed by another key "
                           "(pass the signer's key with --public-key)")
    else:
        for c in res.receipts:
            typer.echo(f"  {c.instance:<14} {c.receipt_file}: {c.status}")
        for f in res.unlisted:
            typer.echo(f"  UNLISTED {f}: a receipt file the signed summary does not name")
        echo_proofs("summary", res.timestamped_at, tsa_cert, res.log_entry, res.log_size, log)
        typer.echo(f"{path}: request {res.request_id}, signer {res.signer}, verdict {res.verdict}: "
                   f"{'OK' if res.ok else 'FAILED'}")
    if not res.ok:
        sys.exit(VERIFICATION_FAILED_EXIT if res.signature_ok else ReceiptError.exit_code)


def export_cmd(
    deployment: Path = typer.Option(None, "--deployment", help="The deployment file (TOML or JSON) listing the "
                                    "instances; or give --memory and --memory-config for one instance."),
    memory: str = typer.Option(None, "--memory", help="One memory system instead of a deployment."),
    memory_config: Path = typer.Option(None, "--memory-config", help="With --memory: the instance's own config."),
    user: list[str] = typer.Option(..., "--user", help="The person's id (repeat for each id they have)."),
    out: Path = typer.Option(..., "--out", help="A new folder for the export (one JSON file per instance and store)."),
    as_json: bool = typer.Option(False, "--json", help="Print the index (docs/schemas/access-export.json)."),
) -> None:
    """Access request (GDPR Art. 15), read-only: what each instance and store holds on the
    person, one JSON file per store (record ids, fields as stored, provenance), and nothing of
    anyone else (records are the person's by the system's own user field or namespace)."""
    from traceless._deployment import export_deployment

    dep = the_deployment(deployment, memory, memory_config)
    with progress_bar(f"exporting from {dep.name}", "instances") as tick:
        res = export_deployment(dep, users=user, out_dir=out, on_instance=tick)
    if as_json:
        typer.echo(res.model_dump_json(indent=2))
        return
    for name, n in res.files.items():
        typer.echo(f"  {name}: {n} records")
    typer.echo(f"exported {sum(res.files.values())} records in {len(res.files)} files to {res.folder}")
