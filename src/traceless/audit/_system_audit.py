"""The audit engine (``traceless audit``, with or without ``--memory NAME``): plant
canaries → write through the memory system → probe → for each native deletion, on a fresh
copy: delete → probe again → count the canary's copies in every named store and in every
file the system wrote. Plain ``traceless audit`` is this engine on the native ``traceless``
system, whose deletions are the forget modes. ``forget --certify`` and the inspect task
call the same phase function (``probe_phase``).

The audit is a study on the run kernel (``traceless.run``): its cells are phase × user ×
view × probe plus one residue cell per phase, a phase is a group, and the write step is the
study's setup; resume, concurrency (phases in flight when the model serves several
requests), the generation cache and the manifest are the runner's. Out dir::

    DIR/manifest.json        study "memory-audit", the config, the model's run record
    DIR/system.json          the system's identity
    DIR/steps/write.done     memory written (DIR/work/base holds it)
    DIR/results.sqlite       the rows, in the runner's store and row schema (``ResultRow``,
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
import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from traceless._secrets import redact_secrets, redact_text
from traceless._version import code_version
from traceless.audit._engine import (
    PhaseProbes,
    agent_replies,
    probe_contexts,
    probe_messages,
    probe_phase,
    store_copies,
)
from traceless.audit._inversion import InversionReport, candidate_inversion
from traceless.audit._probes import PROBE_LEVELS, Probe, probes
from traceless.audit._serving_cache import ServingCacheTier, audit_serving_cache
from traceless.audit._table import AuditRow, audit_table, residue_key
from traceless.datasets import canary_sentence, inject_canary, make_canary, redact_canaries, synthetic_users
from traceless.errors import ConfigError, InputFormatError, ResumeError, StudyError
from traceless.forget import scan_files
from traceless.memory import Session
from traceless.models import (
    ChatMessage,
    Embedder,
    EngineOptions,
    FloatArray,
    GenerationConfig,
    ModelBackend,
)
from traceless.run import (
    RESULTS_DB,
    Cell,
    CellResult,
    Manifest,
    ResultsStore,
    RunContext,
    Study,
    atomic_write,
    run_study,
)
from traceless.systems import (
    BystanderCheck,
    DeletionTarget,
    FileVectors,
    MemorySystem,
    SystemConfig,
    SystemRuntime,
    SystemSpec,
    bystander_check,
    erasure_claims,
    open_system,
    resolve_system,
)

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
    "agent_replies",
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
    serving_cache_n: int = Field(0, ge=0, le=300)
    """Records per group of the serving-cache tier (``audit_serving_cache``: time to the first
    token of prefixes the served model saw against matched controls, KS; fixed before the run),
    run after every deletion when traceless serves the model (its llama.cpp server); 0: not run."""
    inversion_decoys: int = Field(10_000, ge=0)
    """Decoy canaries of the inversion check (``candidate_inversion``), run after every phase
    of a system whose files hold vectors traceless reads (``MemorySystem.file_vectors``)."""


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
    inversion: dict[str, InversionReport | None] = Field(default_factory=dict)
    """phase → the candidate attack on the vectors read from the system's files after it (the
    planted canaries recovered top-1/top-k, exact intervals); None: its files hold no vectors
    traceless reads (``MemorySystem.file_vectors``)."""
    serving_cache: dict[str, ServingCacheTier | None] = Field(default_factory=dict)
    """deletion → the serving-cache tier (``serving_cache_n`` > 0): the served model's prompt
    cache as the native deletion leaves it and after traceless's erasure clears it; None: no
    model served by traceless."""
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


class _Remembered:
    """Every text a system's embedder embedded for the inversion check, remembered per
    embedder name: each phase ranks the same 10^4 candidates under the same model (its own
    instance of it), so they are embedded once per audit. Calls are serialized (phases run
    in threads)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], FloatArray] = {}
        self._lock = threading.Lock()

    def of(self, inner: Embedder) -> Embedder:
        """``inner`` with its texts remembered here."""
        return _RememberedEmbedder(self, inner)

    def embed(self, inner: Embedder, texts: list[str]) -> FloatArray:
        with self._lock:
            todo = [t for t in dict.fromkeys(texts) if (inner.name, t) not in self._seen]
            if todo:
                self._seen.update(((inner.name, t), v) for t, v in zip(todo, inner.embed(todo), strict=True))
            return np.stack([self._seen[(inner.name, t)] for t in texts])


class _RememberedEmbedder(Embedder):
    def __init__(self, memo: _Remembered, inner: Embedder) -> None:
        self.memo, self.inner, self.name, self.dim = memo, inner, inner.name, inner.dim

    def embed(self, texts: list[str]) -> FloatArray:
        return self.memo.embed(self.inner, texts)

    def describe(self) -> dict[str, object]:
        return self.inner.describe()


def _redactor(canaries: list[str], reveal: bool) -> Callable[[str], str]:
    """Exact and near copies (edit distance <= 2, ``redact_canaries``) become ``[CANARY]``."""
    return (lambda s: s) if reveal else (lambda s: redact_canaries(s, canaries))


def open_copy(name: str | SystemSpec, base: Path, work_dir: Path, config: SystemConfig | None,
              runtime: SystemRuntime) -> MemorySystem:
    """Open system ``name`` (or a ``SystemSpec`` resolved at the edge: not looked up again) on a
    fresh copy of the memory in ``base`` (closed), in ``work_dir``: every deletion starts from
    the same memory."""
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
        self.vectors: FileVectors | None = None
        """The vectors the system's files hold after the phase (``MemorySystem.file_vectors``,
        read when the phase closes); None: none traceless reads."""

    def forget(self, planted: Planted) -> None:
        """The native deletion of this phase for one user's canary (nothing before deletion)."""
        if self.operation != "before":
            self.notes[planted.owner] = self.system.delete(self.operation, planted.target)


@contextlib.contextmanager
def deletion_phase(name: str | SystemSpec, base: Path, work_dir: Path, config: SystemConfig | None,
                   runtime: SystemRuntime, operation: str, canaries: Sequence[str]) -> Iterator[DeletionPhase]:
    """Engine steps 4–5 for one phase, shared by ``traceless audit`` and the frontier study:
    open the system on a fresh copy of the written memory; inside the block the caller
    deletes (``phase.forget``) and probes (``phase.system``); on leaving it, the residue scan
    counts the canaries in every named store, and, after the system is closed (connections
    flushed as the system leaves them), in every file it wrote; the vectors its files hold are
    read then too (``phase.vectors``)."""
    system = open_copy(name, base, work_dir, config, runtime)
    phase = DeletionPhase(system, operation)
    try:
        yield phase
        phase.copies = store_copies(system, canaries)
        files = system.files()
    finally:
        system.close()
    phase.vectors = system.file_vectors()
    phase.files = {str(f.relative_to(work_dir)) if f.is_relative_to(work_dir) else str(f): n
                   for f in files for n in [sum(scan_files([f], c).get(str(f), 0) for c in canaries)] if n}


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
            f"memory system {self.system!r} failed at step {self.step!r} ({type(e).__name__}: {redact_text(str(e))}); "
            "the finished "
            f"steps are kept in {self.out_dir}: fix the cause and rerun the same command to resume there"
        ) from e


class _AuditStudy(Study[SystemAuditConfig]):
    """The audit as a study on the run kernel: a phase (``before`` or a deletion) is a group
    of cells (user × view × probe, then the phase's residue cell), the write step its setup."""

    name = STUDY
    version = STUDY_VERSION
    config_cls = SystemAuditConfig
    threads = "audit-phase"

    def __init__(self, config: SystemAuditConfig, runtime: SystemRuntime,
                 on_progress: Callable[[int, int, str], None] | None, spec: SystemSpec | None = None) -> None:
        if spec is not None and spec.name != config.system:
            raise ConfigError(f"the audit's system is {config.system!r}, its resolved spec is of {spec.name!r}")
        self.spec = spec if spec is not None else resolve_system(config.system, config.system_config)
        self.sys_cfg, cls = self.spec.config, self.spec.cls
        cls.audit_overrides(self.sys_cfg)  # an unsupported back end is refused here, before any model or file
        known = cls.deletions(self.sys_cfg)
        ops = known if config.operations is None else config.operations
        for op in ops:
            if op not in known:
                raise ConfigError(f"{config.system} has no deletion {op!r}; its deletions: {', '.join(known)}")
        self.phases, self.planted = ["before", *ops], plant_canaries(config)
        self.runtime, self.on_progress = runtime, on_progress
        self.embedder = _QueryMemo(runtime.embedder)
        self.candidates = _Remembered()
        self._users, self._lock = dict.fromkeys(self.phases, 0), threading.Lock()

    def check_dir(self, out: Path, stored: Manifest | None, config: SystemAuditConfig) -> None:
        if stored is None:
            if any(out.iterdir()):
                raise ConfigError(f"{out} exists and is not an audit results dir; use a fresh --out dir")
            return
        if stored.study != STUDY or stored.config != redact_secrets(config.model_dump(mode="json")):
            raise ResumeError(f"{out} holds another audit ({stored.study}, other settings); use a fresh --out dir "
                              "or rerun with the settings it was started with")
        if stored.study_version != STUDY_VERSION:
            raise ResumeError(f"{out} was written by another version of the audit (layout {stored.study_version}, "
                              f"this traceless writes {STUDY_VERSION}); use a fresh --out dir")

    def cells(self, config: SystemAuditConfig) -> Iterable[Cell]:
        probe_list = probes(PROBE_LEVELS, wordings=config.wordings)
        views = self.spec.cls.probe_views_of(self.sys_cfg)
        for phase in self.phases:
            for p in self.planted:
                for view in ("agent",) if phase == "before" else views:
                    for pr in probe_list:
                        params = {"kind": "aer", "instance": p.owner, "level": pr.level, "wording": pr.wording}
                        if phase != "before":
                            params |= {"kind": "frs", "mode": phase, "tier": view}
                        yield Cell(key=_probe_key(phase, view, pr, p.owner), group=phase, seed=config.seed,
                                   params={**params, "system": config.system})
            yield Cell(key=residue_key(phase), group=phase, seed=config.seed,
                       params={"kind": "residue", "mode": phase, "system": config.system})

    def _runtime(self, ctx: RunContext[SystemAuditConfig]) -> SystemRuntime:
        return replace(self.runtime, model=ctx.require_model(), embedder=self.embedder)

    def setup(self, ctx: RunContext[SystemAuditConfig]) -> None:
        """Engine step 2, once: every user's sessions (canaries planted) written through the
        system into ``work/base``, the memory every phase copies."""
        cfg, out = ctx.config, ctx.out_dir
        if not (out / "system.json").exists():
            atomic_write(out / "system.json", json.dumps({"system": cfg.system, "config": redact_secrets(
                self.sys_cfg.model_dump(mode="json")), "model": ctx.identity}, indent=2, default=str))
        steps, base = out / "steps", ctx.work_dir / "base"
        if (steps / "write.done").exists():
            return
        steps.mkdir(exist_ok=True)
        shutil.rmtree(base, ignore_errors=True)
        with _Step(cfg.system, "write", out):
            system = self.spec.open(base, self._runtime(ctx))
            try:
                system.write([s for p in self.planted for s in p.sessions])
            finally:
                system.close()
        atomic_write(steps / "write.done", "")

    def run_group(self, ctx: RunContext[SystemAuditConfig], cells: list[Cell]) -> Iterator[list[CellResult]]:
        """One phase, whole (a resumed phase is redone: its deletion and residue need all of
        it); its results are yielded as one list, so they are committed together."""
        phase, work = cells[0].group, ctx.work_dir
        with _Step(ctx.config.system, phase, ctx.out_dir):
            results = _run_phase(self, ctx, phase, work / phase, lambda n: self._progress(phase, n))
        if not ctx.config.keep_memory:
            shutil.rmtree(work / phase, ignore_errors=True)
        self._progress(phase, len(self.planted))
        asked = {c.key for c in cells}
        yield [r for r in results if r.key in asked]

    def _progress(self, phase: str, users: int) -> None:
        with self._lock:
            self._users[phase] = users
            done = sum(self._users.values())
        if self.on_progress:
            self.on_progress(done, len(self.phases) * len(self.planted), phase)


def run_system_audit(
    config: SystemAuditConfig,
    runtime: SystemRuntime,
    out_dir: Path,
    *,
    on_progress: Callable[[int, int, str], None] | None = None,
    spec: SystemSpec | None = None,
) -> SystemAuditResult:
    """Audit ``config.system``; resumable in ``out_dir``. See the module docstring. ``spec``: the
    system resolved once at the edge (``resolve_system``: its config is the one the audit runs;
    ``config.system_config`` is what the results dir records); None: resolved here."""
    t0 = time.perf_counter()
    study = _AuditStudy(config, runtime, on_progress, spec)
    work = out_dir / "work"
    # a rerun after a stop pays for no generation twice (the phase it stopped in is redone,
    # its replies come from the cache); in work/, so it goes with the memory at the end
    run_study(study, out_dir, config, resume=True, backend=runtime.model, model_tag=config.model,
              workers=phase_workers(runtime.model, len(study.phases)), progress=False,
              cache_file=work / "generations.sqlite", work_dir=work)
    result = _collect(config, study.phases, out_dir, time.perf_counter() - t0, runtime.model.describe())
    if not config.keep_memory:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _run_phase(study: _AuditStudy, ctx: RunContext[SystemAuditConfig], phase: str, phase_dir: Path,
               progress: Callable[[int], None]) -> list[CellResult]:
    """One phase on a fresh copy of the written memory: delete (each user in turn, the other
    users' canaries checked around it), probe, scan; the phase's results."""
    config, planted, runtime = ctx.config, study.planted, study._runtime(ctx)
    canaries = [p.canary for p in planted]
    probe_list = probes(PROBE_LEVELS, wordings=config.wordings)
    direct = [pr.text for pr in probe_list if pr.level == "direct"]
    check = BystanderCheck()
    base = ctx.work_dir / "base"
    with deletion_phase(study.spec, base, phase_dir, None, runtime, phase, canaries) as ph:
        def forget(i: int) -> None:
            if phase == "before":
                return
            others = [(q.owner, q.canary) for q in planted if q is not planted[i]]  # around this user's deletion
            bystander_check(ph.system, others, direct, functools.partial(ph.forget, planted[i]), check)

        views = ("agent",) if phase == "before" else study.spec.cls.probe_views_of(study.sys_cfg)
        got = probe_phase(ph.system, [(p.owner, p.canary) for p in planted], probe_list, lambda: views,
                          runtime.model, GenerationConfig(max_new_tokens=config.max_new_tokens, temperature=0.0),
                          before_user=forget, on_batch=progress,
                          batch=batch_size(runtime.model, len(planted) * len(views) * len(probe_list),
                                           len(probe_list)))
    erasure, serving = (None, None) if phase == "before" else _after_deletion(study, ph, config, runtime, phase_dir)
    red = _redactor(canaries, config.reveal)
    inversion = None if ph.vectors is None else candidate_inversion(
        ph.vectors.vectors, canaries, study.candidates.of(ph.vectors.embedder), decoys=config.inversion_decoys)
    residue = CellResult(key=residue_key(phase), metrics={
        "copies": ph.copies, "files": ph.files, "phase_index": study.phases.index(phase),
        "inversion": None if inversion is None else inversion.model_dump(mode="json"),
        "views": list(ph.system.views), **({} if phase == "before" else {"bystanders": check.metrics()}),
        **({} if erasure is None else {"erasure": erasure}),
        **({"serving_cache": None if serving is None else serving.model_dump(mode="json")}
           if phase != "before" and config.serving_cache_n else {})},
        extra={"notes": json.loads(red(json.dumps(ph.notes, default=str)))})
    return [*_probe_results(phase, got, red), residue]


_SERVING_LOCK = threading.Lock()
"""The serving-cache tier and traceless's erasure (which clears the served model's cache) of
one phase at a time: another phase's clear in the middle of the tier would empty the cache
it measures."""


def _after_deletion(study: _AuditStudy, ph: DeletionPhase, config: SystemAuditConfig, runtime: SystemRuntime,
                    phase_dir: Path) -> tuple[dict[str, Any] | None, ServingCacheTier | None]:
    """What traceless's erasure reaches after the phase's native deletion (``erasure_claims``)
    and, with ``serving_cache_n``, the serving-cache tier: the served model's cache as the
    native deletion left it, then cleared by the erasure's own step
    (``MemorySystem.clear_serving_cache``)."""
    canaries = [p.canary for p in study.planted]
    cache = runtime.model.serving_cache() if config.serving_cache_n else None
    with _SERVING_LOCK:
        serving = None if cache is None else audit_serving_cache(
            cache, canaries, lambda: _timed(ph.system.clear_serving_cache), n=config.serving_cache_n,
            sentence=canary_sentence, seed=config.seed)
        with _OPEN_LOCK:
            erasure = erasure_claims(study.spec, phase_dir, runtime, list(zip(
                (p.owner for p in study.planted), canaries, strict=True)))
    return erasure, serving


def _timed(step: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def _probe_results(phase: str, got: PhaseProbes, red: Callable[[str], str]) -> list[CellResult]:
    return [CellResult(
        key=_probe_key(phase, r.view, r.probe, r.owner), reply=red(r.reply.text),
        prompt=[ChatMessage(role=m.role, content=red(m.content)) for m in r.messages],
        metrics={"extracted": r.extracted}, timing=CellResult.timing_of(r.reply),
        extra={"context_ids": r.context_ids, "order": n})  # the phase's request order
        for n, r in enumerate(got.replies)]


def _collect(config: SystemAuditConfig, phases: list[str], out_dir: Path, seconds: float,
             model: dict[str, Any]) -> SystemAuditResult:
    """The table of the store's rows (``audit_table``, what ``traceless report`` renders);
    results.jsonl (the probe rows as ``AuditRow``s) and summary.json written from it."""
    with ResultsStore(out_dir / RESULTS_DB) as store:
        cells = list(store.rows(config.model))
    t = audit_table(cells)
    if list(t.table) != phases:  # every phase ran before this is called: a mismatch is a bug
        raise StudyError(f"{out_dir}: the store holds phases {list(t.table)}, the audit ran {phases}")
    atomic_write(out_dir / "results.jsonl", "".join(a.model_dump_json() + "\n" for a in t.probes))
    result = SystemAuditResult(system=config.system, table=t.table, copies=t.copies, files=t.files,
                               bystanders=t.bystanders, erasure=t.erasure, inversion=t.inversion,
                               serving_cache=t.serving_cache,
                               rows=len(t.probes), seconds=seconds, out_dir=str(out_dir))
    atomic_write(out_dir / "summary.json", json.dumps(
        {"config": redact_secrets(config.model_dump(mode="json")), "model": model, "code_version": code_version(),
         **result.model_dump(exclude={"seconds", "out_dir"})}, indent=2))
    return result


def phase_workers(model: ModelBackend, phases: int) -> int:
    """Phases run at once: as many as the model's server has slots (the opt-in
    ``EngineOptions.parallel``); one slot or a local model runs them one after the other
    (nothing to gain: the requests queue for the one slot)."""
    slots = model.slots()
    return max(1, min(phases, slots, concurrency(model))) if slots else 1


def batch_size(model: ModelBackend, jobs: int, step: int) -> int:
    """Probes sent to the model per call. A backend that serves concurrent requests (a
    llama.cpp server's slots, any HTTP server) gets the whole phase at once, so its slots stay
    full; a local batching backend keeps 4 contexts' probes per call, the batch composition its
    replies were pinned with (padding in a batch changes a transformers model's numerics)."""
    return max(1, jobs) if concurrency(model) > 1 else step * 4


def concurrency(model: ModelBackend) -> int:
    """Requests ``model`` serves at once (1 for a local backend; a wrapper such as the
    generation cache forwards its backend's)."""
    return max(1, model.concurrency())


def audit_model(spec: str, context_tokens: int = 0, *,
                engine: EngineOptions | None = None) -> tuple[str, ModelBackend]:
    """The audited agent's model, on the fastest engine that keeps the audit reproducible
    (``traceless.models.audit_backend``: llama.cpp for a bare catalog name when installed,
    one slot, the prompt cache only for a long-context system's own calls) with the engine
    options ``engine`` (built at the edge: ``--parallel`` N opts into N slots, faster and not
    reproducible run to run; ``--speculation``, ``--threads``). Returns the resolved spec
    (recorded in the config) and the backend; ``transformers:NAME`` keeps that engine."""
    from traceless.models import audit_backend

    return audit_backend(spec, context_tokens, engine)


def _probe_key(phase: str, view: str, pr: Probe, profile: str) -> str:
    # the user last: every segment before it is a name without "/", so keys cannot collide
    head = "aer" if phase == "before" else f"frs/{phase}/{view}"
    return f"{head}/{pr.level}:{pr.wording}/user={profile}"
