"""The generic study runner: one run kernel for every study and the audit.

A study is declared data (``_study``): a pydantic config class, a grid of ``Cell`` s (each
with a ``group`` key: cells sharing setup, e.g. one instance's memory), and ``run_group``
which executes the (not yet finished) cells of one group and yields one ``CellResult`` per
cell (or a list of them, committed together). ``run_study`` does the rest, in three steps
(``open_run``, ``schedule``, ``finalize``):

* writes every finished cell at once to the append-only results store of the out dir
  (``DIR/results.sqlite``, see ``_results``) and keeps ``DIR/manifest.json``;
* ``resume=True`` skips every cell whose key is already stored for this model, and refuses
  a dir made by another study, study version or results format (``ResumeError``);
* answers identical deterministic model calls from one generation cache persisted in the
  out dir (``DIR/generations.sqlite``, or ``RunOptions.cache_file``), so nothing is
  generated twice, even across resume;
* runs groups concurrently in a thread pool when the backend serves parallel requests
  (HTTP backends: ``max_concurrency`` > 1); local backends run one group at a time and the
  study batches a group's prompts (``ctx.generate_batch``) so prefix KV is reused;
* shows a rich progress bar with ETA (cell counts and group names only: no secrets).
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from traceless._secrets import redact_secrets
from traceless._version import code_version
from traceless.errors import ConfigError, ResumeError, StudyError
from traceless.models import CachingBackend, Embedder, ModelBackend
from traceless.run._ray import GenerationFile, RaySession
from traceless.run._results import (
    GENERATIONS_DB,
    MANIFEST,
    RESULTS_DB,
    RESULTS_FORMAT,
    Manifest,
    ResultRow,
    ResultsStore,
    RunRecord,
    read_manifest,
    write_manifest,
)
from traceless.run._study import Cell, CellResult, RunContext, RunSummary, Study, get_study

__all__ = [
    "OpenRun",
    "RunOptions",
    "finalize",
    "iter_chunks",
    "open_run",
    "remove_dir",
    "run_study",
    "schedule",
    "served_options",
]


class RunOptions(BaseModel):
    """How a run is run: everything ``run_study`` takes besides the study, its config, the
    model and the embedder."""

    model_config = ConfigDict(frozen=True)

    resume: bool = False
    """Continue the run in the out dir (skip stored cells); without it a used dir is refused."""
    model_tag: str | None = None
    """The model's tag in the results dir (default: from the model spec or name)."""
    workers: int | None = Field(None, ge=1)
    """Groups in flight (default: what the backend serves at once; the Ray cluster's CPUs)."""
    progress: bool | None = None
    """Show the progress bar (default: stderr is a terminal)."""
    max_cells: int | None = Field(None, ge=1)
    """Stop after this many new cells (a slice; resume continues it)."""
    cache: bool = True
    """Answer identical deterministic model calls from the persisted generation cache."""
    cache_file: Path | None = None
    """The generation cache's file (default ``DIR/generations.sqlite``)."""
    work_dir: Path | None = None
    """The study's scratch dir, ``ctx.work_dir`` (default ``DIR/work/<model tag>``)."""
    backend_options: dict[str, Any] | None = None
    """Options for ``load_backend`` (they do not change the model identity)."""
    shard: tuple[int, int] | None = None
    """``(i, n)``: run only the groups whose position in the grid is i mod n."""
    executor: str = "local"
    """``local`` (threads of this process) or ``ray`` (a Ray task per group)."""
    address: str | None = None
    """The Ray cluster (``executor="ray"``; default: a private runtime on this machine)."""


@dataclass
class _Model:
    """The model side of a run: the backend (None under Ray: the workers load it), who closes
    it, the Ray session, the spec the workers load, the tag and the identity recorded."""

    backend: ModelBackend | None
    owned: bool
    tag: str
    identity: dict[str, Any]
    session: RaySession | None = None
    spec: str | None = None


class _GenerationCache:
    """The run's one generation cache, in ``DIR/generations.sqlite``: a ``CachingBackend``
    around the model (local runs) or the file the Ray workers' new entries are written to
    (they answer from a snapshot); counts hits and misses either way."""

    def __init__(self, model: _Model, path: Path, enabled: bool) -> None:
        self.model = model
        if enabled:
            path.parent.mkdir(parents=True, exist_ok=True)
        self.wrapped = (CachingBackend(model.backend, path) if enabled and model.backend is not None
                        and model.session is None else None)
        self.file = GenerationFile(path) if enabled and model.session is not None else None
        self.hits = self.misses = 0
        self._lock = threading.Lock()

    @property
    def front(self) -> ModelBackend | None:
        """The backend a study calls (cache first)."""
        return self.wrapped if self.wrapped is not None else self.model.backend

    def snapshot(self) -> dict[str, str] | None:
        return self.file.snapshot() if self.file is not None else None

    def add(self, entries: dict[str, str], hits: int, misses: int) -> None:
        """A Ray worker's new entries (written before its row: a resume never pays twice)."""
        if self.file is not None:
            self.file.add(entries)
        with self._lock:
            self.hits, self.misses = self.hits + hits, self.misses + misses

    def close(self) -> tuple[int, int]:
        """Close the cache file (and the model, when the run loaded it); (hits, misses)."""
        if self.file is not None:
            self.file.close()
        hits, misses = self.hits, self.misses
        if self.wrapped is not None:
            hits, misses = self.wrapped.hits, self.wrapped.misses
            self.wrapped.close_cache()
        if self.model.owned and self.model.backend is not None:
            self.model.backend.close()
        return hits, misses


@dataclass
class OpenRun:
    """A run between ``open_run`` and ``finalize``: the dir, its store and cache, the context
    the study runs in, and what is left to do."""

    study: Study[Any]
    cells: list[Cell]
    out_dir: Path
    options: RunOptions
    model: _Model
    manifest: Manifest
    store: ResultsStore
    cache: _GenerationCache
    ctx: RunContext[Any]
    todo: list[Cell]
    skipped: int
    """Cells already stored when the run opened."""
    t0: float
    by_key: dict[str, Cell] = field(default_factory=dict)
    config_json: dict[str, Any] = field(default_factory=dict)
    """The study config as every row records it (dumped once)."""
    ray_run: Any = None
    cells_run: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    bar: _Progress | None = None


def run_study(
    study: str | Study[Any],
    out: str | Path,
    config: BaseModel | dict[str, Any] | None = None,
    *,
    resume: bool = False,
    model: str | None = None,
    backend: ModelBackend | None = None,
    model_tag: str | None = None,
    embedder: Embedder | Callable[[], Embedder] | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    max_cells: int | None = None,
    cache: bool = True,
    backend_options: dict[str, Any] | None = None,
    shard: tuple[int, int] | None = None,
    executor: str = "local",
    address: str | None = None,
    cache_file: Path | None = None,
    work_dir: Path | None = None,
) -> RunSummary:
    """Run (or resume) ``study`` into ``out``.

    ``model`` is a backend spec for ``traceless.models.load_backend`` (default: the study's
    ``default_model``); or pass a ready ``backend`` (tests, custom backends) with a
    ``model_tag``. ``config`` (object or dict) defaults to the stored config when resuming,
    else to the study's defaults. The other keywords are ``RunOptions`` fields: ``max_cells``
    stops after that many new cells (a slice; resume continues it); ``progress`` defaults to
    "stderr is a terminal"; ``backend_options`` go to ``load_backend`` (e.g.
    ``{"num_threads": 1}``) and do not change the model identity; ``shard=(i, n)`` runs only
    the groups whose position in the grid is i mod n, so n processes (same model, same dir)
    share one run; ``executor="ray"`` runs each group as a Ray task (see ``_ray``) on the
    cluster at ``address`` (default: a private runtime on this machine): the model must then
    be a spec (each worker loads it), and this process still writes every row and cache entry.
    """
    opts = RunOptions(resume=resume, model_tag=model_tag, workers=workers, progress=progress, max_cells=max_cells,
                      cache=cache, cache_file=cache_file, work_dir=work_dir, backend_options=backend_options, shard=shard,
                      executor=executor, address=address)
    _check_options(opts, backend)
    st = get_study(study) if isinstance(study, str) else study
    out_dir, t0 = Path(out), time.perf_counter()
    cfg = _resolve_config(st, config, out_dir, resume)
    st.validate(cfg)
    cells = list(st.cells(cfg))
    keys = [c.key for c in cells]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise StudyError(f"study {st.name!r} declared cell key {dup!r} twice (a study bug)")
    src = _open_model(st, cfg, out_dir, opts, model, backend)
    try:
        run = open_run(st, cfg, cells, out_dir, opts, src, embedder, t0)
        interrupted: BaseException | None = None
        try:
            schedule(run)
        except BaseException as e:
            interrupted = e
            raise
        finally:
            summary = finalize(run, interrupted)
        return summary
    finally:
        if src.session is not None:
            src.session.close()


def _check_options(opts: RunOptions, backend: ModelBackend | None) -> None:
    if opts.executor not in ("local", "ray"):
        raise ConfigError(f"executor {opts.executor!r}: use local or ray")
    if opts.executor == "local" and opts.address is not None:
        raise ConfigError("--address needs --executor ray")
    if opts.executor == "ray" and backend is not None:
        raise ConfigError("executor ray loads the model on every Ray worker from its spec; pass model=SPEC "
                          "(--model), not a backend object")
    shard = opts.shard
    if shard is not None and not (shard[1] >= 1 and 0 <= shard[0] < shard[1]):
        raise ConfigError(f"shard {shard[0]}/{shard[1]}: use I/N with 0 <= I < N")


def _resolve_config(st: Study[Any], config: BaseModel | dict[str, Any] | None, out_dir: Path,
                    resume: bool) -> BaseModel:
    """The study config: given (object or dict), the stored one on resume, or the defaults."""
    if config is None:
        if resume and (out_dir / MANIFEST).exists():
            return st.config_cls.model_validate(read_manifest(out_dir).config)
        return st.config_cls()
    if isinstance(config, BaseModel):
        if not isinstance(config, st.config_cls):
            raise ConfigError(f"study {st.name!r} takes a {st.config_cls.__name__}, got {type(config).__name__}")
        return config
    try:
        return st.config_cls.model_validate(config)
    except ValidationError as e:
        raise ConfigError(f"study {st.name!r} config: {e.errors()[0]['msg']} at {e.errors()[0]['loc']}") from None


def _open_model(st: Study[Any], cfg: BaseModel, out_dir: Path, opts: RunOptions, spec: str | None,
                backend: ModelBackend | None) -> _Model:
    """The run's model: the caller's ``backend``, one loaded from ``spec`` (after the dir is
    checked: a refused dir costs no model load), or a Ray session whose workers load it."""
    if opts.executor == "ray":
        _check_dir(st, cfg, out_dir, opts.resume)  # before starting or reaching a cluster
        session = RaySession(opts.address, opts.workers)
        try:
            ray_spec = (spec or st.default_model) if st.needs_model else None
            tag = opts.model_tag or (_tag_of(ray_spec) if ray_spec else "none")
            identity = session.describe(ray_spec, opts.backend_options) if ray_spec else {}
        except BaseException:
            session.close()
            raise
        return _Model(None, False, tag, identity, session, ray_spec)
    owned = False
    if st.needs_model and backend is None:
        spec = spec or st.default_model
        _check_dir(st, cfg, out_dir, opts.resume)  # before paying for a model load
        backend, owned = _load_backend(spec, opts.backend_options), True
        tag = opts.model_tag or _tag_of(spec)
    else:
        tag = opts.model_tag or (_tag_of(backend.name) if backend is not None else "none")
    return _Model(backend, owned, tag, backend.describe() if backend is not None else {})


def open_run(st: Study[Any], cfg: BaseModel, cells: list[Cell], out_dir: Path, opts: RunOptions, model: _Model,
             embedder: Embedder | Callable[[], Embedder] | None, t0: float) -> OpenRun:
    """Check or create the dir and its manifest, open the results store and the generation
    cache, build the study's context, and list the cells still to run (this shard's)."""
    man = _prepare_dir(st, cfg, out_dir, opts.resume, model.tag, model.identity, len(cells))
    store = ResultsStore(out_dir / RESULTS_DB)
    if store.format() != RESULTS_FORMAT:
        store.close()
        raise ResumeError(f"{out_dir / RESULTS_DB} has results format {store.format()}; use a new --out dir")
    cache = _GenerationCache(model, opts.cache_file or out_dir / GENERATIONS_DB, opts.cache)
    factory = _embedder_factory(embedder)
    work = opts.work_dir or out_dir / "work" / model.tag
    work.mkdir(parents=True, exist_ok=True)
    session = model.session
    workers = opts.workers or (session.cpus() if session is not None else _default_workers(model.backend))
    ctx: RunContext[Any] = RunContext(config=cfg, out_dir=out_dir, work_dir=work, model=cache.front,
                                      model_tag=model.tag, identity=model.identity, workers=workers,
                                      embedder_factory=factory,
                                      engine=(opts.backend_options or {}).get("engine"))
    done = store.done_keys(model.tag)
    todo = [c for c in cells if c.key not in done]
    skipped = len(cells) - len(todo)
    if opts.shard is not None:
        index, count = opts.shard
        order = {g: i for i, g in enumerate(dict.fromkeys(c.group for c in cells))}
        todo = [c for c in todo if order[c.group] % count == index]
    run = OpenRun(st, cells, out_dir, opts, model, man, store, cache, ctx, todo, skipped, t0,
                  by_key={c.key: c for c in cells}, config_json=_config_json(cfg))
    if session is not None:  # workers build their own context; this process writes rows and cache
        run.ray_run = session.start_run(type(st), cfg, model.spec, opts.backend_options, model.tag,
                                        model.identity, embedder or _default_embedder, cache.snapshot())
    show = sys.stderr.isatty() if opts.progress is None else opts.progress
    run.bar = _Progress(show, len(cells), skipped, f"{st.name} [{model.tag}]")
    return run


def schedule(run: OpenRun) -> None:
    """Run the study's ``setup`` (when anything is left), then every group still to run: one
    after the other, or ``ctx.workers`` at once in a thread pool; the first failure stops the
    rest (running groups stop at their next result) and is raised."""
    groups: dict[str, list[Cell]] = {}
    for c in run.todo:
        groups.setdefault(c.group, []).append(c)
    if run.todo and run.model.session is None:
        run.study.setup(run.ctx)
    if run.ctx.workers <= 1 or len(groups) <= 1:
        for g, gc in groups.items():
            if run.stop.is_set():
                break
            _run_group(run, g, gc)
        return
    with ThreadPoolExecutor(max_workers=run.ctx.workers, thread_name_prefix=run.study.threads) as ex:
        futs: list[Future[None]] = [ex.submit(_run_group, run, g, gc) for g, gc in groups.items()]
        try:
            wait(futs, return_when=FIRST_EXCEPTION)
        except BaseException:  # Ctrl-C: running groups stop at their next result
            run.stop.set()
            for f in futs:
                f.cancel()
            raise
        failed = [f for f in futs if f.done() and f.exception() is not None]
        if failed:
            run.stop.set()
            for f in futs:
                f.cancel()
            wait(futs)
            exc = failed[0].exception()
            assert exc is not None
            raise exc


def _run_group(run: OpenRun, group: str, gcells: list[Cell]) -> None:
    if run.stop.is_set():
        return
    expected = {c.key for c in gcells}
    source = _ray_results(run, gcells) if run.model.session is not None else run.study.run_group(run.ctx, gcells)
    it = iter(source)  # run_group may return a list: only generators have close()
    with contextlib.closing(it) if hasattr(it, "close") else contextlib.nullcontext(it) as results:  # type: ignore[type-var]
        for res in results:
            batch = list(res) if isinstance(res, Sequence) else [res]
            _write(run, batch, group, expected)
            expected.difference_update(r.key for r in batch)
            if run.stop.is_set():
                return
    if expected:
        raise StudyError(
            f"study {run.study.name!r} group {group!r} finished without results for {len(expected)} cell(s), "
            f"e.g. {sorted(expected)[0]!r} (a study bug)"
        )


def _ray_results(run: OpenRun, gcells: list[Cell]) -> Iterator[CellResult]:
    assert run.model.session is not None
    for res, entries, hits, misses in run.model.session.run_group(run.ray_run, gcells):
        run.cache.add(entries, hits, misses)
        yield res


def _write(run: OpenRun, results: list[CellResult], group: str, expected: set[str]) -> None:
    """Store ``results`` (in one transaction) as rows of the runner's schema."""
    rows = []
    for res in results:
        if res.key not in expected:
            raise StudyError(f"study {run.study.name!r} returned a result for {res.key!r}, which group {group!r} "
                             "was not asked to run (a study bug)")
        cell = run.by_key[res.key]
        prompt: Any = [m.model_dump() for m in res.prompt] if isinstance(res.prompt, list) else res.prompt
        rows.append(ResultRow(
            model_tag=run.model.tag, key=res.key, group=group,
            config={"study": run.config_json, "cell": cell.params}, seed=cell.seed,
            model=run.model.identity, code_version=code_version(), prompt=prompt, reply=res.reply,
            timing=res.timing, metrics=res.metrics, extra=res.extra, created=time.time()))
    new = run.store.add(rows[0]) if len(rows) == 1 else run.store.add_many(rows)
    with run.lock:
        run.cells_run += int(new)
        if run.options.max_cells is not None and run.cells_run >= run.options.max_cells:
            run.stop.set()
    for _ in range(int(new)):
        assert run.bar is not None
        run.bar.advance(group)


def finalize(run: OpenRun, interrupted: BaseException | None) -> RunSummary:
    """Close the store and the cache, and record this call in the model's run record (cells
    stored, finished, time added), as the manifest is on disk now."""
    if run.bar is not None:
        run.bar.stop()
    stored = run.store.done_keys(run.model.tag)  # one read: the count and "every cell stored" both come from it
    finished = interrupted is None and {c.key for c in run.cells} <= stored
    part_done = interrupted is None and all(c.key in stored for c in run.todo)
    run.store.close()
    with _manifest_lock(run.out_dir):
        # other models or shards may be running into the same dir: update this model's
        # record as it is on disk now (add this process's time; never drop theirs)
        current = read_manifest(run.out_dir)
        rec = current.runs.get(run.model.tag) or run.manifest.runs[run.model.tag]
        rec.cells_done, rec.finished, rec.updated = len(stored), finished, time.time()
        rec.seconds += time.perf_counter() - run.t0
        current.runs[run.model.tag] = rec
        write_manifest(run.out_dir, current)
    hits, misses = run.cache.close()
    if run.model.session is not None and run.ray_run is not None:
        run.model.session.end_run(run.ray_run)
    n = len(run.cells)
    return RunSummary(
        study=run.study.name, out_dir=str(run.out_dir), model_tag=run.model.tag, cells_total=n,
        cells_skipped=run.skipped, cells_run=run.cells_run, finished=rec.finished, part_finished=part_done,
        seconds=time.perf_counter() - run.t0, cache_hits=hits, cache_misses=misses,
    )


# --------------------------------------------------------------------------- helpers
def _load_backend(spec: str, options: dict[str, Any] | None = None) -> ModelBackend:
    try:
        from traceless.models import load_backend
    except ImportError:
        raise StudyError(
            f"cannot load model {spec!r}: this traceless has no traceless.models.load_backend yet; "
            "pass a backend object to run_study(backend=...)"
        ) from None
    try:
        backend = load_backend(spec, **served_options(spec, options))
    except TypeError as e:
        raise ConfigError(f"backend {spec!r} does not take the options {sorted(options or {})}: {e}") from None
    assert isinstance(backend, ModelBackend)
    return backend


def served_options(spec: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """``options`` for ``load_backend``. The slots of a llama.cpp server the study starts come
    in ``options["engine"]`` (``EngineOptions.parallel``, built at the edge: ``--parallel``,
    ``TRACELESS_LLAMACPP_PARALLEL``), and the runner keeps that many groups in flight
    (``_default_workers``): faster (qwen 0.5b on 2 cores: 7.3 decoded tokens per CPU-second
    with one slot, 16.5 with 8; docs/performance.md) but not reproducible run to run, since
    batched decoding changes greedy replies (measured on the audit: 11 of 42 verdicts).
    Unset, the server has one slot, as everywhere reruns must repeat. The slots are recorded
    in the model identity."""
    return dict(options or {})


def _default_embedder() -> Embedder:
    try:
        from traceless.models import load_embedder
    except ImportError:
        raise StudyError(
            "this study needs the all-MiniLM-L6-v2 embedder (traceless.models.load_embedder), which this "
            "traceless does not have; pass embedder= to run_study"
        ) from None
    emb = load_embedder()
    assert isinstance(emb, Embedder)
    return emb


def _embedder_factory(embedder: Embedder | Callable[[], Embedder] | None) -> Callable[[], Embedder]:
    if isinstance(embedder, Embedder):
        emb = embedder
        return lambda: emb
    return embedder or _default_embedder


def _tag_of(spec: str) -> str:
    return spec.replace("/", "_").replace(":", "_").replace("@", "_") or "model"


def _default_workers(backend: ModelBackend | None) -> int:
    """Groups in flight: the backend's ``max_concurrency`` (HTTP backends), but no more than
    the slots of a llama.cpp server the backend owns (requests of interleaved groups would
    evict each other's cached prompt prefix from a single slot); 1 for local backends."""
    if backend is None:
        return 1
    n, slots = max(1, backend.concurrency()), backend.slots()
    return min(n, slots) if slots else n


def _config_json(config: BaseModel) -> dict[str, Any]:
    """The config as written (manifest, every row): secrets of the user redacted (issue 40.7)."""
    out: dict[str, Any] = redact_secrets(config.model_dump(mode="json"))
    return out


def _config_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def _check_dir(study: Study[Any], config: BaseModel, out: Path, resume: bool) -> Manifest | None:
    """Refuse a dir this run must not write into; the stored manifest, if any."""
    cfg = _config_json(config)
    if out.exists():
        study.check_dir(out, read_manifest(out) if (out / MANIFEST).exists() else None, config)
    if out.exists() and (out / MANIFEST).exists():
        man = read_manifest(out)
        if not resume:
            raise StudyError(
                f"{out} already holds results of study {man.study!r}; pass --resume to continue it "
                "(or to add another model), or choose a new --out dir"
            )
        if man.study != study.name:
            raise ResumeError(f"{out} holds results of study {man.study!r}, not {study.name!r}; use a new --out dir")
        if man.study_version != study.version:
            raise ResumeError(
                f"{out} was written by {man.study} version {man.study_version}; this is version {study.version} "
                "(cells changed meaning). Use a new --out dir."
            )
        if man.results_format != RESULTS_FORMAT:
            raise ResumeError(
                f"{out} has results format {man.results_format}; this traceless writes {RESULTS_FORMAT}. "
                "Use a new --out dir."
            )
        bad = [k for k in _config_diff(man.config, cfg) if k not in study.resume_may_change]
        if bad:
            detail = "; ".join(f"{k}: stored {man.config.get(k)!r}, now {cfg.get(k)!r}" for k in bad)
            raise ResumeError(
                f"cannot resume {out}: the config differs ({detail}). Resume with the stored config "
                f"(omit --config/--set), or use a new --out dir"
            )
        return man
    if out.exists() and any(out.iterdir()):
        raise StudyError(f"{out} exists and is not empty; choose a new or empty --out dir")
    return None


def _prepare_dir(
    study: Study[Any], config: BaseModel, out: Path, resume: bool, model_tag: str, identity: dict[str, Any],
    cells_total: int,
) -> Manifest:
    cfg = _config_json(config)
    now = time.time()
    stored = _check_dir(study, config, out, resume)
    if stored is not None:
        man = stored
        old = man.runs.get(model_tag)
        if old is not None and old.identity != identity:
            raise ResumeError(
                f"cannot resume {out}: model {model_tag!r} now has identity {identity}, but the stored rows "
                f"came from {old.identity}. Use the same weights, or another --model tag / --out dir."
            )
        man.config = cfg
    else:
        out.mkdir(parents=True, exist_ok=True)
        man = Manifest(study=study.name, study_version=study.version, config=cfg, created=now,
                       code_version=code_version())
    rec = man.runs.get(model_tag)
    if rec is None:
        rec = RunRecord(model_tag=model_tag, identity=identity, code_version=code_version(), started=now, updated=now)
    rec.code_version, rec.updated, rec.cells_total, rec.finished = code_version(), now, cells_total, False
    man.runs[model_tag] = rec
    with _manifest_lock(out):
        if (out / MANIFEST).exists():
            current = read_manifest(out)
            current.config = man.config
            current.runs[model_tag] = rec
            man = current
        write_manifest(out, man)
    return man


@contextlib.contextmanager
def _manifest_lock(out: Path) -> Iterator[None]:
    """An exclusive lock on ``DIR/manifest.lock`` around a manifest read-modify-write, so two
    models running into one dir at once never drop each other's run record."""
    with (out / "manifest.lock").open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class _Progress:
    """A rich progress bar (stderr) or nothing."""

    def __init__(self, enabled: bool, total: int, done: int, label: str) -> None:
        self._p: Any = None
        if not enabled:
            return
        from traceless.run._progress import progress_bar

        self._p = progress_bar("cells")
        from rich.markup import escape

        self._task = self._p.add_task(escape(label), total=total, completed=done, what="")
        self._p.start()

    def advance(self, group: str) -> None:
        if self._p is not None:
            from rich.markup import escape

            self._p.update(self._task, advance=1, what=escape(group))

    def stop(self) -> None:
        if self._p is not None:
            self._p.stop()


def iter_chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of at most ``size`` items."""
    for i in range(0, len(items), max(1, size)):
        yield items[i : i + size]


def remove_dir(path: Path) -> None:
    """Remove a scratch folder (ignores a missing one)."""
    shutil.rmtree(path, ignore_errors=True)
