"""``traceless audit``: plant canaries in synthetic users' memory, probe the agent at
three levels, optionally forget with each mode and measure residue per tier."""

from __future__ import annotations

import json
import shutil
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from traceless._version import code_version
from traceless.agent import Agent
from traceless.audit._canary import inject_canary, make_canary
from traceless.audit._engine import view_config
from traceless.audit._probes import PROBE_LEVELS, Probe, extracted, probes
from traceless.audit._synthetic import synthetic_users
from traceless.forget import FORGET_MODES, ForgetTarget, forget, write_receipt
from traceless.memory import MemoryStore, MemoryWriter, Session, WriteConfig
from traceless.models import Embedder, Generation, GenerationConfig, ModelBackend

__all__ = ["AuditConfig", "AuditRow", "AuditResult", "run_audit", "PAPER_LADDER"]

PAPER_LADDER = ("noop", "raw_only", "raw_plus_resummarize", "full_purge", "tombstone")


class AuditConfig(BaseModel):
    """Settings of one audit run."""

    model_config = ConfigDict(frozen=True)

    model: str = "qwen2.5-coder-0.5b-instruct"
    """Backend spec (embedded model name, ``openai:MODEL@URL``, ``scripted``)."""
    S: int = Field(1, ge=0, le=2)
    """Summarization level: 0 raw turns, 1 key facts, 2 one-sentence summaries."""
    k: int = Field(3, ge=1)
    """Retrieval breadth."""
    profiles: int = Field(3, ge=1)
    """Number of synthetic users (one canary each)."""
    seed: int = 0
    """Seed for users, canaries and canary placement."""
    modes: tuple[str, ...] = ()
    """Forget modes to apply after the baseline probes (empty: baseline only)."""
    wordings: int = Field(1, ge=1)
    """Probe wordings per level."""
    max_new_tokens: int = Field(40, ge=4)
    """Reply budget per probe (a canary appears early when it appears at all)."""
    reveal: bool = False
    """Write canary values and unredacted replies to the results (off by default)."""
    keep_memory: bool = False
    """Keep the audited memory files (``memory*.db``, canaries in plaintext) in the out dir."""


class AuditRow(BaseModel):
    """One probe: one result row."""

    run_id: str
    """Identifier of the audit run."""
    profile: str
    """Synthetic user id."""
    phase: str
    """``before`` or the forget mode applied."""
    view: str
    """``agent``, ``raw`` or ``summary`` (tier-restricted context, for FRS_t)."""
    level: str
    """Probe level."""
    wording: int
    """Probe wording index."""
    prompt: list[dict[str, str]]
    """Messages sent (canary redacted unless ``reveal``)."""
    reply: str
    """Raw reply (canary redacted unless ``reveal``)."""
    extracted: bool
    """Canary appeared verbatim in the reply."""
    context_ids: list[str]
    """Artifact ids in the context (evaluator-side)."""
    prompt_tokens: int
    """Prompt tokens processed."""
    completion_tokens: int
    """Tokens generated."""
    seconds: float
    """Wall time of the call."""
    config: dict[str, Any]
    """The audit config."""
    seed: int
    """Run seed."""
    model: dict[str, Any]
    """Model identity."""
    code_version: str
    """traceless version."""


class AuditResult(BaseModel):
    """Rates per phase/view/level, plus where the rows went."""

    table: dict[str, dict[str, float]]
    """phase → {AER_direct, AER_indirect, AER_jailbreak, AER_max, FRS_raw, FRS_summary, FRS_worst}."""
    rows: int
    """Rows written."""
    seconds: float
    """Wall time."""
    out_dir: str
    """Where results, receipts and memory files are."""


def _redact(text: str, canaries: list[str]) -> str:
    for c in canaries:
        text = text.replace(c, "[CANARY]")
    return text


def run_audit(
    config: AuditConfig,
    model: ModelBackend,
    embedder: Embedder,
    out_dir: Path,
    *,
    on_progress: Callable[[int, int, str], None] | None = None,
) -> AuditResult:
    t0 = time.perf_counter()
    for m in config.modes:
        FORGET_MODES.get(m)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(config.seed)
    users = synthetic_users(config.profiles, rng)
    planted: list[tuple[list[Session], str]] = []
    for sessions in users:
        canary = make_canary(rng)
        injected, _, _ = inject_canary(sessions, canary, rng)
        planted.append((injected, canary))
    canaries = [c for _, c in planted]
    gen = GenerationConfig(max_new_tokens=config.max_new_tokens, temperature=0.0)
    levels = (config.S,) if config.S > 0 else ()
    base_db = out_dir / "memory.db"
    for old in out_dir.glob("*.db*"):
        old.unlink()
    store = MemoryStore(base_db)
    writer = MemoryWriter(store, summarizer=model, embedder=embedder, config=WriteConfig(levels=levels))
    writer.write_sessions([s for sessions, _ in planted for s in sessions])
    store.close()

    probe_list = probes(PROBE_LEVELS, wordings=config.wordings)
    phases = ["before", *config.modes]
    views_after = ["agent", "raw"] + (["summary"] if config.S > 0 else [])
    total = len(planted) * (1 + len(config.modes) * len(views_after))  # (profile, view) contexts
    done = 0.0
    run_id = f"audit-{int(time.time())}"
    ident = model.describe()
    rows_path = out_dir / "results.jsonl"
    (out_dir / "receipts").mkdir(exist_ok=True)
    hits: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    n_rows = 0
    with rows_path.open("w", encoding="utf-8") as f:
        for phase in phases:
            if phase == "before":
                db = base_db
            else:
                db = out_dir / f"memory-{phase}.db"
                shutil.copyfile(base_db, db)
            st = MemoryStore(db)
            w = MemoryWriter(st, summarizer=model, embedder=embedder, config=WriteConfig(levels=levels))
            # Build every prompt of the phase first, then generate them as one batch: the
            # backend batches decoding and reuses shared prefixes; the cache drops duplicates
            # (e.g. the agent view equals one tier view, or a mode left a view unchanged).
            jobs: list[tuple[str, str, str, Probe, list[Any], list[str]]] = []
            for (_, canary), user in zip(planted, users, strict=True):
                owner = user[0].user_id
                if phase != "before":
                    receipt = forget(st, ForgetTarget.literal(canary, owner), phase, writer=w)
                    write_receipt(receipt, out_dir / "receipts" / f"{phase}-{owner}.json")
                for view in (["agent"] if phase == "before" else views_after):
                    cfg = view_config(view, config.S, config.k, gen)
                    if cfg is None:
                        continue
                    agent = Agent(model, st, owner=owner, embedder=embedder, config=cfg)
                    for p in probe_list:
                        msgs, ctx = agent.build_messages(p.text)
                        jobs.append((canary, owner, view, p, msgs, [a.id for a in ctx]))
            step = max(1, len(probe_list))
            for i in range(0, len(jobs), step * 4):
                chunk = jobs[i : i + step * 4]
                gens = model.generate_batch([j[4] for j in chunk], gen)
                for (canary, owner, view, p, msgs, ctx_ids), g in zip(chunk, gens, strict=True):
                    ok = extracted(canary, g.text)
                    hits[(phase, view, p.level)].append(ok)
                    f.write(_row(config, run_id, owner, phase, view, p, msgs, ctx_ids, g, ok, canaries, ident)
                            + "\n")
                    n_rows += 1
                done += len(chunk) / step
                if on_progress:
                    on_progress(int(done), total, phase)
            st.close()
    if not config.keep_memory:  # the memory files hold every canary in plaintext
        for db_file in out_dir.glob("memory*.db*"):
            db_file.unlink()
    table = _table(hits, phases, config.S)
    (out_dir / "summary.json").write_text(json.dumps(
        {"config": config.model_dump(), "model": ident, "code_version": code_version(), "table": table},
        indent=2))
    return AuditResult(table=table, rows=n_rows, seconds=time.perf_counter() - t0, out_dir=str(out_dir))


def _row(config: AuditConfig, run_id: str, owner: str, phase: str, view: str, p: Probe, msgs: list[Any],
         ctx_ids: list[str], g: Generation, ok: bool, canaries: list[str], ident: dict[str, Any]) -> str:
    red = (lambda s: s) if config.reveal else (lambda s: _redact(s, canaries))
    row = AuditRow(
        run_id=run_id, profile=owner, phase=phase, view=view, level=p.level, wording=p.wording,
        prompt=[{"role": m.role, "content": red(m.content)} for m in msgs], reply=red(g.text),
        extracted=ok, context_ids=ctx_ids, prompt_tokens=g.prompt_tokens,
        completion_tokens=g.completion_tokens, seconds=g.total_seconds,
        config=config.model_dump(), seed=config.seed, model=ident, code_version=code_version(),
    )
    return row.model_dump_json()


def _rate(xs: list[bool]) -> float:
    return float(np.mean(xs)) if xs else 0.0


def _table(hits: dict[tuple[str, str, str], list[bool]], phases: list[str], S: int) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for phase in phases:
        row: dict[str, float] = {}
        for lv in PROBE_LEVELS:
            row[f"AER_{lv}"] = _rate(hits[(phase, "agent", lv)])
        row["AER_max"] = max(row[f"AER_{lv}"] for lv in PROBE_LEVELS)
        if phase != "before":
            for tier in ("raw", "summary"):
                row[f"FRS_{tier}"] = max((_rate(hits[(phase, tier, lv)]) for lv in PROBE_LEVELS), default=0.0)
            row["FRS_worst"] = max(row["FRS_raw"], row["FRS_summary"])
        table[phase] = row
    return table
