"""``traceless memory add|search|show|lineage --db PATH``."""

from __future__ import annotations

import contextlib
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from traceless.cli._common import backend, embedder, parse_levels, safe, say_migrating, split_list
from traceless.errors import ConfigError
from traceless.memory import store_exists  # the light part (traceless.memory._backend)

# Each command imports the part of traceless.memory it uses (the package re-exports lazily):
# reading a store (show, lineage) does not import the writer and its models (issue #13.4).

__all__ = ["memory_app"]

memory_app = typer.Typer(help="Inspect and fill a memory file.", no_args_is_help=True)

DB = typer.Option(..., "--db", help="Memory file (SQLite; created by `add` if missing or empty, never in another "
                  "application's database) or a postgresql:// URL.")


def _preview(text: str | None, width: int = 70) -> Text:
    """A one-line preview of stored text, as data: no markup, no control characters."""
    t = " ".join(safe(text).split())
    return Text(t if len(t) <= width else t[: width - 1] + "…")


def _cell(text: str | None) -> Text:
    return Text(safe(text))


@memory_app.command("add")
def add(
    sessions: Path = typer.Argument(..., help="Sessions as JSON Lines, one session per line: "
                                    '{"user_id","session_id","date","turns":[{"role","content","has_answer"}]}'),
    db: str = DB,
    levels: str = typer.Option("", "--levels", help="LLM summary levels to build, e.g. '1,2' (needs --model)."),
    model: str = typer.Option("qwen2.5-coder-0.5b-instruct", "--model", help="Summarizer for --levels."),
    extractive: bool = typer.Option(True, "--extractive/--no-extractive",
                                    help="Build paper 001's extractive consolidation per user."),
    embed: bool = typer.Option(True, "--embed/--no-embed", help="Embed records for retrieval."),
    embedder_name: str = typer.Option("all-MiniLM-L6-v2", "--embedder", help="all-MiniLM-L6-v2 or 'hashing'."),
    raw_unit: str = typer.Option("user_turn", "--raw-unit", help="user_turn, turn or session."),
    on_duplicate: str = typer.Option("error", "--on-duplicate",
                                     help="A session id the user already has: error (default), skip or replace."),
    encrypt: bool | None = typer.Option(
        None, "--encrypt/--no-encrypt",
        help="Create the store encrypted at rest (per-user data keys; forgetting destroys keys, so copies taken "
             "before a forget cannot be read). Only for a new store. Default: on for postgresql://, off for a file."),
    gate: bool = typer.Option(True, "--gate/--no-gate",
                              help="Refuse values the user asked to forget (default). --no-gate writes them anyway "
                                   "and records that choice in the store's event log."),
) -> None:
    """Write sessions into memory: raw records, summaries, embeddings, with lineage.

    One `add` is one transaction: every session with its summaries and embeddings is
    written, or nothing is."""
    from traceless.memory import MemoryStore, MemoryWriter, WriteConfig, read_sessions

    parsed = read_sessions(sessions)  # validates every line before anything is written
    lv = parse_levels(levels)
    if raw_unit not in ("user_turn", "turn", "session"):
        raise ConfigError("--raw-unit must be user_turn, turn or session")
    if on_duplicate not in ("error", "skip", "replace"):
        raise ConfigError("--on-duplicate must be error, skip or replace")
    cfg = WriteConfig(levels=lv, extractive=extractive, embed=embed, raw_unit=raw_unit)
    # build the models before the store exists: a bad name must not leave an empty db behind
    emb = embedder(embedder_name) if embed else None
    summarizer = backend(model) if lv else None
    with MemoryStore(db, encrypt=encrypt, on_migrate=say_migrating(db)) as store:
        writer = MemoryWriter(store, summarizer=summarizer, embedder=emb, config=cfg)
        ctx = store.ungated("memory add --no-gate") if not gate else contextlib.nullcontext()
        with ctx:
            rep = writer.write_sessions(parsed, on_duplicate=on_duplicate)  # type: ignore[arg-type]
    typer.echo(f"wrote {len(parsed)} sessions: {len(rep.raw)} raw, {len(rep.summary)} summary, "
               f"{len(rep.embedding)} embedding artifacts to {store.path}")


@memory_app.command("search")
def search(
    query: str = typer.Argument(..., help="Query text."),
    db: str = DB,
    user: str = typer.Option(..., "--user", help="Owner to search (retrieval never crosses owners)."),
    k: int = typer.Option(5, "--k", min=1),
    tiers: str = typer.Option("raw,summary", "--tiers", help="Comma list of tiers."),
    embedder_name: str = typer.Option(None, "--embedder", help="Default: the embedder that wrote the vectors."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (docs/schemas/search-result.json)."),
) -> None:
    """Cosine top-k over a user's memory."""
    from traceless.memory import MemoryStore, SearchHit, SearchResult, Tier

    _require_db(db)
    with MemoryStore(db, access="read") as store:
        vectors = store.artifacts(owner=user, tier="embedding")
        names = sorted({str(v.meta.get("embedder")) for v in vectors})
        if len(names) > 1 and embedder_name is None:
            raise ConfigError(f"{user!r}'s memory was embedded by several embedders ({', '.join(names)}); "
                              "pick one with --embedder")
        dims = {len(v.vector or b"") // 4 for v in vectors}
        if len(dims) > 1:
            raise ConfigError(f"{user!r}'s memory mixes vectors of {sorted(dims)} dimensions (several embedders); "
                              "re-embed it with one embedder before searching")
        name = embedder_name or (names[0] if names else "all-MiniLM-L6-v2")
        q = embedder(name).embed([query])[0]
        hits = store.search(user, q, k, tiers=[Tier(t) for t in split_list(tiers)])
    if as_json:
        doc = SearchResult(owner=user, k=k, embedder=name, hits=[
            SearchHit(score=h.score, id=h.artifact.id, tier=h.artifact.tier, kind=h.artifact.kind,
                      session_id=h.artifact.session_id, text=h.artifact.text) for h in hits])
        typer.echo(doc.model_dump_json(indent=2))
        return
    table = Table("score", "id", "tier/kind", "session", "text")
    for h in hits:
        a = h.artifact
        table.add_row(f"{h.score:.3f}", _cell(a.id), f"{a.tier.value}/{_cell(a.kind)}", _cell(a.session_id),
                      _preview(a.text))
    Console().print(table)


@memory_app.command("show")
def show(
    db: str = DB,
    user: str = typer.Option(None, "--user", help="Only this owner."),
    tier: str = typer.Option(None, "--tier", help="Only this tier."),
    full: bool = typer.Option(False, "--full", help="Print whole texts."),
) -> None:
    """List artifacts (id, owner, tier/kind, session, text)."""
    from traceless.memory import MemoryStore

    _require_db(db)
    with MemoryStore(db, access="read") as store:
        arts = store.artifacts(owner=user, tier=tier)
    table = Table("id", "owner", "tier/kind", "session", "text")
    for a in arts:
        table.add_row(_cell(a.id), _cell(a.owner), Text(f"{a.tier.value}/{safe(a.kind)}"), _cell(a.session_id),
                      _cell(a.text) if full else _preview(a.text))
    Console().print(table)
    typer.echo(f"{len(arts)} artifacts")


@memory_app.command("lineage")
def lineage(
    artifact_id: str = typer.Argument(..., help="Artifact id (e.g. s-00000003 or r-00000001)."),
    db: str = DB,
) -> None:
    """Where an artifact came from (ancestors) and everything derived from it (descendants)."""
    from traceless.memory import MemoryStore

    _require_db(db)
    with MemoryStore(db, access="read") as store:
        root = store.get(artifact_id)
        console = Console()
        up = Tree(Text.assemble((root.id, "bold"), f" {root.tier.value}/{safe(root.kind)}: ", _preview(root.text, 50)))
        up_label = up.add(Text("derived from", "cyan"))
        for e in store.parents(root.id):
            p = store.get(e.parent) if store.exists(e.parent) else None
            label = Text(f"{e.parent} ({e.op} {safe(str(e.params))})")
            up_label.add(Text.assemble(label, ": ", _preview(p.text, 50)) if p
                         else Text.assemble(label, (" (removed)", "red")))
        anc = store.ancestors([root.id])
        down_ids = store.descendants([root.id])
        down = up.add(Text(f"descendants ({len(down_ids)})", "cyan"))

        def grow(node: Tree, aid: str, depth: int) -> None:
            for e in store.children(aid):
                c = store.get(e.child) if store.exists(e.child) else None
                head = Text(f"{e.child} via {e.op}")
                txt = (Text.assemble(head, f" {c.tier.value}/{safe(c.kind)}: ", _preview(c.text, 50)) if c
                       else Text.assemble(head, (" (removed)", "red")))
                sub = node.add(txt)
                if depth < 6:
                    grow(sub, e.child, depth + 1)

        grow(down, root.id, 0)
        console.print(up)
        console.print(Text(f"ancestor closure: {', '.join(anc) or '(none: a source record)'}"))


@memory_app.command("migrate")
def migrate(db: str = typer.Option(..., "--db", help="An existing memory file or postgresql:// URL.")) -> None:
    """Bring a store of an older schema to this traceless's (read commands never migrate)."""
    from traceless.memory import SCHEMA_VERSION, MemoryStore

    _require_db(db)
    with MemoryStore(db, access="write", on_migrate=say_migrating(db)):
        pass
    typer.echo(f"{db}: schema version {SCHEMA_VERSION}")


def _require_db(db: str) -> None:
    """Reading commands never create a memory file."""
    if not store_exists(db):
        raise ConfigError(f"{db} does not exist; create it with `traceless memory add --db {db} SESSIONS.jsonl`")
