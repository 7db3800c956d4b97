"""``traceless memory add|search|show|lineage --db PATH``."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from traceless.cli._common import backend, embedder, split_list
from traceless.memory import MemoryStore, MemoryWriter, Tier, WriteConfig, read_sessions

__all__ = ["memory_app"]

memory_app = typer.Typer(help="Inspect and fill a memory file.", no_args_is_help=True)

DB = typer.Option(..., "--db", help="Memory file (SQLite). Created by `add` if missing.")


def _preview(text: str | None, width: int = 70) -> str:
    t = " ".join((text or "").split())
    return t if len(t) <= width else t[: width - 1] + "…"


@memory_app.command("add")
def add(
    sessions: Path = typer.Argument(..., help="Sessions as JSON Lines, one session per line: "
                                    '{"user_id","session_id","date","turns":[{"role","content","has_answer"}]}'),
    db: Path = DB,
    levels: str = typer.Option("", "--levels", help="LLM summary levels to build, e.g. '1,2' (needs --model)."),
    model: str = typer.Option("qwen2.5-coder-0.5b-instruct", "--model", help="Summarizer for --levels."),
    extractive: bool = typer.Option(True, "--extractive/--no-extractive",
                                    help="Build paper 001's extractive consolidation per user."),
    embed: bool = typer.Option(True, "--embed/--no-embed", help="Embed records for retrieval."),
    embedder_name: str = typer.Option("all-MiniLM-L6-v2", "--embedder", help="all-MiniLM-L6-v2 or 'hashing'."),
    raw_unit: str = typer.Option("user_turn", "--raw-unit", help="user_turn, turn or session."),
) -> None:
    """Write sessions into memory: raw records, summaries, embeddings, with lineage."""
    parsed = read_sessions(sessions)  # validates every line before anything is written
    lv = tuple(int(x) for x in split_list(levels))
    if any(x not in (1, 2) for x in lv):
        raise typer.BadParameter("--levels takes 1 and/or 2")
    if raw_unit not in ("user_turn", "turn", "session"):
        raise typer.BadParameter("--raw-unit must be user_turn, turn or session")
    cfg = WriteConfig(levels=lv, extractive=extractive, embed=embed, raw_unit=raw_unit)
    with MemoryStore(db) as store:
        writer = MemoryWriter(store, summarizer=backend(model) if lv else None,
                              embedder=embedder(embedder_name) if embed else None, config=cfg)
        rep = writer.write_sessions(parsed)
    typer.echo(f"wrote {len(parsed)} sessions: {len(rep.raw)} raw, {len(rep.summary)} summary, "
               f"{len(rep.embedding)} embedding artifacts to {db}")


@memory_app.command("search")
def search(
    query: str = typer.Argument(..., help="Query text."),
    db: Path = DB,
    user: str = typer.Option(..., "--user", help="Owner to search (retrieval never crosses owners)."),
    k: int = typer.Option(5, "--k", min=1),
    tiers: str = typer.Option("raw,summary", "--tiers", help="Comma list of tiers."),
    embedder_name: str = typer.Option(None, "--embedder", help="Default: the embedder that wrote the vectors."),
) -> None:
    """Cosine top-k over a user's memory."""
    with MemoryStore(db) as store:
        vectors = store.artifacts(owner=user, tier="embedding")
        name = embedder_name or (str(vectors[0].meta.get("embedder")) if vectors else "all-MiniLM-L6-v2")
        q = embedder(name).embed([query])[0]
        hits = store.search(user, q, k, tiers=[Tier(t) for t in split_list(tiers)])
    table = Table("score", "id", "tier/kind", "session", "text")
    for h in hits:
        a = h.artifact
        table.add_row(f"{h.score:.3f}", a.id, f"{a.tier.value}/{a.kind}", a.session_id or "", _preview(a.text))
    Console().print(table)


@memory_app.command("show")
def show(
    db: Path = DB,
    user: str = typer.Option(None, "--user", help="Only this owner."),
    tier: str = typer.Option(None, "--tier", help="Only this tier."),
    full: bool = typer.Option(False, "--full", help="Print whole texts."),
) -> None:
    """List artifacts (id, owner, tier/kind, session, text)."""
    with MemoryStore(db) as store:
        arts = store.artifacts(owner=user, tier=tier)
    table = Table("id", "owner", "tier/kind", "session", "text")
    for a in arts:
        table.add_row(a.id, a.owner, f"{a.tier.value}/{a.kind}", a.session_id or "",
                      (a.text or "") if full else _preview(a.text))
    Console().print(table)
    typer.echo(f"{len(arts)} artifacts")


@memory_app.command("lineage")
def lineage(
    artifact_id: str = typer.Argument(..., help="Artifact id (e.g. s-00000003 or r-00000001)."),
    db: Path = DB,
) -> None:
    """Where an artifact came from (ancestors) and everything derived from it (descendants)."""
    with MemoryStore(db) as store:
        root = store.get(artifact_id)
        console = Console()
        up = Tree(f"[bold]{root.id}[/] {root.tier.value}/{root.kind}: {_preview(root.text, 50)}")
        up_label = up.add("[cyan]derived from[/]")
        for e in store.parents(root.id):
            p = store.get(e.parent) if store.exists(e.parent) else None
            label = f"{e.parent} ({e.op} {e.params})"
            up_label.add(label + (f": {_preview(p.text, 50)}" if p else " [red](removed)[/]"))
        anc = store.ancestors([root.id])
        down_ids = store.descendants([root.id])
        down = up.add(f"[cyan]descendants[/] ({len(down_ids)})")

        def grow(node: Tree, aid: str, depth: int) -> None:
            for e in store.children(aid):
                c = store.get(e.child) if store.exists(e.child) else None
                txt = f"{e.child} via {e.op}" + (f" {c.tier.value}/{c.kind}: {_preview(c.text, 50)}" if c
                                                 else " [red](removed)[/]")
                sub = node.add(txt)
                if depth < 6:
                    grow(sub, e.child, depth + 1)

        grow(down, root.id, 0)
        console.print(up)
        console.print(f"ancestor closure: {', '.join(anc) or '(none: a source record)'}")
