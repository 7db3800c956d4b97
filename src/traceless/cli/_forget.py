"""``traceless forget`` (run a mode), ``forget modes``, ``forget verify``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from traceless.cli._common import backend, embedder, safe, say_migrating
from traceless.cli._receipts import VERIFICATION_FAILED_EXIT as VERIFICATION_FAILED_EXIT
from traceless.cli._receipts import echo_proofs, echo_receipt, exit_if_unverified
from traceless.errors import ConfigError, ReceiptError
from traceless.memory import redact_url, store_exists  # the light part (traceless.memory._backend)

if TYPE_CHECKING:
    from traceless.forget import ForgetMode, ForgetTarget, Receipt
    from traceless.memory import MemoryStore, MemoryWriter

# Each command imports what it uses (traceless.forget and traceless.memory re-export lazily):
# `forget modes` needs only the mode registry and `forget verify` only the receipt and the
# key, not the store, numpy or the models, which a forget itself needs (issue #13.4).

__all__ = ["forget_app"]

forget_app = typer.Typer(
    help="Forget a record, literal, session or user with a named mode; list modes; verify receipts.",
    invoke_without_command=True,
)

NOTHING_MATCHED_EXIT = 7
NOT_ERASED_EXIT = 12
"""The mode did what it promises (``passed``) but the target is still present in the
owner's data (``erased: false``): raw_only, exact, raw_plus_resummarize, noop, ..."""


def _target(kind: str, value: str, owner: str | None, attribute: str, match: str) -> ForgetTarget:
    from pydantic import ValidationError

    from traceless.forget import ForgetTarget

    try:
        return ForgetTarget(kind=kind, value=value, owner=owner if kind != "user" else value,
                            attribute=attribute, match=match)
    except ConfigError as e:
        raise ConfigError(f"--{kind}: {e}") from None
    except ValidationError as e:
        raise ConfigError(f"--{kind}: {e.errors()[0]['msg'].removeprefix('Value error, ')}") from None


def _forget_deployment(deployment: Path, memory: str | None, memory_config: Path | None, users: list[str],
                       literals: list[str], *, per_instance: bool, request_id: str | None, out_dir: Path | None,
                       as_json: bool, log: Path | None, tsa: str | None) -> None:
    """``forget --deployment D``: one request across every instance (``traceless.cli._deployment``)."""
    from traceless.cli._deployment import forget_deployment, the_deployment

    if per_instance:
        raise ConfigError("--dry-run and --certify are per instance: run them with --memory on each instance")
    forget_deployment(the_deployment(deployment, memory, memory_config), users, literals, request_id=request_id,
                      out_dir=out_dir, as_json=as_json, log=log, tsa=tsa)


def _refuse_store_options(**given: str | None) -> None:
    """``--db``/``--mode`` name a traceless store's erasure: with ``--memory`` they were ignored
    silently (issue 40.9); refused before anything is opened."""
    both = [f"--{k}" for k, v in given.items() if v is not None]
    if both:
        raise ConfigError(f"{' and '.join(both)} cannot be combined with --memory (they choose a traceless store's "
                          "erasure; --memory erases from a system's live instance): drop "
                          f"{'them' if len(both) > 1 else 'it'}, or drop --memory")


def _refuse_store_matching(live: bool, match: str, record: str | None, session: str | None,  # noqa: PLR0913
                           owner: str | None, embedder: str | None, gate: bool, memory: bool = False) -> None:
    """Options of the traceless store's target and matching that a system's ``live`` instance
    does not take: with ``--memory``/``--deployment`` they were ignored silently; refused first."""
    if not live:
        return
    given = [o for o, on in (("--match normalized", match != "exact" and not memory), ("--record", record is not None),
                             ("--session", session is not None), ("--owner", owner is not None),
                             ("--embedder", embedder is not None), ("--no-gate", not gate)) if on]
    if given:
        raise ConfigError(f"{', '.join(given)} cannot be combined with --memory or --deployment: a system's live "
                          "instance is erased by --user and --literal (--match normalized with --memory only); drop "
                          f"{'them' if len(given) > 1 else 'it'}")


@forget_app.callback()
def run_forget(
    ctx: typer.Context,
    db: str = typer.Option(None, "--db", help="Memory file or postgresql:// URL."),
    mode: str = typer.Option(None, "--mode", help="Forget mode (see `traceless forget modes`)."),
    record: str = typer.Option(None, "--record", help="Raw record id (with --owner)."),
    literals: list[str] = typer.Option(None, "--literal", help="Exact text: every artifact holding it (repeatable)."),
    session: str = typer.Option(None, "--session", help="Session id (with --owner)."),
    users: list[str] = typer.Option(None, "--user", help="User id: everything they own (repeatable with --deployment)."),
    owner: str = typer.Option(None, "--owner", help="Owner in scope for --literal/--session/--record."),
    attribute: str = typer.Option("secret", "--attribute", help="Attribute name for the gate descriptor."),
    match: str = typer.Option("exact", "--match", help="exact (byte for byte, paper 001) or normalized (also case, "
                              "spacing, dash, zero-width, Unicode variants and a copy split across two records)."),
    gate: bool = typer.Option(True, "--gate/--no-gate", help="Store a keyed gate descriptor for a literal."),
    model: str = typer.Option(None, "--model", help="Re-summarizing modes' summarizer (default: the summaries' own); "
                              "with --certify the agent's model."),
    embedder_name: str = typer.Option(None, "--embedder", help="Re-embedding's embedder (default: the vectors' own)."),
    receipt_out: Path = typer.Option(None, "--receipt", help="Receipt file (default: receipt-<id>.json)."),
    as_json: bool = typer.Option(False, "--json", help="Print the signed receipt as JSON (docs/schemas/receipt.json; "
                                 "with --dry-run the plan, docs/schemas/erasure-plan.json)."),
    certify: bool = typer.Option(
        False, "--certify", help="After the forget, ask the agent on this memory the audit's probes for the literal "
        "and count its copies per store; sign the result into the receipt (a behavioural certificate; "
        "--literal only; the agent's model is --model, default qwen2.5-coder-0.5b-instruct)."),
    probe_wordings: int = typer.Option(1, "--probe-wordings", min=1, help="Probe wordings per level (--certify)."),
    memory: str = typer.Option(None, "--memory", help="Erase from this memory system's LIVE instance (e.g. mem0) "
                               "instead of a traceless store: its own deletions plus the residue they leave, "
                               "compaction, re-scan, bystander check, signed receipt (needs --memory-config, --user)."),
    memory_config: Path = typer.Option(None, "--memory-config", help="With --memory: the instance's own config."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --memory: print the plan; change nothing."),
    # the append-only receipt log (issue 38.4; traceless.cli._log)
    log_dir: Path = typer.Option(None, "--log", help="Also append the receipt to this receipt log (`traceless log`)."),
    tsa: str = typer.Option(None, "--tsa", help="Time-stamp the receipt (each receipt and the bundle's summary with "
                            "--deployment) by this RFC 3161 authority (only the signature's SHA-256 is sent); "
                            "`forget verify --tsa-cert CA`."),
    deployment: Path = typer.Option(None, "--deployment", help="One request across every instance of this file "
                                    "(TOML/JSON): one signed bundle request-<id>/ (needs --request-id)."),
    out_dir: Path = typer.Option(None, "--out", help="With --deployment: the bundle's folder (default: here)."),
    request_id: str = typer.Option(None, "--request-id", help="The erasure request's ticket id (e.g. T-1042): signed "
                                   "into the receipt, in its default file name receipt-<request id>-<receipt id>.json "
                                   "and in the local request log (<state dir>/requests.jsonl)."),
) -> None:
    """Forget with MODE. Prints a receipt summary and writes the signed receipt file.

    Exits non-zero when the receipt's verification failed (exit 11; with --certify also when
    the agent still produced the literal or a store still holds it), nothing matched (7), or
    the mode passed but does not erase the target everywhere (12: ``erased: false``)."""
    if ctx.invoked_subcommand is not None:
        return
    _refuse_store_matching(deployment is not None or memory is not None, match, record, session, owner, embedder_name,
                           gate, memory=memory is not None and deployment is None)
    if deployment is not None:
        _refuse_store_options(db=db, mode=mode)
        return _forget_deployment(deployment, memory, memory_config, list(users or []), literals or [], per_instance=
                                  dry_run or certify, request_id=request_id, out_dir=out_dir, as_json=as_json, log=log_dir,
                                  tsa=tsa)
    if len(users or []) > 1:
        raise ConfigError("several --user ids are one request across instances: give them with --deployment D "
                          "(or erase each id with its own command)")
    user = users[0] if users else None
    if memory is not None:
        from traceless.cli._erase import forget_memory

        _refuse_store_options(db=db, mode=mode)

        return forget_memory(memory, memory_config, user, literals or [], dry_run=dry_run, receipt_out=receipt_out,
                             as_json=as_json, certify=certify, model=model, wordings=probe_wordings, log=log_dir,
                             request_id=request_id, tsa=tsa, match=match)
    if len(literals or []) > 1:
        raise ConfigError("give one --literal (several are accepted with --memory only)")
    if db is None or mode is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)
    from traceless.forget import FORGET_MODES

    FORGET_MODES.get(mode)  # an unknown mode is named (with the known ones) before the target is checked
    _forget_store(db, mode, _checked_target(record, literals[0] if literals else None, session, user, owner, attribute,
                                            match, certify),
                  withhold=[user, owner, literals[0] if literals else None], gate=gate, certify=certify, model=model,
                  embedder_name=embedder_name, wordings=probe_wordings, receipt_out=receipt_out, as_json=as_json,
                  log_dir=log_dir, request_id=request_id, tsa=tsa)


def _forget_store(db: str, mode: str, target: ForgetTarget, *, withhold: list[str | None], gate: bool,
                  certify: bool, model: str | None, embedder_name: str | None, wordings: int,
                  receipt_out: Path | None, as_json: bool, log_dir: Path | None, request_id: str | None,
                  tsa: str | None = None) -> None:
    """``traceless forget --db DB --mode MODE``: every output validated, then the forget, then the receipt."""
    from traceless._api import forget
    from traceless.forget import (
        FORGET_MODES,
        check_log,
        check_receipt_path,
        check_request_id,
        check_tsa_url,
        receipt_file_name,
    )
    from traceless.memory import MemoryStore

    spec = FORGET_MODES.get(mode)
    rid = check_request_id(request_id, withhold) if request_id is not None else None
    if not store_exists(db):
        raise ConfigError(f"{db} does not exist; create it with `traceless memory add --db {db} SESSIONS.jsonl`")
    # every output is validated before anything is forgotten
    path = check_receipt_path(receipt_out) if receipt_out is not None else None
    if log_dir is not None:
        check_log(log_dir)
    if tsa is not None:
        check_tsa_url(tsa)
    with MemoryStore(db, access="write", on_migrate=say_migrating(db)) as store:
        _say_finished(store)
        writer = _writer_for(store, spec, model, embedder_name)
        receipt = forget(store, target, mode, writer=writer, gate=gate, certify=certify, model=model,
                         embedder=embedder_name, wordings=wordings, request_id=rid)
    path = path or Path(receipt_file_name(receipt.receipt_id, receipt.request_id))
    if tsa is not None:  # the forget is done and signed: the stamp only dates it
        receipt = _stamped(receipt, tsa, path, withhold)
    _finish(receipt, path, as_json, log_dir, mode, withhold=withhold)


def _stamped(receipt: Receipt, tsa: str, path: Path, withhold: list[str | None]) -> Receipt:
    """The receipt time-stamped by ``tsa``; when the TSA fails, the signed receipt is written
    and logged as a request without the stamp, and the error says so."""
    from traceless.forget import log_request, stamp_receipt, verdict_of, write_receipt
    from traceless.paths import state_dir

    try:
        return stamp_receipt(receipt, tsa)
    except ConfigError as e:
        write_receipt(receipt, path)
        log_request(state_dir(), event="forget", system="traceless", user=receipt.target.owner,
                    request_id=receipt.request_id, verdict=verdict_of(receipt), receipts=[(receipt, path)],
                    withhold=withhold)
        raise ConfigError(f"{e}; the forget itself is done and its receipt {path} is signed, without a "
                          "time-stamp") from None


def _finish(receipt: Receipt, path: Path, as_json: bool, log_dir: Path | None, mode: str, *,
            withhold: list[str | None]) -> None:
    """Write and print the receipt (and append it to ``--log``), log the request (``withhold``: the
    raw ids and literal, kept out of the request log); exit as its result says."""
    from traceless.cli._log import echo_logged
    from traceless.forget import append_receipt, log_request, verdict_of, write_receipt
    from traceless.paths import state_dir

    write_receipt(receipt, path)
    log_request(state_dir(), event="forget", system="traceless", user=receipt.target.owner,
                request_id=receipt.request_id, verdict=verdict_of(receipt), receipts=[(receipt, path)],
                withhold=withhold)
    echo_receipt(receipt, path, as_json)
    if log_dir is not None:
        echo_logged(append_receipt(log_dir, receipt), err=as_json)
    if not receipt.matched:
        typer.secho("nothing matched the target; nothing was changed", fg=typer.colors.YELLOW, err=True)
        sys.exit(NOTHING_MATCHED_EXIT)
    exit_if_unverified(receipt, "warnings")
    if receipt.erased is False:
        typer.secho(f"NOT ERASED: mode {mode} did what it promises, but the target is still present in this "
                    "owner's data (erased: false); use full_purge, tombstone or lineage_closure to erase it",
                    fg=typer.colors.YELLOW, err=True)
        sys.exit(NOT_ERASED_EXIT)


def _checked_target(record: str | None, literal: str | None, session: str | None, user: str | None,
                    owner: str | None, attribute: str, match: str, certify: bool) -> ForgetTarget:
    """The one target the options name, refused (``ConfigError``) before anything opens when
    they name none or several, cross owners, or ask what the target cannot give."""
    given = [(k, v) for k, v in (("record", record), ("literal", literal), ("session", session),
                                 ("user", user)) if v is not None]
    if len(given) != 1:
        raise ConfigError("give exactly one target: --record ID, --literal TEXT, --session ID or --user ID")
    kind, value = given[0]
    if kind in ("literal", "session", "record") and owner is None:
        raise ConfigError(f"--{kind} needs --owner USER: forget never crosses owners"
                          + (" (a record of another owner is never forgotten)" if kind == "record" else ""))
    if kind == "user" and owner is not None and owner != user:
        raise ConfigError(f"--user {user!r} erases that user, but --owner names {owner!r}: give one of them "
                          "(--user alone erases everything the user owns)")
    if match not in ("exact", "normalized"):
        raise ConfigError("--match must be exact or normalized")
    if certify and kind != "literal":
        raise ConfigError("--certify needs --literal: the certificate probes the agent for the literal's value")
    return _target(kind, value, owner, attribute, match)


def _writer_for(store: MemoryStore, spec: ForgetMode, model: str | None, embedder_name: str | None) -> MemoryWriter:
    """The models the mode declares it needs (and only when the store holds what they rebuild)."""
    from traceless.memory import MemoryWriter, WriteConfig

    vectors = store.artifacts(tier="embedding", limit=1)  # whether any exists: never the whole store
    use_embed = spec.needs_embedder and bool(vectors)
    emb_name = embedder_name or (str(vectors[0].meta.get("embedder", "all-MiniLM-L6-v2")) if vectors else "")
    use_llm = spec.needs_summarizer or (spec.uses_recorded_summarizer and _llm_model(store) is not None)
    summarizer = backend(model or _llm_model(store) or "qwen2.5-coder-0.5b-instruct") if use_llm else None
    return MemoryWriter(store, summarizer=summarizer, embedder=embedder(emb_name) if use_embed else None,
                        config=WriteConfig(levels=(), embed=use_embed))


def _say_finished(store: MemoryStore) -> None:
    for rid in store.finished_erasures:
        typer.secho(f"finished the physical erasure of {rid}, interrupted earlier (old bytes are gone now)",
                    fg=typer.colors.YELLOW, err=True)


def _llm_model(store: MemoryStore) -> str | None:
    """The summarizer recorded in the lineage of the store's LLM summaries, if any."""
    for kind in ("key_facts", "session_summary"):
        for a in store.artifacts(tier="summary", kind=kind, limit=1):
            for e in store.parents(a.id):
                if e.op == "summarize" and e.params.get("model"):
                    return str(e.params["model"])
    return None


@forget_app.command("modes")
def modes() -> None:
    """List the forget modes, one line each."""
    from traceless.forget import FORGET_MODES

    for e in FORGET_MODES.entries():
        claims = ",".join(t.value for t in e.obj.claims) or "-"
        typer.echo(f"{e.name:<22} clears: {claims:<30} {e.help}")


@forget_app.command("verify")
def verify(
    receipt: Path = typer.Argument(..., help="Receipt JSON file, or a request bundle folder (forget --deployment)."),
    db: str = typer.Option(None, "--db", help="Also check the memory file (or postgresql:// URL): same store, removed "
                           "ids still absent, and none of what the receipt erased in its rows or bytes."),
    public_key: str = typer.Option(None, "--public-key",
                                   help="The signer's Ed25519 public key (hex, or the file `traceless keys export` "
                                        "wrote). Default: this machine's signing key. No secret is needed."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (docs/schemas/verify-result.json)."),
    log: Path = typer.Option(None, "--log", help="Also check the receipt's inclusion proof in this receipt log "
                             "(`forget --log`) against its latest signed checkpoint."),
    tsa_cert: Path = typer.Option(None, "--tsa-cert", help="Also check the receipt's RFC 3161 time-stamp (forget "
                                  "--tsa) against this TSA root certificate (PEM), and print the time it vouches for."),
) -> None:
    """Check a receipt's signature (and, with --db, that it belongs to that store and what it
    removed is still gone; with --log, that it is in that log). Exits non-zero if anything does
    not hold. Never creates keys."""
    from traceless.forget import is_bundle, load_receipt, verify_receipt
    from traceless.keys import load_public_key

    if is_bundle(receipt):  # a request bundle (forget --deployment): the summary and every receipt in it
        if db is not None:
            raise ConfigError("--db checks one receipt against its store; verify the bundle without it, or one of "
                              "its receipts with --db")
        from traceless.cli._deployment import verify_bundle_cmd

        return verify_bundle_cmd(receipt, public_key, as_json, log=log, tsa_cert=tsa_cert)
    r = load_receipt(receipt)
    pub = load_public_key(public_key) if public_key is not None else None
    res, finished = verify_receipt(r, public_key=pub, db=db, log=log, tsa_cert=tsa_cert)
    for rid in finished:
        typer.secho(f"finished the physical erasure of {rid}, interrupted earlier", fg=typer.colors.YELLOW, err=True)
    if as_json:
        typer.echo(res.model_dump_json(indent=2))
        failed_exit = NOTHING_MATCHED_EXIT if res.nothing_matched else VERIFICATION_FAILED_EXIT
        sys.exit(0 if res.ok else failed_exit if res.signature_ok else ReceiptError.exit_code)
    if not res.signature_ok:
        raise ReceiptError(f"{receipt}: signature does not verify: the receipt was altered or signed by another "
                           "key (pass the signer's key with --public-key)")
    erased = "" if r.erased is None else f", erased={r.erased}"  # only where the receipt records it
    typer.echo(f"{receipt}: signature OK (signer {r.signer}, mode {r.mode}, passed={r.verification.passed}{erased})")
    if res.store_checked:
        if not res.same_store:
            raise ReceiptError(f"{redact_url(db)} is not the store this receipt was made on (its store id differs)")
        if not res.removed_still_absent:
            raise ReceiptError(f"artifact(s) the receipt removed exist again in {redact_url(db)}")
        if res.pending_erasure:
            raise ReceiptError(f"{redact_url(db)}: the physical erasure of {res.pending_erasure} is still pending (a reader "
                               "holds an old snapshot); close other connections and run this again")
        if res.old_keys_gone is False:
            raise ReceiptError(f"{redact_url(db)}: a master key file this receipt's forget replaced (or an older one) "
                               "still exists and would decrypt a copy of the store taken before; open the store "
                               "with write access (it shreds superseded keys) and run this again")
        if res.material_absent is False:
            where = ", ".join(f"{Path(k).name}: {n}" for k, n in res.material_copies.items())
            raise ReceiptError(f"{redact_url(db)} still holds what the receipt erased ({where}): a backup or clone "
                               "taken before the forget, or the erasure did not hold")
        scanned = ("re-scanned: none of what it erased is there" if res.material_absent
                   else "not re-scanned (the receipt predates erased-material digests)")
        typer.echo(f"{redact_url(db)}: same store; every artifact the receipt removed is still absent; {scanned}")
    echo_proofs("receipt", res.timestamped_at, tsa_cert, res.log_entry, res.log_size, log)
    if res.certified and not res.certificate_failures:
        c = r.certificate
        assert c is not None
        typer.echo(f"certificate OK: {len(c.probes)} probes on {c.model.get('name', '?')} produced no copy of the "
                   f"literal; no store holds it ({', '.join(c.store_copies)})")
    for reason in res.certificate_failures:
        typer.secho(f"certificate FAILED: {reason}", fg=typer.colors.RED, err=True)
    if res.nothing_matched:
        typer.secho("the receipt records that its target matched nothing: it proves no erasure (nothing to erase)",
                    fg=typer.colors.YELLOW, err=True)
        sys.exit(NOTHING_MATCHED_EXIT)
    if not res.receipt_passed:
        typer.secho(f"the receipt records a FAILED verification: {', '.join(res.failed_checks)}",
                    fg=typer.colors.RED, err=True)
    if not res.receipt_passed or res.certificate_failures:
        sys.exit(VERIFICATION_FAILED_EXIT)


@forget_app.command("receipts")
def receipts(db: str = typer.Option(..., "--db", help="Memory file or postgresql:// URL.")) -> None:
    """List the receipts stored in a memory file (id, time, mode, target, passed)."""
    from traceless.forget import Receipt
    from traceless.memory import MemoryStore

    if not store_exists(db):
        raise ConfigError(f"{db} does not exist")
    with MemoryStore(db, access="read") as store:
        rows = store.receipts()
    for rid, body in rows:
        r = Receipt.model_validate_json(body)
        typer.echo(safe(f"{rid}  {r.created_at:.0f}  {r.mode:<22} {r.target.kind}:{r.target.ref}  "
                        f"passed={r.verification.passed}" + ("" if r.erased is None else f"  erased={r.erased}")))
    typer.echo(f"{len(rows)} receipts")


@forget_app.command("receipt")
def export_receipt(
    receipt_id: str = typer.Argument(..., help="Receipt id (see `traceless forget receipts`)."),
    db: str = typer.Option(..., "--db", help="Memory file or postgresql:// URL."),
    out: Path = typer.Option(..., "--out", help="File to write the signed receipt to."),
) -> None:
    """Export one stored receipt to a file."""
    from traceless.forget import Receipt, check_receipt_path, write_receipt
    from traceless.memory import MemoryStore

    if not store_exists(db):
        raise ConfigError(f"{db} does not exist")
    path = check_receipt_path(out)
    with MemoryStore(db, access="read") as store:
        body = store.receipt(receipt_id)
    write_receipt(Receipt.model_validate_json(body), path)
    typer.echo(f"receipt {receipt_id} written to {path}")
