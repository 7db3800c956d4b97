"""The generic study runner.

A study is declared data: a pydantic config class, a grid of ``Cell`` s (each with a
``group`` key: cells sharing setup, e.g. one instance's memory), and ``run_group`` which
executes the (not yet finished) cells of one group and yields one ``CellResult`` per cell.
``run_study`` does the rest:

* writes every finished cell at once to the append-only results store of the out dir
  (``DIR/results.sqlite``, see ``_results``) and keeps ``DIR/manifest.json``;
* ``resume=True`` skips every cell whose key is already stored for this model, and refuses
  a dir made by another study, study version or results format (``ResumeError``);
* answers identical deterministic model calls from a generation cache persisted in the
  out dir (``DIR/generations.sqlite``), so nothing is generated twice, even across resume;
* runs groups concurrently in a thread pool when the backend serves parallel requests
  (HTTP backends: ``max_concurrency`` > 1); local backends run one group at a time and the
  study batches a group's prompts (``ctx.generate_batch``) so prefix KV is reused;
* shows a rich progress bar with ETA (cell counts and group names only: no secrets).
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import json
import os
import shutil
import sys
import threading
import time
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from traceless._version import code_version
from traceless.errors import ConfigError, ResumeError, StudyError
from traceless.models import (
    CachingBackend,
    ChatMessage,
    Embedder,
    Generation,
    GenerationConfig,
    ModelBackend,
)
from traceless.registry import ENTRY_POINT_GROUPS, Registry
from traceless.studies._ray import GenerationFile, RaySession
from traceless.studies._results import (
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

__all__ = [
    "STUDIES",
    "Study",
    "Cell",
    "CellResult",
    "RunContext",
    "RunSummary",
    "run_study",
    "derive_seed",
    "load_config",
    "parse_sets",
    "get_study",
]

C = TypeVar("C", bound=BaseModel)


def derive_seed(base: int, *parts: object) -> int:
    """A 63-bit seed derived from ``base`` and any JSON-able parts (stable across runs and
    machines; independent streams for different parts)."""
    blob = json.dumps([base, *parts], sort_keys=True, default=str).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "little") & (2**63 - 1)


class Cell(BaseModel):
    """One unit of work of a study grid."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(min_length=1)
    """Unique key (per model) in the results store, e.g. ``inst=q1/S=0/k=3/probe=direct:0``."""
    group: str = Field(min_length=1)
    """Cells with the same group are handed to ``run_group`` together (shared setup)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """JSON-able parameters of this cell (recorded in the row)."""
    seed: int = 0
    """Seed of this cell (use ``derive_seed``)."""


class CellResult(BaseModel):
    """What ``run_group`` yields for one cell."""

    key: str
    """The cell's key."""
    prompt: list[ChatMessage] | str | None = None
    """The exact prompt sent (data; may contain the memory)."""
    reply: str | None = None
    """The raw reply."""
    metrics: dict[str, Any] = Field(default_factory=dict)
    """Metric fields (e.g. ``{"extracted": true}``)."""
    timing: dict[str, Any] = Field(default_factory=dict)
    """Seconds / token counts."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Anything else worth keeping (context ids, tier, receipt id …)."""

    @staticmethod
    def timing_of(g: Generation) -> dict[str, Any]:
        """Accounting fields of a generation, for ``timing``."""
        return {
            "prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens,
            "cached_prompt_tokens": g.cached_prompt_tokens, "prompt_seconds": round(g.prompt_seconds, 4),
            "decode_seconds": round(g.decode_seconds, 4), "total_seconds": round(g.total_seconds, 4),
            "finish_reason": g.finish_reason,
        }


class Study(abc.ABC, Generic[C]):
    """Base class of a study. Register a subclass with ``@STUDIES.register("name")``."""

    name: ClassVar[str]
    """Registered name (also stored in the manifest)."""
    version: ClassVar[str] = "1"
    """Bump when cells, metrics or prompts change meaning: old dirs are then not resumed."""
    config_cls: ClassVar[type[BaseModel]]
    """The pydantic config class."""
    needs_model: ClassVar[bool] = True
    """Whether ``run_study`` must load a model backend."""
    default_model: ClassVar[str] = "qwen2.5-coder-0.5b-instruct"
    """Model spec used when none is given."""
    resume_may_change: ClassVar[frozenset[str]] = frozenset()
    bundle_extra: ClassVar[tuple[str, ...]] = ()
    """Dotted paths of a row's ``extra`` that an export bundle keeps (ids, labels and flags the
    report reads); every other key of ``extra`` (canaries, expected answers, replies) is dropped."""
    """Config fields that may differ on resume (e.g. ``n``: grow the instance set). Any
    other difference is refused, because stored cells would not match the new config."""

    def validate(self, config: C) -> None:  # noqa: B027 - optional hook
        """Check every input named by ``config`` (data files, checkpoints) before any work:
        called by ``run_study`` before the results dir, the model or the embedder is touched,
        so a bad path fails in a second, not after minutes of setup. Raise a
        ``TracelessError`` whose message says the fix."""

    def setup(self, ctx: RunContext[C]) -> None:  # noqa: B027 - optional hook
        """Run once before any group (load data, check inputs)."""

    @abc.abstractmethod
    def cells(self, config: C) -> Iterable[Cell]:
        """The full grid, in execution order."""

    @abc.abstractmethod
    def run_group(self, ctx: RunContext[C], cells: list[Cell]) -> Iterable[CellResult]:
        """Run the unfinished ``cells`` of one group; yield (or return) one result per cell.

        Results are written the moment they are yielded, so a generator loses nothing when
        the run is killed between two cells."""


STUDIES: Registry[type[Study[Any]]] = Registry("study", hint="list them with `traceless study list`",
                                               entry_points=ENTRY_POINT_GROUPS["study"])


def get_study(name: str) -> Study[Any]:
    """An instance of the registered study ``name``."""
    return STUDIES.get(name)()


class _LockedEmbedder(Embedder):
    """Serializes ``embed`` calls of a shared embedder across worker threads."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> Any:
        with self._lock:
            return self.inner.embed(texts)

    def describe(self) -> dict[str, object]:
        return self.inner.describe()


@dataclass
class RunContext(Generic[C]):
    """What ``run_group`` gets: the config, the (cached) model, the embedder, paths, seeds."""

    config: C
    """The validated study config."""
    out_dir: Path
    """The results dir."""
    work_dir: Path
    """Scratch space for the study (``DIR/work/<model tag>``), kept across resume."""
    model: ModelBackend | None
    """The model behind the generation cache (None for model-free studies)."""
    model_tag: str
    """The model's tag in the results dir."""
    identity: dict[str, Any]
    """``model.describe()`` of the inner backend."""
    workers: int = 1
    """Groups running at once."""
    embedder_factory: Callable[[], Embedder] | None = None
    _embedder: Embedder | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    state: dict[str, Any] = field(default_factory=dict)
    """Study-owned objects shared by all groups (filled in ``setup``)."""

    @property
    def embedder(self) -> Embedder:
        """The embedder (built on first use, shared by every group; calls are serialized
        when groups run in threads)."""
        with self._lock:
            if self._embedder is None:
                if self.embedder_factory is None:
                    raise StudyError("this study needs an embedder but none was configured")
                emb = self.embedder_factory()
                self._embedder = _LockedEmbedder(emb) if self.workers > 1 else emb
            return self._embedder

    def require_model(self) -> ModelBackend:
        if self.model is None:
            raise StudyError("this study needs a model; pass --model")
        return self.model

    def generate_batch(self, batch: Sequence[list[ChatMessage]], config: GenerationConfig) -> list[Generation]:
        """One backend batch (cache hits answered first; shared prompt prefixes reused)."""
        return self.require_model().generate_batch(list(batch), config)

    def seed(self, *parts: object) -> int:
        """A seed derived from the study config's ``seed`` field (0 if none) and ``parts``."""
        base = int(getattr(self.config, "seed", 0) or 0)
        return derive_seed(base, *parts)


class RunSummary(BaseModel):
    """What ``run_study`` did."""

    study: str
    """Study name."""
    out_dir: str
    """Results dir."""
    model_tag: str
    """Model tag of this run."""
    cells_total: int
    """Cells in the grid."""
    cells_skipped: int
    """Cells already present (resume)."""
    cells_run: int
    """Cells run now."""
    finished: bool
    """Every cell of the grid has a row."""
    part_finished: bool = False
    """Every cell this call was asked to run (its shard's, with ``shard``) has a row."""
    seconds: float
    """Wall time of this call."""
    cache_hits: int = 0
    """Model calls answered by the generation cache."""
    cache_misses: int = 0
    """Model calls generated."""


# --------------------------------------------------------------------------- config
def _scalar(text: str) -> Any:
    t = text.strip()
    try:
        return json.loads(t)
    except json.JSONDecodeError:
        low = t.lower()
        if low in ("true", "false"):
            return low == "true"
        if low in ("none", "null"):
            return None
        return t


def _is_sequence_type(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin in (list, tuple, set, frozenset, Sequence):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_sequence_type(a) for a in typing.get_args(tp) if a is not type(None))
    return False


def parse_sets(cls: type[BaseModel], sets: Iterable[str]) -> dict[str, Any]:
    """``["S=0,1", "k=3", "probe_tokens=48"]`` → a dict for ``cls``. Comma lists become lists;
    a single value for a list field becomes a one-element list; values are JSON when they
    parse as JSON (numbers, true/false, quoted strings), else plain strings."""
    out: dict[str, Any] = {}
    for item in sets:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set k=1,3")
        key, _, raw = item.partition("=")
        key = key.strip()
        if key not in cls.model_fields:
            raise ConfigError(
                f"--set {key}: {cls.__name__} has no field {key!r}; fields: {', '.join(cls.model_fields)}"
            )
        seq = _is_sequence_type(cls.model_fields[key].annotation)
        stripped = raw.strip()
        if stripped.startswith(("[", "{", '"')):
            val = _scalar(stripped)
        elif seq or "," in stripped:
            val = [_scalar(x) for x in stripped.split(",") if x.strip()] if stripped else []
        else:
            val = _scalar(stripped)
        if seq and not isinstance(val, list):
            val = [val]
        out[key] = val
    return out


def load_config(
    cls: type[C], file: str | Path | None = None, sets: Iterable[str] = (), base: dict[str, Any] | None = None
) -> C:
    """Config from (in increasing priority) ``base``, a TOML/JSON ``file`` and ``--set`` items."""
    data: dict[str, Any] = dict(base or {})
    if file is not None:
        p = Path(file)
        if not p.exists():
            raise ConfigError(f"config file {p} does not exist")
        try:
            text = p.read_text(encoding="utf-8")
            loaded = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
            raise ConfigError(f"config file {p} is not valid {'TOML' if p.suffix == '.toml' else 'JSON'}: {e}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p} must hold one object/table of fields")
        data.update(loaded)
    data.update(parse_sets(cls, sets))
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(config)"
        raise ConfigError(f"study config field {loc!r}: {err['msg']} (got {err.get('input')!r})") from None


# --------------------------------------------------------------------------- runner
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
    """``options`` for ``load_backend``, plus opt-in slots for a llama.cpp server the study starts.

    With ``TRACELESS_LLAMACPP_PARALLEL`` set, a ``llamacpp:`` model gets that many parallel
    slots (``served_slots``) unless ``parallel`` is given, and the runner keeps that many
    groups in flight (``_default_workers``): faster (qwen 0.5b on 2 cores: 7.3 decoded tokens
    per CPU-second with one slot, 16.5 with 8; docs/performance.md) but not reproducible run
    to run, since batched decoding changes greedy replies (measured on the audit: 11 of 42
    verdicts). Unset, the server has one slot, as everywhere reruns must repeat. The slots are
    recorded in the model identity."""
    opts = dict(options or {})
    if (spec.strip().startswith("llamacpp:") and "parallel" not in opts
            and os.environ.get("TRACELESS_LLAMACPP_PARALLEL")):
        from traceless.models import served_slots

        opts["parallel"] = served_slots()
    return opts


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


def _tag_of(spec: str) -> str:
    return spec.replace("/", "_").replace(":", "_").replace("@", "_") or "model"


def _default_workers(backend: ModelBackend | None) -> int:
    """Groups in flight: the backend's ``max_concurrency`` (HTTP backends), but no more than
    the slots of a llama.cpp server the backend owns (requests of interleaved groups would
    evict each other's cached prompt prefix from a single slot); 1 for local backends."""
    if backend is None:
        return 1
    n = max(1, int(getattr(backend, "max_concurrency", 1) or 1))
    server = getattr(backend, "server", None)
    slots = getattr(server, "parallel", None)
    if isinstance(slots, int) and slots >= 1:
        n = min(n, slots)
    return n


def _config_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def _check_dir(study: Study[Any], config: BaseModel, out: Path, resume: bool) -> Manifest | None:
    """Refuse a dir this run must not write into; the stored manifest, if any."""
    cfg = config.model_dump(mode="json")
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
    cfg = config.model_dump(mode="json")
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
    import fcntl

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
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._p = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("cells"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[group]}"),
            console=Console(stderr=True), transient=False,
        )
        from rich.markup import escape

        self._task = self._p.add_task(escape(label), total=total, completed=done, group="")
        self._p.start()

    def advance(self, group: str) -> None:
        if self._p is not None:
            from rich.markup import escape

            self._p.update(self._task, advance=1, group=escape(group))

    def stop(self) -> None:
        if self._p is not None:
            self._p.stop()


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
) -> RunSummary:
    """Run (or resume) ``study`` into ``out``.

    ``model`` is a backend spec for ``traceless.models.load_backend`` (default: the study's
    ``default_model``); or pass a ready ``backend`` (tests, custom backends) with a
    ``model_tag``. ``config`` (object or dict) defaults to the stored config when resuming,
    else to the study's defaults. ``max_cells`` stops after that many new cells (a slice;
    resume continues it). ``progress`` defaults to "stderr is a terminal".
    ``backend_options`` go to ``load_backend`` (e.g. ``{"num_threads": 1}`` for the local
    transformers backend on a shared machine); they do not change the model identity.
    ``shard=(i, n)`` runs only the groups whose position in the grid is i mod n, so n
    processes (same model, same dir) share one run; each finishes its part, and the run
    is finished when every cell is stored.
    ``executor="ray"`` runs each group as a Ray task (see ``_ray``) on the cluster at
    ``address`` (default: a private runtime on this machine); the model must then be a
    spec (each worker loads it), and this process still writes every row and cache entry.
    """
    if executor not in ("local", "ray"):
        raise ConfigError(f"executor {executor!r}: use local or ray")
    if executor == "local" and address is not None:
        raise ConfigError("--address needs --executor ray")
    if executor == "ray" and backend is not None:
        raise ConfigError("executor ray loads the model on every Ray worker from its spec; pass model=SPEC "
                          "(--model), not a backend object")
    if shard is not None and not (shard[1] >= 1 and 0 <= shard[0] < shard[1]):
        raise ConfigError(f"shard {shard[0]}/{shard[1]}: use I/N with 0 <= I < N")
    st = get_study(study) if isinstance(study, str) else study
    out_dir = Path(out)
    t0 = time.perf_counter()
    if config is None:
        if resume and (out_dir / MANIFEST).exists():
            cfg = st.config_cls.model_validate(read_manifest(out_dir).config)
        else:
            cfg = st.config_cls()
    elif isinstance(config, BaseModel):
        if not isinstance(config, st.config_cls):
            raise ConfigError(f"study {st.name!r} takes a {st.config_cls.__name__}, got {type(config).__name__}")
        cfg = config
    else:
        try:
            cfg = st.config_cls.model_validate(config)
        except ValidationError as e:
            raise ConfigError(f"study {st.name!r} config: {e.errors()[0]['msg']} at {e.errors()[0]['loc']}") from None

    st.validate(cfg)
    cells = list(st.cells(cfg))
    keys = [c.key for c in cells]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise StudyError(f"study {st.name!r} declared cell key {dup!r} twice (a study bug)")

    owned_backend = False
    inner: ModelBackend | None = backend
    session: RaySession | None = None
    if executor == "ray":
        _check_dir(st, cfg, out_dir, resume)  # before starting or reaching a cluster
        session = RaySession(address, workers)
        try:
            spec = (model or st.default_model) if st.needs_model else None
            tag = model_tag or (_tag_of(spec) if spec else "none")
            identity = session.describe(spec, backend_options) if spec else {}
        except BaseException:
            session.close()
            raise
    elif st.needs_model and inner is None:
        spec = model or st.default_model
        _check_dir(st, cfg, out_dir, resume)  # before paying for a model load
        inner = _load_backend(spec, backend_options)
        owned_backend = True
        model_tag = model_tag or _tag_of(spec)
    if session is None:
        tag = model_tag or (_tag_of(inner.name) if inner is not None else "none")
        identity = inner.describe() if inner is not None else {}
    try:
        return _execute(st, cfg, cells, out_dir, resume, tag, identity, inner, owned_backend, session,
                        spec if session is not None else None, embedder, workers, progress, max_cells, cache,
                        backend_options, shard, t0)
    finally:
        if session is not None:
            session.close()


def _execute(
    st: Study[Any], cfg: BaseModel, cells: list[Cell], out_dir: Path, resume: bool, tag: str,
    identity: dict[str, Any], inner: ModelBackend | None, owned_backend: bool, session: RaySession | None,
    spec: str | None, embedder: Embedder | Callable[[], Embedder] | None, workers: int | None,
    progress: bool | None, max_cells: int | None, cache: bool, backend_options: dict[str, Any] | None,
    shard: tuple[int, int] | None, t0: float,
) -> RunSummary:
    keys = [c.key for c in cells]
    man = _prepare_dir(st, cfg, out_dir, resume, tag, identity, len(cells))

    store = ResultsStore(out_dir / RESULTS_DB)
    if store.format() != RESULTS_FORMAT:
        store.close()
        raise ResumeError(f"{out_dir / RESULTS_DB} has results format {store.format()}; use a new --out dir")
    cached: CachingBackend | None = None
    run_model: ModelBackend | None = inner
    if inner is not None and cache:
        cached = CachingBackend(inner, out_dir / GENERATIONS_DB)
        run_model = cached
    if isinstance(embedder, Embedder):
        emb = embedder

        def factory() -> Embedder:
            return emb
    else:
        factory = embedder or _default_embedder
    gfile: GenerationFile | None = None
    ray_run: Any = None
    if session is not None:  # workers build their own context; this process writes rows and cache
        gfile = GenerationFile(out_dir / GENERATIONS_DB) if cache else None
        ray_run = session.start_run(type(st), cfg, spec, backend_options, tag, identity,
                                    embedder or _default_embedder, gfile.snapshot() if gfile else None)
    work = out_dir / "work" / tag
    work.mkdir(parents=True, exist_ok=True)
    ctx: RunContext[Any] = RunContext(
        config=cfg, out_dir=out_dir, work_dir=work, model=run_model, model_tag=tag, identity=identity,
        workers=workers or (session.cpus() if session is not None else _default_workers(inner)),
        embedder_factory=factory,
    )
    ray_counts = {"hits": 0, "misses": 0}

    def ray_results(gcells: list[Cell]) -> Iterator[CellResult]:
        assert session is not None
        for res, entries, hits, misses in session.run_group(ray_run, gcells):
            if gfile is not None:
                gfile.add(entries)  # before the row: a resume never pays for this generation again
            with lock:
                ray_counts["hits"] += hits
                ray_counts["misses"] += misses
            yield res
    done = store.done_keys(tag)
    todo = [c for c in cells if c.key not in done]
    skipped = len(cells) - len(todo)
    if shard is not None:
        index, count = shard
        order = {g: i for i, g in enumerate(dict.fromkeys(c.group for c in cells))}
        todo = [c for c in todo if order[c.group] % count == index]
    groups: dict[str, list[Cell]] = {}
    for c in todo:
        groups.setdefault(c.group, []).append(c)
    cfg_json = cfg.model_dump(mode="json")
    by_key = {c.key: c for c in cells}
    show = sys.stderr.isatty() if progress is None else progress
    bar = _Progress(show, len(cells), skipped, f"{st.name} [{tag}]")
    counter = {"run": 0}
    stop = threading.Event()
    lock = threading.Lock()

    def write(res: CellResult, group: str, expected: set[str]) -> None:
        if res.key not in expected:
            raise StudyError(f"study {st.name!r} returned a result for {res.key!r}, which group {group!r} "
                             "was not asked to run (a study bug)")
        cell = by_key[res.key]
        prompt: Any = res.prompt
        if isinstance(prompt, list):
            prompt = [m.model_dump() for m in prompt]
        row = ResultRow(
            model_tag=tag, key=res.key, group=group, config={"study": cfg_json, "cell": cell.params},
            seed=cell.seed, model=identity, code_version=code_version(), prompt=prompt, reply=res.reply,
            timing=res.timing, metrics=res.metrics, extra=res.extra, created=time.time(),
        )
        if store.add(row):
            with lock:
                counter["run"] += 1
                if max_cells is not None and counter["run"] >= max_cells:
                    stop.set()
            bar.advance(group)

    def run_one(group: str, gcells: list[Cell]) -> None:
        if stop.is_set():
            return
        expected = {c.key for c in gcells}
        source = ray_results(gcells) if session is not None else st.run_group(ctx, gcells)
        it = iter(source)  # run_group may return a list: only generators have close()
        with contextlib.closing(it) if hasattr(it, "close") else contextlib.nullcontext(it) as results:  # type: ignore[type-var]
            for res in results:
                write(res, group, expected)
                expected.discard(res.key)
                if stop.is_set():
                    return
        if expected:
            raise StudyError(
                f"study {st.name!r} group {group!r} finished without results for {len(expected)} cell(s), "
                f"e.g. {sorted(expected)[0]!r} (a study bug)"
            )

    interrupted: BaseException | None = None
    try:
        if todo and session is None:
            st.setup(ctx)
        if ctx.workers <= 1 or len(groups) <= 1:
            for g, gc in groups.items():
                if stop.is_set():
                    break
                run_one(g, gc)
        else:
            with ThreadPoolExecutor(max_workers=ctx.workers, thread_name_prefix="cell") as ex:
                futs: list[Future[None]] = [ex.submit(run_one, g, gc) for g, gc in groups.items()]
                try:
                    finished, _ = wait(futs, return_when=FIRST_EXCEPTION)
                except BaseException:  # Ctrl-C: running groups stop at their next result
                    stop.set()
                    for f in futs:
                        f.cancel()
                    raise
                failed = [f for f in futs if f.done() and f.exception() is not None]
                if failed:
                    stop.set()
                    for f in futs:
                        f.cancel()
                    wait(futs)
                    exc = failed[0].exception()
                    assert exc is not None
                    raise exc
    except BaseException as e:
        interrupted = e
        raise
    finally:
        bar.stop()
        stored = store.done_keys(tag)  # one read: the count and "every cell stored" both come from it
        n_done, all_done = len(stored), set(keys) <= stored
        part_done = interrupted is None and all(c.key in stored for c in todo)
        store.close()
        with _manifest_lock(out_dir):
            # other models or shards may be running into the same dir: update this model's
            # record as it is on disk now (add this process's time; never drop theirs)
            current = read_manifest(out_dir)
            rec = current.runs.get(tag) or man.runs[tag]
            rec.cells_done = n_done
            rec.finished = interrupted is None and all_done
            rec.updated = time.time()
            rec.seconds += time.perf_counter() - t0
            current.runs[tag] = rec
            write_manifest(out_dir, current)
        if gfile is not None:
            gfile.close()
        if session is not None and ray_run is not None:
            session.end_run(ray_run)
        if session is not None:
            hits, misses = ray_counts["hits"], ray_counts["misses"]
        elif cached is not None:
            hits, misses = cached.hits, cached.misses
            if owned_backend:
                cached.close()
            elif cached._db is not None:  # close the cache file; keep the caller's backend open
                cached._db.close()
        else:
            hits = misses = 0
            if owned_backend and inner is not None:
                inner.close()
    return RunSummary(
        study=st.name, out_dir=str(out_dir), model_tag=tag, cells_total=len(cells), cells_skipped=skipped,
        cells_run=counter["run"], finished=rec.finished, part_finished=part_done, seconds=time.perf_counter() - t0,
        cache_hits=hits, cache_misses=misses,
    )


def iter_chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of at most ``size`` items."""
    for i in range(0, len(items), max(1, size)):
        yield items[i : i + size]


def remove_dir(path: Path) -> None:
    """Remove a scratch folder (ignores a missing one)."""
    shutil.rmtree(path, ignore_errors=True)
