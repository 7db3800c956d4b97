"""``traceless forget`` (run a mode), ``forget modes``, ``forget verify``."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from traceless.cli._common import backend, embedder
from traceless.errors import ConfigError, ReceiptError
from traceless.forget import FORGET_MODES, ForgetTarget, forget, load_receipt, verify_signature, write_receipt
from traceless.memory import MemoryStore, MemoryWriter, WriteConfig, WriteGate

__all__ = ["forget_app"]

forget_app = typer.Typer(
    help="Forget a record, literal, session or user with a named mode; list modes; verify receipts.",
    invoke_without_command=True,
)

NOTHING_MATCHED_EXIT = 7


@forget_app.callback()
def run_forget(
    ctx: typer.Context,
    db: Path = typer.Option(None, "--db", help="Memory file."),
    mode: str = typer.Option(None, "--mode", help="Forget mode (see `traceless forget modes`)."),
    record: str = typer.Option(None, "--record", help="Raw record id."),
    literal: str = typer.Option(None, "--literal", help="Exact text: every artifact containing it."),
    session: str = typer.Option(None, "--session", help="Session id (with --owner)."),
    user: str = typer.Option(None, "--user", help="User id: everything they own (right to erasure)."),
    owner: str = typer.Option(None, "--owner", help="Owner in scope for --literal/--session."),
    attribute: str = typer.Option("secret", "--attribute", help="Attribute name for the gate descriptor."),
    gate: bool = typer.Option(True, "--gate/--no-gate", help="Store a keyed gate descriptor for a literal."),
    model: str = typer.Option(None, "--model",
                              help="Summarizer for modes that re-summarize (default: the one that wrote the summaries)."),
    embedder_name: str = typer.Option(None, "--embedder",
                                      help="Embedder for re-embedding (default: the one that wrote the vectors)."),
    receipt_out: Path = typer.Option(None, "--receipt", help="Receipt file (default: receipt-<id>.json)."),
) -> None:
    """Forget with MODE. Prints a receipt summary and writes the signed receipt file."""
    if ctx.invoked_subcommand is not None:
        return
    if db is None or mode is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)
    spec = FORGET_MODES.get(mode)
    given = [(k, v) for k, v in (("record", record), ("literal", literal), ("session", session),
                                 ("user", user)) if v is not None]
    if len(given) != 1:
        raise ConfigError("give exactly one target: --record ID, --literal TEXT, --session ID or --user ID")
    kind, value = given[0]
    if kind in ("literal", "session") and owner is None:
        raise ConfigError(f"--{kind} needs --owner USER: forget never crosses owners")
    target = ForgetTarget(kind=kind, value=value, owner=owner if kind != "user" else value,
                          attribute=attribute)
    if not db.exists():
        raise ConfigError(f"{db} does not exist; create it with `traceless memory add --db {db} SESSIONS.jsonl`")
    with MemoryStore(db) as store:
        vectors = store.artifacts(tier="embedding")
        needs_embed = bool(vectors) and mode not in ("noop", "raw_only")
        emb_name = embedder_name or (str(vectors[0].meta.get("embedder", "all-MiniLM-L6-v2")) if vectors else "")
        needs_llm = spec.needs_summarizer or (mode == "lineage_closure" and _llm_model(store) is not None)
        summarizer = backend(model or _llm_model(store) or "qwen2.5-coder-0.5b-instruct") if needs_llm else None
        writer = MemoryWriter(store, summarizer=summarizer, embedder=embedder(emb_name) if needs_embed else None,
                              config=WriteConfig(levels=(), embed=needs_embed))
        receipt = forget(store, target, mode, writer=writer, gate=WriteGate() if gate else None)
    path = receipt_out or Path(f"receipt-{receipt.receipt_id}.json")
    write_receipt(receipt, path)
    for line in receipt.summary_lines():
        typer.echo(line)
    typer.echo(f"receipt written to {path}")
    if not receipt.matched:
        typer.secho("nothing matched the target; nothing was changed", fg=typer.colors.YELLOW, err=True)
        sys.exit(NOTHING_MATCHED_EXIT)


def _llm_model(store: MemoryStore) -> str | None:
    """The summarizer recorded in the lineage of the store's LLM summaries, if any."""
    for a in store.artifacts(tier="summary"):
        if a.kind in ("key_facts", "session_summary"):
            for e in store.parents(a.id):
                if e.op == "summarize" and e.params.get("model"):
                    return str(e.params["model"])
    return None


@forget_app.command("modes")
def modes() -> None:
    """List the forget modes, one line each."""
    for e in FORGET_MODES.entries():
        claims = ",".join(t.value for t in e.obj.claims) or "-"
        typer.echo(f"{e.name:<22} clears: {claims:<30} {e.help}")


@forget_app.command("verify")
def verify(
    receipt: Path = typer.Argument(..., help="Receipt JSON file."),
    db: Path = typer.Option(None, "--db", help="Also check the memory file: removed ids still absent."),
) -> None:
    """Check a receipt's signature (and, with --db, that what it removed is still gone)."""
    r = load_receipt(receipt)
    if not verify_signature(r):
        raise ReceiptError(f"{receipt}: signature does not verify: the receipt was altered or signed with "
                           "another key (keys live in $TRACELESS_HOME)")
    typer.echo(f"{receipt}: signature OK (mode {r.mode}, passed={r.verification.passed})")
    if db is not None:
        with MemoryStore(db) as store:
            back = [i for t in r.tiers.values() for i in t.removed if store.exists(i)]
        if back:
            raise ReceiptError(f"{len(back)} artifact(s) the receipt removed exist again in {db}: {', '.join(back[:5])}")
        typer.echo(f"{db}: every artifact the receipt removed is still absent")
