"""The audit engine (``traceless audit``, with or without ``--memory NAME``): plant
canaries → write through the memory system → probe → for each native deletion, on a fresh
copy: delete → probe again → count the canary's copies in every named store and in every
file the system wrote. Plain ``traceless audit`` is this engine on the native ``traceless``
system, whose deletions are the forget modes. ``forget --certify`` reuses its probes
(``traceless.audit.certify``).

Out dir (resumable; a step that finished is never redone)::

    DIR/manifest.json        study "memory-audit", the config, the model's run record
    DIR/system.json          the system's identity
    DIR/steps/write.done     memory written (DIR/work/base holds it)
    DIR/results.sqlite       the rows, in the study runner's store and row schema (``ResultRow``,
                             the frontier study's too): per phase OP (``before`` or a deletion)
                             one cell per probe (``aer/...`` before, ``frs/OP/VIEW/...`` after;
                             ``AuditRow.from_cell`` reads either study's) and one ``residue/OP``
                             cell (copies per store, files with the canary, what the deletion did)
    DIR/results.jsonl        every probe row as an ``AuditRow`` (an export, written at the end)
    DIR/summary.json         the table (written at the end)
    DIR/work/                the system's memory, and generations.sqlite, the generation cache a
                             rerun reads (both hold canaries in plaintext: deleted at the end
                             unless keep_memory)

A phase's rows are committed in one transaction, its residue cell with them, so a run
stopped or failed in the middle of a phase resumes at that phase; ``write.done`` appears
atomically (written to a temp name, then renamed).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from traceless import prompts
from traceless._version import code_version
from traceless.audit._bystanders import BystanderCheck, bystander_check, erasure_claims
from traceless.audit._canary import inject_canary, make_canary
from traceless.audit._probes import PROBE_LEVELS, Probe, extracted, probes
from traceless.audit._redact import redact_canaries
from traceless.audit._synthetic import synthetic_users
from traceless.audit._table import AuditRow, audit_table, residue_key
from traceless.errors import ConfigError, InputFormatError, ResumeError, StudyError
from traceless.forget import scan_files
from traceless.memory import Session
from traceless.models import (
    CachingBackend,
    ChatMessage,
    Embedder,
    FloatArray,
    Generation,
    GenerationConfig,
    ModelBackend,
    layers,
)
from traceless.systems import (
    ContextItem,
    DeletionTarget,
    MemorySystem,
    SystemConfig,
    SystemRuntime,
    open_system,
    system_class,
)

if TYPE_CHECKING:
    from traceless.studies import ResultRow, ResultsStore

__all__ = [
    "PAPER_LADDER",
    "STUDY",
    "STUDY_VERSION",
    "SystemAuditConfig",
    "SystemAuditResult",
    "SystemAuditRow",
    "AuditRow",
    "DeletionPhase",
    "Planted",
    "deletion_phase",
    "open_copy",
    "plant",
    "plant_canaries",
    "probe_messages",
    "probe_contexts",
    "audit_model",
    "run_system_audit",
    "store_copies",
]

STUDY = "memory-audit"
STUDY_VERSION = "3"
"""2: one engine for ``traceless audit`` with and without ``--memory``; ``operations`` None = all.
3: rows are cells of the study runner's results store (one row schema with the frontier)."""

PAPER_LADDER = ("noop", "raw_only", "raw_plus_resummarize", "full_purge", "tombstone")
"""Paper 000's five forget modes, in ladder order (``traceless audit --modes ladder``)."""


class SystemAuditConfig(BaseModel):
    """Settings of one audit of a memory system."""

    model_config = ConfigDict(frozen=True)

    system: str = "traceless"
    """Registered memory system (``traceless memory systems``)."""
    system_config: dict[str, Any] = Field(default_factory=dict)
    """The system's own settings (validated by its config class)."""
    model: str = "qwen2.5-coder-0.5b-instruct"
    """Backend spec of the agent's model."""
    profiles: int | None = Field(None, ge=1)
    """Users audited, one canary each (default: 3 synthetic users, or every user of ``data``)."""
    data: str | None = None
    """A sessions JSONL file (the generic format) to plant canaries in instead of synthetic users."""
    seed: int = 0
    """Seed for users, canaries and canary placement."""
    operations: tuple[str, ...] | None = None
    """Native deletions audited (None: every one the system has; empty: only the ``before`` probes)."""
    wordings: int = Field(1, ge=1)
    """Probe wordings per level."""
    max_new_tokens: int = Field(40, ge=4)
    """Reply budget per probe."""
    reveal: bool = False
    """Keep canary values in rows and summaries (off: every exact or near copy, within edit
    distance 2 of a canary, case ignored, is redacted to ``[CANARY]``)."""
    keep_memory: bool = False
    """Keep the system's memory files (which hold plaintext canaries) after the audit."""


SystemAuditRow = AuditRow
"""The same row (the name the ``--memory`` audit had before the engines were merged)."""


class SystemAuditResult(BaseModel):
    """Rates and residue per phase."""

    system: str
    """The memory system audited."""
    table: dict[str, dict[str, float]]
    """phase → {AER_direct, AER_indirect, AER_jailbreak, AER_max[, FRS_view ...]}."""
    copies: dict[str, dict[str, int]]
    """phase → store → copies of the canaries it holds (summed over users)."""
    files: dict[str, dict[str, int]]
    """phase → file (relative to the phase's work dir) → canary occurrences, files with any only."""
    bystanders: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """deletion → the other users' canaries around each user's deletion (``BystanderCheck``:
    copies before/after, copies lost per store, retrieval before/after, ``intact``)."""
    erasure: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """deletion → what traceless's own erasure reached after it (``claims`` per store, ``passed``);
    only for systems whose adapter implements the erasure."""
    rows: int
    """Probe rows written."""
    seconds: float
    """Wall time of this (re)start."""
    out_dir: str
    """The results dir."""


@dataclass(frozen=True)
class Planted:
    """One user's sessions with one canary planted (step 1 of the engine)."""

    owner: str
    """The user."""
    canary: str
    """The planted secret."""
    session_id: str
    """The session that carries it."""
    turn: int
    """Index of the user turn it was placed in."""
    sessions: list[Session]
    """The user's sessions, canary included."""

    @property
    def target(self) -> DeletionTarget:
        """The deletion request for this canary."""
        return DeletionTarget(self.owner, self.canary, self.session_id)


def plant(sessions: list[Session], rng: np.random.Generator) -> Planted:
    """Plant one canary in a random non-evidence user turn of one user's sessions (the rng
    draws the canary, then its place: the same rng state gives the same plant)."""
    canary = make_canary(rng)
    injected, sid, turn = inject_canary(sessions, canary, rng)
    return Planted(sessions[0].user_id, canary, sid, turn, injected)


def plant_canaries(config: SystemAuditConfig) -> list[Planted]:
    """One canary per user, placed like ``traceless audit`` does (same seed → same canaries)."""
    rng = np.random.default_rng(config.seed)
    if config.data is None:
        users = synthetic_users(config.profiles or 3, rng)
    else:
        from traceless.memory import read_sessions

        by_user: dict[str, list[Session]] = defaultdict(list)
        for s in read_sessions(config.data):
            by_user[s.user_id].append(s)
        users = list(by_user.values())[: config.profiles or None]
        if not users:
            raise InputFormatError(f"{config.data} holds no session; give a sessions JSONL file")
    return [plant(sessions, rng) for sessions in users]


class _QueryMemo(Embedder):
    """The runtime's embedder, with single-text calls remembered: the same few probe queries
    are embedded for every user, view and deletion (225 context builds, 3 distinct queries in
    the default audit). A remembered vector is the result of the identical call, so retrieval
    is unchanged; identity (name, dim, describe) is the wrapped embedder's. Calls are
    serialized: phases run in threads, and a Hugging Face fast tokenizer shared across
    threads can fail ("Already borrowed")."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._seen: dict[str, FloatArray] = {}
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> FloatArray:
        with self._lock:
            if len(texts) != 1:
                return self.inner.embed(texts)
            if texts[0] not in self._seen:
                self._seen[texts[0]] = self.inner.embed(texts)
            return self._seen[texts[0]].copy()

    def describe(self) -> dict[str, object]:
        return self.inner.describe()


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _redactor(canaries: list[str], reveal: bool) -> Callable[[str], str]:
    """Exact and near copies (edit distance <= 2, ``redact_canaries``) become ``[CANARY]``."""
    return (lambda s: s) if reveal else (lambda s: redact_canaries(s, canaries))


def probe_messages(items: Sequence[ContextItem], query: str) -> list[ChatMessage]:
    """The agent's prompt for ``query`` with ``items`` as its memory: the native agent's prompt
    (Agent.build_messages with render_lines), one format for every memory system and study."""
    rendered = "\n".join(f"- {c.text}" for c in items)
    return [ChatMessage(role="system", content=prompts.AGENT_SYSTEM.format(memory=rendered or "(empty)")),
            ChatMessage(role="user", content=query)]


def probe_contexts(system: MemorySystem, owner: str, probe_list: Sequence[Probe], views: Sequence[str],
                   ) -> list[tuple[str, Probe, list[ChatMessage], list[str]]]:
    """(view, probe, prompt, context ids) for every view × probe, with the system's own retrieval."""
    out = []
    for view in views:
        if view not in system.views:
            raise ConfigError(f"{system.name}: probe view {view!r} is not one of its views {system.views}")
        for pr in probe_list:
            items = system.context(owner, pr.text, view)
            out.append((view, pr, probe_messages(items, pr.text), [c.id for c in items]))
    return out


def store_copies(system: MemorySystem, literals: Sequence[str]) -> dict[str, int]:
    """Copies of ``literals`` in each of the system's named stores (the residue scan)."""
    return {name: sum(t.count(c) for t in texts for c in literals) for name, texts in system.stores().items()}


def open_copy(name: str, base: Path, work_dir: Path, config: SystemConfig, runtime: SystemRuntime) -> MemorySystem:
    """Open system ``name`` on a fresh copy of the memory in ``base`` (closed), in ``work_dir``:
    every deletion starts from the same memory."""
    shutil.rmtree(work_dir, ignore_errors=True)
    shutil.copytree(base, work_dir)
    with _OPEN_LOCK:
        return open_system(name, work_dir, config, runtime)


_OPEN_LOCK = threading.Lock()
"""Systems are opened one at a time: opening one can load models (mem0 builds its embedder),
and torch's device context that model loading enters is not safe across threads (two mem0
phases opened at once left later transformers loads with meta tensors)."""


class DeletionPhase:
    """One phase of the engine (``before`` or a native deletion) on its own copy of the memory."""

    def __init__(self, system: MemorySystem, operation: str) -> None:
        self.system, self.operation = system, operation
        self.notes: dict[str, Any] = {}
        """Per user: what the deletion did (the system's notes, e.g. the forget receipt)."""
        self.copies: dict[str, int] = {}
        """Per named store: copies of the canaries it holds (filled when the phase closes)."""
        self.files: dict[str, int] = {}
        """Per file the system wrote (relative to the phase's dir): canary occurrences, files
        with any only (filled when the phase closes)."""

    def forget(self, planted: Planted) -> None:
        """The native deletion of this phase for one user's canary (nothing before deletion)."""
        if self.operation != "before":
            self.notes[planted.owner] = self.system.delete(self.operation, planted.target)


@contextlib.contextmanager
def deletion_phase(name: str, base: Path, work_dir: Path, config: SystemConfig, runtime: SystemRuntime,
                   operation: str, canaries: Sequence[str]) -> Iterator[DeletionPhase]:
    """Engine steps 4–5 for one phase, shared by ``traceless audit`` and the frontier study:
    open the system on a fresh copy of the written memory; inside the block the caller
    deletes (``phase.forget``) and probes (``phase.system``); on leaving it, the residue scan
    counts the canaries in every named store, and, after the system is closed (connections
    flushed as the system leaves them), in every file it wrote."""
    system = open_copy(name, base, work_dir, config, runtime)
    phase = DeletionPhase(system, operation)
    try:
        yield phase
        phase.copies = store_copies(system, canaries)
        files = system.files()
    finally:
        system.close()
    phase.files = {str(f.relative_to(work_dir)) if f.is_relative_to(work_dir) else str(f): n
                   for f in files for n in [sum(scan_files([f], c).get(str(f), 0) for c in canaries)] if n}


def _prepare_dir(out_dir: Path, config: SystemAuditConfig, identity: dict[str, Any]) -> None:
    """Create the out dir, or check that an existing one is this audit's (then resume)."""
    # not at module level: the frontier study (imported by traceless.studies) uses this
    # module's steps, so importing traceless.studies here first would be a cycle
    from traceless.studies import Manifest, RunRecord, read_manifest, write_manifest

    if (out_dir / "manifest.json").exists():
        man = read_manifest(out_dir)
        if man.study != STUDY or man.config != config.model_dump(mode="json"):
            raise ResumeError(
                f"{out_dir} holds another audit ({man.study}, other settings); use a fresh --out dir "
                "or rerun with the settings it was started with"
            )
        if man.study_version != STUDY_VERSION:
            raise ResumeError(
                f"{out_dir} was written by another version of the audit (layout {man.study_version}, this "
                f"traceless writes {STUDY_VERSION}); use a fresh --out dir"
            )
        return
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(f"{out_dir} exists and is not an audit results dir; use a fresh --out dir")
    (out_dir / "steps").mkdir(parents=True, exist_ok=True)
    now = time.time()
    run = RunRecord(model_tag=config.model, identity=identity["model"], code_version=code_version(), started=now,
                    updated=now)
    write_manifest(out_dir, Manifest(study=STUDY, study_version=STUDY_VERSION, config=config.model_dump(mode="json"),
                                     created=now, code_version=code_version(), runs={config.model: run}))
    _atomic_write(out_dir / "system.json", json.dumps(identity, indent=2, default=str))


def _finish_manifest(out_dir: Path, config: SystemAuditConfig, cells: int, seconds: float) -> None:
    """The run record once every phase is in: cells, finished, time of this (re)start added."""
    from traceless.studies import read_manifest, write_manifest

    man = read_manifest(out_dir)
    run = man.runs[config.model]
    man.runs[config.model] = run.model_copy(update={
        "code_version": code_version(), "updated": time.time(), "cells_total": cells, "cells_done": cells,
        "finished": True, "seconds": run.seconds + seconds})
    write_manifest(out_dir, man)


def _open_store(out_dir: Path) -> ResultsStore:
    from traceless.studies import RESULTS_DB, ResultsStore

    return ResultsStore(out_dir / RESULTS_DB)


class _Step:
    """Names the step in the error a failing memory system raises (and keeps the dir resumable)."""

    def __init__(self, system: str, step: str, out_dir: Path) -> None:
        self.system, self.step, self.out_dir = system, step, out_dir

    def __enter__(self) -> None:
        return None

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: object) -> None:
        # a config error is the user's to fix where it is named; anything else (the system's
        # package, the model server) gets the step and the resume hint
        if e is None or isinstance(e, ConfigError | KeyboardInterrupt):
            return
        raise StudyError(
            f"memory system {self.system!r} failed at step {self.step!r} ({type(e).__name__}: {e}); the finished "
            f"steps are kept in {self.out_dir}: fix the cause and rerun the same command to resume there"
        ) from e


def run_system_audit(
    config: SystemAuditConfig,
    runtime: SystemRuntime,
    out_dir: Path,
    *,
    on_progress: Callable[[int, int, str], None] | None = None,
) -> SystemAuditResult:
    """Audit ``config.system``; resumable in ``out_dir``. See the module docstring."""
    t0 = time.perf_counter()
    from traceless.systems import load_system_config

    cls = system_class(config.system)
    sys_cfg = load_system_config(config.system, config.system_config)
    known = cls.deletions(sys_cfg)
    ops = known if config.operations is None else config.operations
    for op in ops:
        if op not in known:
            raise ConfigError(f"{config.system} has no deletion {op!r}; its deletions: {', '.join(known)}")
    planted = plant_canaries(config)
    identity = {"system": config.system, "config": sys_cfg.model_dump(mode="json"), "model": runtime.model.describe()}
    _prepare_dir(out_dir, config, identity)
    work = out_dir / "work"
    work.mkdir(exist_ok=True)
    # a rerun after a stop pays for no generation twice (the phase it stopped in is redone,
    # its replies come from here); in work/, so it goes with the memory at the end
    cache = CachingBackend(runtime.model, work / "generations.sqlite")
    runtime = replace(runtime, model=cache, embedder=_QueryMemo(runtime.embedder))
    phases = ["before", *ops]
    store = _open_store(out_dir)
    try:
        _write_step(config, runtime, sys_cfg, planted, out_dir)
        _run_phases(config, runtime, sys_cfg, planted, phases, out_dir, store, on_progress)
        result = _collect(config, phases, out_dir, store, time.perf_counter() - t0, runtime.model.describe())
    finally:
        cache.close_cache()
        store.close()
    if not config.keep_memory:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _write_step(config: SystemAuditConfig, runtime: SystemRuntime, sys_cfg: SystemConfig, planted: list[Planted],
                out_dir: Path) -> None:
    """Engine step 2, once: every user's sessions (canaries planted) written through the
    system into ``work/base``, the memory every phase copies."""
    steps, base = out_dir / "steps", out_dir / "work" / "base"
    if (steps / "write.done").exists():
        return
    shutil.rmtree(base, ignore_errors=True)
    with _Step(config.system, "write", out_dir):
        system = open_system(config.system, base, sys_cfg, runtime)
        try:
            system.write([s for p in planted for s in p.sessions])
        finally:
            system.close()
    _atomic_write(steps / "write.done", "")


def _run_phases(config: SystemAuditConfig, runtime: SystemRuntime, sys_cfg: SystemConfig, planted: list[Planted],
                phases: list[str], out_dir: Path, store: ResultsStore,
                on_progress: Callable[[int, int, str], None] | None) -> None:
    """Every phase not yet in the store. A model that serves concurrent requests gets the
    phases at once (each on its own copy of the memory, in its own thread), so the slots stay
    full while other phases delete, re-summarize, retrieve or scan; a local model runs them one
    after the other (its batches are pinned). Each phase's rows are its own, committed
    together, so the rows and the resume are the same either way."""
    work = out_dir / "work"
    done = store.done_keys(config.model)
    lock, users = threading.Lock(), dict.fromkeys(phases, 0)
    total = len(phases) * len(planted)

    def progress(phase: str, n: int) -> None:
        with lock:
            users[phase] = n
            finished = sum(users.values())
        if on_progress:
            on_progress(finished, total, phase)

    def one(phase: str) -> None:
        if residue_key(phase) not in done:
            with _Step(config.system, phase, out_dir):
                _run_phase(config, runtime, sys_cfg, planted, phase, phases.index(phase), work / "base",
                           work / phase, store, lambda n: progress(phase, n))
            if not config.keep_memory:
                shutil.rmtree(work / phase, ignore_errors=True)
        progress(phase, len(planted))

    workers = phase_workers(runtime.model, len(phases))
    if workers <= 1:
        for phase in phases:
            one(phase)
        return
    ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="audit-phase")
    try:
        futures = [ex.submit(one, phase) for phase in phases]
        for f in futures:  # the first failure in phase order; the others still finish their step
            f.result()
    except BaseException:
        ex.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        ex.shutdown(wait=True)


def phase_workers(model: ModelBackend, phases: int) -> int:
    """Phases run at once: as many as the model's server has slots (the opt-in
    ``TRACELESS_LLAMACPP_PARALLEL``); one slot or a local model runs them one after the other
    (nothing to gain: the requests queue for the one slot)."""
    for layer in layers(model):
        slots = getattr(getattr(layer, "server", None), "parallel", None)
        if isinstance(slots, int):
            return max(1, min(phases, slots, concurrency(model)))
    return 1


def _run_phase(config: SystemAuditConfig, runtime: SystemRuntime, sys_cfg: SystemConfig, planted: list[Planted],
               phase: str, index: int, base: Path, phase_dir: Path, store: ResultsStore,
               progress: Callable[[int], None]) -> None:
    canaries = [p.canary for p in planted]
    probe_list = probes(PROBE_LEVELS, wordings=config.wordings)
    with deletion_phase(config.system, base, phase_dir, sys_cfg, runtime, phase, canaries) as ph:
        jobs: list[tuple[Planted, str, Probe, list[ChatMessage], list[str]]] = []
        check = BystanderCheck()
        direct = [pr.text for pr in probe_list if pr.level == "direct"]
        for p in planted:
            if phase == "before":
                ph.forget(p)
            else:  # the other users' canaries around this user's deletion
                others = [(q.owner, q.canary) for q in planted if q is not p]
                bystander_check(ph.system, others, direct, functools.partial(ph.forget, p), check)
            views = ("agent",) if phase == "before" else ph.system.probe_views()
            jobs += [(p, *job) for job in probe_contexts(ph.system, p.owner, probe_list, views)]
        replies = agent_replies(ph.system, [(p.owner, pr.text) for p, _, pr, _, _ in jobs])
        rows = _generate(config, runtime, phase, jobs, canaries, progress, len(probe_list), replies)
    erasure = None
    if phase != "before":
        with _OPEN_LOCK:
            erasure = erasure_claims(config.system, phase_dir, sys_cfg, runtime, [(p.owner, p.canary) for p in planted])
    red = _redactor(canaries, config.reveal)
    residue = _cells(config, runtime.model.describe())(
        residue_key(phase), phase, {"kind": "residue", "mode": phase},
        metrics={"copies": ph.copies, "files": ph.files, "phase_index": index, "views": list(ph.system.views),
                 **({} if phase == "before" else {"bystanders": check.metrics()}),
                 **({} if erasure is None else {"erasure": erasure})},
        extra={"notes": json.loads(red(json.dumps(ph.notes, default=str)))})
    store.add_many([*rows, residue])


def _probe_key(phase: str, view: str, pr: Probe, profile: str) -> str:
    # the user last: every segment before it is a name without "/", so keys cannot collide
    head = "aer" if phase == "before" else f"frs/{phase}/{view}"
    return f"{head}/{pr.level}:{pr.wording}/user={profile}"


def _cells(config: SystemAuditConfig, model: dict[str, Any]) -> Callable[..., ResultRow]:
    """A maker of this audit's rows in the study runner's schema (config ``{"study", "cell"}``,
    keyed per model tag); what every row shares is computed once."""
    from traceless.studies import ResultRow

    study, version = config.model_dump(mode="json"), code_version()

    def cell(key: str, phase: str, params: dict[str, Any], *, metrics: dict[str, Any],
             prompt: list[dict[str, str]] | None = None, reply: str | None = None,
             timing: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> ResultRow:
        return ResultRow(model_tag=config.model, key=key, group=phase, created=time.time(),
                         config={"study": study, "cell": {**params, "system": config.system}}, seed=config.seed,
                         model=model, code_version=version, prompt=prompt, reply=reply, timing=timing or {},
                         metrics=metrics, extra=extra or {})

    return cell


def agent_replies(system: MemorySystem, probes: Sequence[tuple[str, str]]) -> list[Generation] | None:
    """The system's own agent's replies to (owner, query), for a system that answers through
    its own agent (``agent_reply``: LangGraph with the user's graph); None: the audit's prompt
    over the system's context is sent to the model."""
    reply = getattr(system, "agent_reply", None)
    if reply is None or not probes:
        return None
    first = reply(*probes[0])
    if first is None:
        return None
    return [first, *(reply(owner, query) for owner, query in probes[1:])]


def _generate(config: SystemAuditConfig, runtime: SystemRuntime, phase: str,
              jobs: Sequence[tuple[Planted, str, Probe, list[ChatMessage], list[str]]], canaries: list[str],
              progress: Callable[[int], None], step: int, replies: list[Generation] | None = None,
              ) -> list[ResultRow]:
    from traceless.studies import CellResult

    gen = GenerationConfig(max_new_tokens=config.max_new_tokens, temperature=0.0)
    red = _redactor(canaries, config.reveal)
    cell = _cells(config, runtime.model.describe())
    rows: list[ResultRow] = []
    size = batch_size(runtime.model, len(jobs), step)
    for i in range(0, len(jobs), size):
        chunk = jobs[i: i + size]
        gens: list[Generation] = (runtime.model.generate_batch([j[3] for j in chunk], gen) if replies is None
                                  else replies[i: i + len(chunk)])
        for n, ((p, view, pr, msgs, ids), g) in enumerate(zip(chunk, gens, strict=True), start=i):
            params = {"kind": "aer", "instance": p.owner, "level": pr.level, "wording": pr.wording}
            if phase != "before":
                params |= {"kind": "frs", "mode": phase, "tier": view}
            rows.append(cell(
                _probe_key(phase, view, pr, p.owner), phase, params,
                prompt=[{"role": m.role, "content": red(m.content)} for m in msgs], reply=red(g.text),
                metrics={"extracted": extracted(p.canary, g.text)}, timing=CellResult.timing_of(g),
                extra={"context_ids": ids, "order": n}))  # the phase's request order
        progress(len({j[0].owner for j in jobs[: i + len(chunk)]}))
    return rows


def batch_size(model: ModelBackend, jobs: int, step: int) -> int:
    """Probes sent to the model per call. A backend that serves concurrent requests (a
    llama.cpp server's slots, any HTTP server) gets the whole phase at once, so its slots stay
    full; a local batching backend keeps 4 contexts' probes per call, the batch composition its
    replies were pinned with (padding in a batch changes a transformers model's numerics)."""
    return max(1, jobs) if concurrency(model) > 1 else step * 4


def concurrency(model: ModelBackend) -> int:
    """Requests ``model`` serves at once (1 for a local backend), looking through wrappers
    such as the generation cache."""
    for layer in layers(model):
        n = getattr(layer, "max_concurrency", None)
        if isinstance(n, int):
            return max(1, n)
    return 1


_SLOT_CTX = 4096
"""Context per llama.cpp slot for an audit whose system asks for no more (a native probe
prompt is a few hundred tokens)."""
_KV_TOKENS = 8 * _SLOT_CTX
"""Slots × context an audit's server holds at most (qwen 0.5b: ~12 KB of KV cache per token)."""


def audit_model(spec: str, context_tokens: int = 0, *, speculation: str | None = None,
                threads: int | None = None) -> tuple[str, ModelBackend]:
    """The audited agent's model, on the fastest engine that keeps the audit reproducible: an
    audit needs no KV access, so a bare catalog name is served by llama.cpp when xllamacpp is
    installed (``fast_spec``). Returns the resolved spec (recorded in the config) and the
    backend. ``transformers:NAME`` keeps the transformers engine.

    llama.cpp's speed-ups change greedy replies: with several slots a reply depends on which
    other requests share its batch, and with the prompt cache on the KV the previous request
    left (measured: 7 of 42 audit replies and one verdict differ). So by default one slot
    serves the audit:

    * with the prompt cache off: every request is computed alone, whatever the order, so the
      same audit gives the same rows every time (and phases may overlap their other work);
    * for a memory system whose own prompts need a long context (mem0's ~8.7k-token shared
      extraction prompt, re-prefilled on every call without the cache) the server keeps the
      cache for the system's own calls (made in the write step, one at a time from a fresh
      server, in the same order every run) and the audit's probes are sent with the cache
      off, so they too are computed alone, and a resumed audit repeats them.

    ``TRACELESS_LLAMACPP_PARALLEL=N`` (N > 1) opts into N slots with the prompt cache: faster
    (``served_slots``; bench/bench_audit.py measures both), not reproducible run to run; every
    row records the engine's slots and cache.

    ``speculation`` (``TYPE[:DRAFT_MAX]``, e.g. ``ngram-map-k:16``; opt-in) turns on llama.cpp's
    n-gram speculative decoding, recorded in the identity; ``threads`` fixes the server's
    threads (default: the CPUs free when it starts, ``free_cpus``)."""
    from traceless.models import fast_spec, load_backend, served_slots

    resolved = fast_spec(spec)
    if not resolved.startswith("llamacpp:"):
        return resolved, load_backend(resolved)
    ctx = max(context_tokens, _SLOT_CTX)
    kw: dict[str, Any] = {"ctx": ctx, **{k: v for k, v in (("speculation", speculation), ("num_threads", threads))
                                          if v and v != "none"}}
    if os.environ.get("TRACELESS_LLAMACPP_PARALLEL"):
        parallel = max(1, min(served_slots(), _KV_TOKENS // ctx))
        return resolved, load_backend(resolved, parallel=parallel, **kw)
    if ctx > _SLOT_CTX:
        return resolved, load_backend(resolved, parallel=1, cache_prompt=True, request_cache_prompt=False,
                                      max_concurrency=1, **kw)
    return resolved, load_backend(resolved, parallel=1, cache_prompt=False, **kw)


def _collect(config: SystemAuditConfig, phases: list[str], out_dir: Path, store: ResultsStore, seconds: float,
             model: dict[str, Any]) -> SystemAuditResult:
    """The table of the store's rows (``audit_table``, what ``traceless report`` renders);
    results.jsonl (the probe rows as ``AuditRow``s) and summary.json written from it."""
    cells = list(store.rows(config.model))
    t = audit_table(cells)
    if list(t.table) != phases:  # every phase ran before this is called: a mismatch is a bug
        raise StudyError(f"{out_dir}: the store holds phases {list(t.table)}, the audit ran {phases}")
    _atomic_write(out_dir / "results.jsonl", "".join(a.model_dump_json() + "\n" for a in t.probes))
    result = SystemAuditResult(system=config.system, table=t.table, copies=t.copies, files=t.files,
                               bystanders=t.bystanders, erasure=t.erasure,
                               rows=len(t.probes), seconds=seconds, out_dir=str(out_dir))
    _atomic_write(out_dir / "summary.json", json.dumps(
        {"config": config.model_dump(mode="json"), "model": model, "code_version": code_version(),
         **result.model_dump(exclude={"seconds", "out_dir"})}, indent=2))
    _finish_manifest(out_dir, config, len(cells), seconds)
    return result
