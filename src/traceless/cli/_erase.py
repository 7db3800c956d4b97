"""``traceless scan`` and ``traceless forget --memory SYSTEM``: find, erase and certify in
the user's own memory system (issue #23). Thin: every decision is in ``traceless._erase_api``
and the driver it calls."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from traceless.cli._common import safe
from traceless.cli._receipts import VERIFICATION_FAILED_EXIT, echo_receipt, exit_if_unverified
from traceless.cli._scan_table import CAME_BACK_EXIT, scan_lines

if TYPE_CHECKING:
    from traceless.systems import ErasurePlan, Match, ScanReport, SystemSpec

__all__ = ["CAME_BACK_EXIT", "VERIFICATION_FAILED_EXIT", "forget_memory", "scan_cmd", "scan_lines"]


def _read_only(report: ScanReport) -> str:
    """What the read-only check measured (``scan_system``), never a claim it did not check."""
    if report.files_unchanged is None:
        return "read-only: no file of the instance is readable from here; nothing was compared"
    if report.files_unchanged:
        return (f"read-only: {report.files_checked} files of the instance: the same size and mtime after the scan, "
                "none added or removed")
    return (f"CHANGED during the scan: a file of the instance ({report.files_checked} compared) changed size or "
            "mtime, or one came or went; an application writing to the instance meanwhile also shows here")


def scan_cmd(
    memory: str = typer.Option(None, "--memory", help="The memory system (`traceless memory systems`)."),
    memory_config: Path = typer.Option(
        None, "--memory-config", help="The system's own configuration of the LIVE instance (JSON or TOML; for mem0 "
        "exactly what you pass to Memory.from_config, plus an optional `traceless:` section)."),
    user: list[str] = typer.Option(None, "--user", help="The user id whose records to list (mem0: user_id); repeat "
                                   "it for each id one person has."),
    literal: list[str] = typer.Option(None, "--literal", help="Exact text to find in every record and file (repeatable)."),
    deployment: Path = typer.Option(None, "--deployment", help="Every instance of this deployment file (TOML or "
                                    "JSON: instances of systems with their configs) instead of --memory."),
    reveal: bool = typer.Option(False, "--reveal", help="Show the matching values (default: ids and counts only)."),
    match: str = typer.Option("exact", "--match", help="exact (byte for byte) or normalized (also the literals' "
                              "other spellings: case, spaces, dashes, full-width, zero-width splits)."),
    since: Path = typer.Option(None, "--since", help="Re-check this erasure receipt (`forget --memory`): the same "
                               "--user (and --literal) on the same system; exits 13 if anything of the person is "
                               "there again (the command to schedule)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON document "
                                 "(docs/schemas/scan-result.json; with --since docs/schemas/recheck-result.json)."),
) -> None:
    """Read-only discovery on a live instance: per store, the records of --user and every
    record holding a --literal (ids, field, count), plus every file under the instance's
    paths that holds the literal's bytes. Opens nothing read-write. Exits 7 when nothing
    of the user or the literals is there; with --since (a re-check of a past erasure, or of a
    request bundle with --deployment) 0 when nothing is, 13 when something came back."""
    users = list(user or [])
    if deployment is not None or len(users) > 1:  # several ids of one person: each instance once per id
        from traceless.cli._deployment import scan_deployment_cmd, the_deployment

        return scan_deployment_cmd(the_deployment(deployment, memory, memory_config), users, literal or [], reveal,
                                   as_json, since)
    if memory is None or memory_config is None:
        from traceless.errors import ConfigError

        raise ConfigError("give --memory SYSTEM with --memory-config CFG, or --deployment D")
    from traceless.systems import resolve_system

    spec = resolve_system(memory, memory_config)  # the one lookup and validation of --memory
    if since is not None:
        return _recheck(spec, since, users[0] if users else None, literal or [], reveal, as_json)
    from traceless._erase_api import scan

    report = scan(spec, None, user=users[0] if users else None, literals=literal or [], reveal=reveal,
                  match=_match(match))
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        for line in scan_lines(report):
            typer.echo(safe(line))
        typer.echo(_read_only(report))
    if report.empty():
        typer.secho("nothing of the user or the literals was found", fg=typer.colors.YELLOW, err=True)
        sys.exit(7)


def _recheck(spec: SystemSpec, since: Path, user: str | None, literals: list[str], reveal: bool,
             as_json: bool) -> None:
    """``scan --since R``: the re-check's report; exit ``CAME_BACK_EXIT`` when anything came back."""
    from traceless._erase_api import recheck

    res = recheck(spec, None, since, user=user, literals=literals, reveal=reveal)
    if as_json:
        typer.echo(res.model_dump_json(indent=2))
    else:
        req = f" (request {res.request_id})" if res.request_id else ""
        typer.echo(f"re-check of receipt {res.receipt_id}{req}, erased {_when(res.erased_at)}, checked "
                   f"{_when(res.checked_at)}")
        for line in scan_lines(res.report):
            typer.echo(safe(line))
        for n in res.notes:
            typer.echo(f"note: {n}")
        typer.echo(_read_only(res.report))
    if res.came_back:
        typer.secho(f"CAME BACK: {res.user_records} records of the user, {res.literal_records} holding a literal, "
                    f"{res.files} files holding a literal's bytes ({len(res.resurrected)} records are the very ones "
                    "the receipt erased); erase again", fg=typer.colors.RED, err=True)
        sys.exit(CAME_BACK_EXIT)
    typer.echo("clean: nothing of the person is there again", err=as_json)


def _when(t: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(t))


def plan_lines(plan: ErasurePlan) -> list[str]:
    per: dict[str, int] = {}
    for a in plan.actions:
        per[a.store] = per.get(a.store, 0) + 1
    out = [f"plan ({len(plan.actions)} records): " + ", ".join(f"{s}={n}" for s, n in per.items())]
    out += [f"  {a.action} {a.store}/{a.record_id} ({a.reason})" for a in plan.actions]
    out += [f"  then {c}" for c in plan.compaction]
    if plan.held_by_others:
        out.append(f"  left untouched: the literals are held by {plan.held_by_others} other users' records "
                   "(a literal acts on the requester's records only)")
    return out


def _match(match: str) -> Match:
    if match not in ("exact", "normalized"):
        from traceless.errors import ConfigError

        raise ConfigError(f"--match must be exact or normalized, not {match!r}")
    return "normalized" if match == "normalized" else "exact"


def forget_memory(memory: str, memory_config: Path | None, user: str | None, literals: list[str], *,
                  dry_run: bool, receipt_out: Path | None, as_json: bool, certify: bool = False,
                  model: str | None = None, wordings: int = 1, log: Path | None = None,
                  request_id: str | None = None, tsa: str | None = None, match: str = "exact") -> None:
    """``traceless forget --memory SYSTEM``: plan → execute → verify → sign (``--dry-run``: the plan);
    ``--certify``: then the audit's probes through the system's own retrieval, signed in; ``--log``:
    then the receipt appended to that receipt log. Without ``--receipt`` the receipt is
    ``receipt-[<request id>-]<receipt id>.json`` here, never over an earlier one."""
    from traceless._erase_api import erase_request, plan_erasure
    from traceless.cli._engine import engine_from_env
    from traceless.errors import ConfigError
    from traceless.systems import resolve_system

    if memory_config is None:
        raise ConfigError("--memory needs --memory-config CFG: the configuration of the live instance to erase from")
    spec = resolve_system(memory, memory_config)  # the one lookup and validation of --memory
    if dry_run:
        plan = plan_erasure(spec, None, user=user, literals=literals, match=_match(match))
        if as_json:
            typer.echo(plan.model_dump_json(indent=2))
        else:
            for line in plan_lines(plan):
                typer.echo(safe(line))
            typer.echo("dry run: nothing was changed")
        return
    receipt, out = erase_request(spec, None, user=user, literals=literals, receipt=receipt_out,
                                 receipt_dir=Path(".") if receipt_out is None else None, request_id=request_id,
                                 certify=certify, model=model, wordings=wordings,
                                 engine=engine_from_env() if certify else None, log=log, tsa=tsa,
                                 match=_match(match))
    assert out is not None
    echo_receipt(receipt, out, as_json)
    if log is not None:  # erase appended it: say where, from its verified inclusion proof
        from traceless.forget import verify_logged

        inc = verify_logged(log, receipt)
        typer.echo(f"logged as entry {inc.index} of {inc.size} in {log} (inclusion proof verified)", err=as_json)
    exit_if_unverified(receipt, "notes")
