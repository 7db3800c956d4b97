"""Shared builders for the memory/forget unit tests (not a test module).

A scripted summarizer that behaves like a small LLM (deterministic, keeps or drops the
canary on request), session builders with a planted canary, and a canonical dump of a
memory file for state comparisons.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from traceless.errors import MemoryStoreError
from traceless.memory import MemoryStore, MemoryWriter, Session, Tier, WriteConfig, _crypto
from traceless.models import ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend

CANARY = "XQ7-VIOLET-3829"
CANARY_TURN = f"by the way, my private session token is {CANARY}"
FILLER_FACT = "prefers short answers"

# Plain-text fact rules: a source line containing the key yields the fact.
_FACT_RULES = (
    ("dog", "has a dog named Rex"),
    ("Lisbon", "lives in Lisbon"),
    ("tea", "likes green tea"),
    ("piano", "plays the piano"),
)


def _source_lines(prompt: str) -> list[str]:
    body = prompt.split("Messages:\n", 1)[-1].rsplit("\n\n", 1)[0]  # drop the trailing instruction
    return [ln[2:] if ln.startswith("- ") else ln for ln in body.splitlines() if ln.strip()]


def make_summarizer(
    *, keep: bool = True, pad: bool = False, delay: float = 0.0, canary: str = CANARY, name: str = "scripted-sum"
) -> ScriptedBackend:
    """A deterministic summarizer.

    S=1 (key facts): one ``- fact`` line per matching rule, then, if ``keep`` and a source
    line holds the canary, ``- private session token is <canary>`` as the LAST line. With
    ``pad``, a source without the canary gets a filler fact instead, so the regenerated
    summary has as many lines as the original (no stale slot).
    S=2 (one sentence): one sentence, naming the canary when ``keep`` and it is present.
    """

    def reply(messages: list[ChatMessage], cfg: GenerationConfig) -> str:
        if delay:
            time.sleep(delay)
        prompt = messages[-1].content
        lines = _source_lines(prompt)
        has = any(canary in ln for ln in lines)
        facts = [fact for key, fact in _FACT_RULES if any(key in ln for ln in lines)]
        if "key personal facts" in prompt:
            if keep and has:
                facts.append(f"private session token is {canary}")
            elif pad:
                facts.append(FILLER_FACT)
            return "\n".join(f"- {f}" for f in facts) or "- nothing notable"
        sent = "The user chatted"
        if facts:
            sent += " and " + ", ".join(facts)
        if keep and has:
            sent += f"; their token is {canary}"
        return sent + "."

    return ScriptedBackend(reply, name=name)


def session(user: str, sid: str, user_turns: Sequence[str], *, neighbors: dict[str, list[int]] | None = None,
            date: str | None = "2023/05/20") -> Session:
    """A session alternating user turns (given) with short assistant replies."""
    turns: list[dict[str, Any]] = []
    for t in user_turns:
        turns.append({"role": "user", "content": t})
        turns.append({"role": "assistant", "content": "Noted."})
    return Session.model_validate(
        {"user_id": user, "session_id": sid, "date": date, "turns": turns, "neighbors": neighbors or {}}
    )


def alice_sessions(marker: str = "ALICE") -> list[Session]:
    """Three sessions; the canary sits in turn 2 of session s2 (user turns are at even
    indices), with turn 0 declared as its neighbour."""
    return [
        session("alice", "s1", [f"{marker} I adopted a dog named Rex", f"{marker} I drink green tea daily"]),
        session(
            "alice", "s2",
            [f"{marker} I moved to Lisbon last spring", CANARY_TURN, f"{marker} I started piano lessons"],
            neighbors={"2": [0]},
        ),
        session("alice", "s3", [f"{marker} Rex the dog hates rain", f"{marker} my tea kettle broke"]),
    ]


def bob_sessions(with_canary: bool = True) -> list[Session]:
    """Another user; optionally holding the very same literal (forget never crosses owners)."""
    second = CANARY_TURN if with_canary else "BOB I collect stamps"
    return [
        session("bob", "b1", ["BOB I live in Lisbon too", second]),
        session("bob", "b2", ["BOB I play the piano badly"]),
    ]


def write_config(level: int, *, extractive: bool = False) -> WriteConfig:
    """S=0: raw only; S=1: key facts; S=2: one-sentence summaries."""
    return WriteConfig(levels=() if level == 0 else (level,), extractive=extractive)


def make_writer(store: MemoryStore, level: int, *, keep: bool = True, pad: bool = False,
                extractive: bool = False, delay: float = 0.0) -> MemoryWriter:
    return MemoryWriter(
        store,
        summarizer=make_summarizer(keep=keep, pad=pad, delay=delay),
        embedder=HashingEmbedder(64),
        config=write_config(level, extractive=extractive),
    )


def unwraps_for(home: Path, rows: Sequence[tuple[str, bytes]], owner: str) -> bool:
    """An attacker with a copy's ``data_keys`` rows (owner column, wrapped key) and the CURRENT
    $TRACELESS_HOME: does any key file unwrap ``owner``'s data key? (v3 stores: the owner id is
    inside the wrapped key; v1/v2: it is the owner column.)"""
    for col, wrapped in rows:
        if not str(col).startswith(_crypto.OWNER_REF_PREFIX) and col != owner:
            continue
        for f in home.rglob("*.key"):
            with contextlib.suppress(MemoryStoreError):
                if _crypto.open_data_key(f.read_bytes()[:32], bytes(wrapped), str(col), "copy")[1] == owner:
                    return True
    return False


def copies(store: MemoryStore, literal: str, owner: str | None = None) -> dict[Tier, int]:
    """Artifacts per tier whose text holds ``literal``."""
    out = dict.fromkeys(Tier, 0)
    for a in store.containing(literal, owner=owner):
        out[a.tier] += 1
    return out


def owner_digests(store: MemoryStore, owner: str) -> dict[str, str]:
    """id → payload digest of every artifact of ``owner``."""
    return {a.id: a.digest for a in store.artifacts(owner=owner)}


def canonical_dump(path: str | Path) -> dict[str, Any]:
    """Everything persistent in a memory file, minus wall-clock fields and random ids.

    Artifacts (all columns but created_at), lineage, gate descriptors, meta (without the
    pending-erasure marker, which the next open clears), and receipts (body without
    receipt_id/created_at/seconds/signature/erased_material and the post-commit disk-scan fields), each sorted.
    """
    conn = sqlite3.connect(str(path))
    try:
        arts = [
            (r[0], r[1], r[2], r[3], r[4], r[5], r[6], None if r[7] is None else bytes(r[7]).hex(), r[8], r[9])
            for r in conn.execute(
                "SELECT id, owner, tier, kind, session_id, seq, text, vector, digest, meta FROM artifacts ORDER BY id"
            )
        ]
        lineage = [tuple(r) for r in conn.execute("SELECT child, parent, op, params FROM lineage ORDER BY 1, 2")]
        # the sealed length has a random nonce: compare the keyed descriptors themselves
        gate = [tuple(r) for r in conn.execute("SELECT owner_ref, kind, mac, attribute FROM gate_entries ORDER BY 1, 2, 3")]
        meta = [tuple(r) for r in conn.execute("SELECT key, value FROM meta WHERE key != 'pending_erasure' ORDER BY 1")]
        receipts = []
        for (body,) in conn.execute("SELECT body FROM receipts ORDER BY id"):
            d = json.loads(body)
            # erased_material is sealed under a random nonce, like the gate's sealed length
            for k in ("receipt_id", "created_at", "seconds", "signature", "notes", "warnings", "erased_material"):
                d.pop(k, None)
            # filled in after the commit (the disk scan); a kill can land before that update
            for k in ("disk_scan", "disk_checked", "disk_scope", "disk_held", "checks", "passed"):
                d["verification"].pop(k, None)
            d.pop("erased", None)
            receipts.append(json.dumps(d, sort_keys=True))
        receipts.sort()
        return {"artifacts": arts, "lineage": lineage, "gate": gate, "meta": meta, "receipts": receipts}
    finally:
        conn.close()


@contextlib.contextmanager
def other_writer(where: str) -> Iterator[None]:
    """Another process's open write transaction: SQLite's EXCLUSIVE lock on the file, or on
    PostgreSQL another connection holding the writers' advisory lock."""
    if where.startswith("postgresql://"):
        import psycopg

        from traceless.memory._backend import _WRITER_LOCK

        with psycopg.connect(where, autocommit=True) as c:
            c.execute("BEGIN")
            c.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITER_LOCK,))
            try:
                yield
            finally:
                c.execute("ROLLBACK")
        return
    other = sqlite3.connect(where, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()
