"""Run a study's cell groups as Ray tasks (``run_study(..., executor="ray")``).

The driver (the process that called ``run_study``) keeps every guarantee of a local run:
it checks and writes the results dir, the manifest and the generation cache; workers
never touch the out dir. Each group is one Ray *streaming* task: the worker yields each
``CellResult`` (with the generation-cache entries it made) the moment the study yields it,
and the driver commits the row at once, so a killed run loses only the cells in flight.

On the worker, the model is loaded from its spec once per worker process (and reused by
later tasks of any run); its ``describe()`` must equal the identity the driver recorded,
so a node serving other weights under the same name is refused. The study's ``setup``
runs once per worker process and run. The generation cache is shipped once per run
through Ray's object store (a snapshot of ``DIR/generations.sqlite``); entries a worker
generates come back to the driver and are written to that file.

With no address a private Ray runtime is started on this machine, bound to loopback
(127.0.0.1) only, without the dashboard and with Ray's usage statistics off.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import socket
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from traceless.errors import ConfigError, StudyError
from traceless.models import (
    ChatMessage,
    Embedder,
    Generation,
    GenerationConfig,
    ModelBackend,
    WrapperBackend,
    call_key,
)

__all__ = ["RaySession", "GenerationFile", "check_address"]

_INSTALL_HINT = "install it with `pip install 'traceless[ray]'`"
_START_HINT = (
    "Start a cluster there with `ray start --head --port=6379` and pass --address HOST:6379 "
    "(or --address auto on a node of that cluster), or omit --address to start a private Ray "
    "runtime on this machine"
)


# --------------------------------------------------------------------- driver side
class GenerationFile:
    """The generation cache file of a results dir, as the driver of a Ray run uses it:
    one snapshot read to ship to workers, and inserts of the entries workers made. Same
    table as ``traceless.models.CachingBackend``, so local and Ray runs share one cache."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30.0)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, body TEXT NOT NULL)")
        self._lock = threading.Lock()

    def snapshot(self) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("SELECT key, body FROM generations").fetchall())

    def add(self, entries: dict[str, str]) -> None:
        if not entries:
            return
        with self._lock:
            self._db.executemany("INSERT OR IGNORE INTO generations(key, body) VALUES (?, ?)", entries.items())

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()


def check_address(address: str, timeout: float = 5.0) -> None:
    """Refuse an address Ray cannot use, before anything is written: a Ray Client URL, a
    malformed one, or a HOST:PORT where nothing answers."""
    if address == "auto":
        return
    if address.startswith("ray://"):
        raise ConfigError(
            f"--address {address}: Ray Client (ray://) addresses are not supported (streaming tasks need "
            f"a cluster member); pass the cluster's GCS address HOST:PORT instead. {_START_HINT}."
        )
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"--address {address!r}: expected HOST:PORT (e.g. 10.0.0.5:6379) or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise ConfigError(f"the Ray cluster at {address} does not answer ({e}). {_START_HINT}.") from None
    _probe_gcs(address, timeout)


def _probe_gcs(address: str, timeout: float) -> None:
    """Ask the address for Ray's GCS with a deadline: ``ray.init`` itself retries a port that
    answers but is not Ray (or a cluster it cannot join) for many minutes."""
    try:
        import ray._raylet as raylet
    except ImportError:
        return  # no ray: RaySession says how to install it
    client: Any = getattr(raylet, "InnerGcsClient", None)  # not in Ray's stubs
    if client is None:
        return  # another Ray layout: ray.init decides
    try:
        client.standalone(address, None, int(timeout * 1000))
    except Exception as e:  # ray.exceptions.RpcError and kin
        raise ConfigError(
            f"something answers at {address} but not a Ray cluster ({str(e).splitlines()[0]}); pass the head "
            f"node's GCS address (the one `ray start --head` printed). {_START_HINT}."
        ) from None


@dataclass(frozen=True)
class _RunSpec:
    """Everything a worker needs to rebuild the run's context."""

    run_id: str
    study_cls: type[Any]
    config: dict[str, Any]
    model_spec: str | None
    backend_options: dict[str, Any]
    model_tag: str
    identity: dict[str, Any]
    embedder: Callable[[], Embedder] | Embedder
    snapshot: list[Any]  # [ObjectRef of the cache snapshot] (nested: fetched once per worker process)
    cache: bool


class RaySession:
    """A connection to a Ray cluster for one ``run_study`` call."""

    def __init__(self, address: str | None, num_cpus: int | None) -> None:
        if address is not None:
            check_address(address)
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # no telemetry, whoever started the cluster
        try:
            import ray
        except ImportError:
            raise ConfigError(f"--executor ray needs the ray package; {_INSTALL_HINT}") from None
        self._ray: Any = ray  # untyped in places (cluster_resources, streaming refs)
        self.owned = False
        if not ray.is_initialized():
            self._init(address, num_cpus)
            self.owned = True
        self._task: Any = ray.remote(num_returns="streaming")(_group_task)
        self._describe: Any = ray.remote(_describe_task)

    def _init(self, address: str | None, num_cpus: int | None) -> None:
        import logging

        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
        if address is None:
            kw["num_cpus"] = num_cpus or os.cpu_count() or 1
        else:
            kw["address"] = address
        try:
            if address is None or _is_loopback(address):
                with _loopback_only():
                    self._ray.init(_node_ip_address="127.0.0.1", **kw)
            else:
                self._ray.init(**kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"the Ray cluster at {address}" if address else "a local Ray runtime"
            raise ConfigError(f"cannot connect to {where}: {str(e).splitlines()[0]}. {_START_HINT}.") from None

    def cpus(self) -> int:
        """Groups to keep in flight: the cluster's CPUs."""
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def describe(self, spec: str, options: dict[str, Any] | None) -> dict[str, Any]:
        """The model's identity as a worker loads it (the driver never loads the model)."""
        out: dict[str, Any] = self._ray.get(self._describe.remote(spec, options or {}))
        return out

    def start_run(
        self, study_cls: type[Any], config: BaseModel, model_spec: str | None, options: dict[str, Any] | None,
        tag: str, identity: dict[str, Any], embedder: Callable[[], Embedder] | Embedder,
        snapshot: dict[str, str] | None,
    ) -> _RunSpec:
        ref = self._ray.put(snapshot or {})
        return _RunSpec(
            run_id=uuid.uuid4().hex, study_cls=study_cls, config=config.model_dump(mode="json"),
            model_spec=model_spec, backend_options=dict(options or {}), model_tag=tag, identity=identity,
            embedder=embedder, snapshot=[ref], cache=snapshot is not None,
        )

    def run_group(self, spec: _RunSpec, cells: list[Any]) -> Iterator[tuple[Any, dict[str, str], int, int]]:
        """Yield (CellResult, new cache entries, cache hits, cache misses) as the worker
        yields them; cancels the task when the consumer stops early."""
        gen = self._task.remote(spec, cells)
        finished = False
        try:
            for ref in gen:
                yield self._ray.get(ref)
            finished = True
        finally:
            if not finished:
                with contextlib.suppress(Exception):
                    self._ray.cancel(gen)

    def end_run(self, spec: _RunSpec) -> None:
        """Remove the run's worker scratch dirs on this machine (a local runtime's workers)."""
        for path in _scratch_dirs(spec.run_id):
            shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        if self.owned:
            self._ray.shutdown()


def _is_loopback(address: str) -> bool:
    host = address.rpartition(":")[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


@contextlib.contextmanager
def _loopback_only() -> Iterator[None]:
    """Keep Ray on 127.0.0.1: it otherwise swaps a loopback address for the host's routable
    one (to serve other nodes), which a single machine never needs, and a driver joining a
    loopback cluster then looks for it on an address where it does not listen."""
    from ray._private import ray_constants

    saved = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read by Ray's child processes
    old = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False  # read by services.get_node_ip_address at call time
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = old
        if saved is None:
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = saved


# --------------------------------------------------------------------- worker side
_BACKENDS: dict[str, ModelBackend] = {}
_RUNS: dict[str, tuple[Any, Any, _SnapshotCache | None]] = {}
_WORKER_LOCK = threading.Lock()


def _backend(spec: str, options: dict[str, Any]) -> ModelBackend:
    """The worker process's backend for ``spec`` (loaded once, reused by later tasks)."""
    key = json.dumps([spec, options], sort_keys=True, default=str)
    with _WORKER_LOCK:
        if key not in _BACKENDS:
            from traceless.models import load_backend

            _BACKENDS[key] = load_backend(spec, **options)
        return _BACKENDS[key]


def _describe_task(spec: str, options: dict[str, Any]) -> dict[str, Any]:
    return _backend(spec, options).describe()


class _SnapshotCache(WrapperBackend):
    """The worker's generation cache: the driver's snapshot plus what this worker made.
    Same keys and cacheability rule as ``CachingBackend`` (greedy, or sampling with a seed)."""

    def __init__(self, inner: ModelBackend, identity: dict[str, Any], snapshot: dict[str, str]) -> None:
        self.inner, self.name, self._identity = inner, inner.name, identity
        self._known = snapshot
        self._new: dict[str, str] = {}
        self.hits = self.misses = 0
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return self._identity

    def generate(self, messages: list[ChatMessage], config: GenerationConfig | None = None) -> Generation:
        return self.generate_batch([messages], config)[0]

    def generate_batch(self, batch: list[list[ChatMessage]], config: GenerationConfig | None = None) -> list[Generation]:
        cfg = config or GenerationConfig()
        if not (cfg.temperature == 0.0 or cfg.seed is not None):
            with self._lock:
                self.misses += len(batch)
            return self.inner.generate_batch(batch, cfg)
        keys = [call_key(self._identity, m, cfg) for m in batch]
        with self._lock:
            bodies = [self._new.get(k) or self._known.get(k) for k in keys]
        todo = list(dict.fromkeys(k for k, b in zip(keys, bodies, strict=True) if b is None))
        made: dict[str, Generation] = {}
        if todo:
            first = {k: keys.index(k) for k in todo}
            for k, g in zip(todo, self.inner.generate_batch([batch[first[k]] for k in todo], cfg), strict=True):
                made[k] = g
        with self._lock:
            self.hits += sum(1 for b in bodies if b is not None)
            self.misses += len(todo)
            for k, g in made.items():
                self._new[k] = g.model_dump_json()
        return [made[k] if b is None else Generation.model_validate_json(b) for k, b in zip(keys, bodies, strict=True)]

    def drain(self) -> tuple[dict[str, str], int, int]:
        """Entries made and hit/miss counts since the last drain (sent back with each cell)."""
        with self._lock:
            out, hits, misses = self._new, self.hits, self.misses
            self._known.update(out)
            self._new, self.hits, self.misses = {}, 0, 0
            return out, hits, misses


def _scratch_dirs(run_id: str) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"traceless-ray-{run_id}-*"))


def _scratch(run_id: str) -> Path:
    """This worker process's scratch dir for the run's work files (owner-only). Removed by the
    driver after the run when the worker shares its machine, else when this process starts
    another run or exits."""
    path = Path(tempfile.gettempdir()) / f"traceless-ray-{run_id}-{os.getpid()}"
    path.mkdir(mode=0o700)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _run_context(spec: _RunSpec) -> tuple[Any, Any, _SnapshotCache | None]:
    """The worker's (study, context, cache) of this run: built and set up once per process."""
    from traceless.run._study import RunContext

    with _WORKER_LOCK:
        got = _RUNS.get(spec.run_id)
    if got is not None:
        return got
    study = spec.study_cls()
    cfg = study.config_cls.model_validate(spec.config)
    model: ModelBackend | None = None
    cache: _SnapshotCache | None = None
    if spec.model_spec is not None:
        inner = _backend(spec.model_spec, spec.backend_options)
        if inner.describe() != spec.identity:
            raise StudyError(
                f"Ray node {socket.gethostname()} loads {spec.model_spec!r} as {inner.describe()}, but the run "
                f"records {spec.identity}; install the same weights on every node"
            )
        model = inner
        if spec.cache:
            import ray

            model = cache = _SnapshotCache(inner, spec.identity, dict(ray.get(spec.snapshot[0])))
    emb = spec.embedder
    factory: Callable[[], Embedder] = (lambda: emb) if isinstance(emb, Embedder) else emb
    with _WORKER_LOCK:
        for _, old_ctx, _ in _RUNS.values():  # an earlier run of this process is over
            shutil.rmtree(old_ctx.out_dir, ignore_errors=True)
    scratch = _scratch(spec.run_id)
    work = scratch / "work" / spec.model_tag
    work.mkdir(parents=True)
    ctx = RunContext(config=cfg, out_dir=scratch, work_dir=work, model=model, model_tag=spec.model_tag,
                     identity=spec.identity, workers=1, embedder_factory=factory,
                     engine=spec.backend_options.get("engine"))
    study.setup(ctx)
    with _WORKER_LOCK:
        _RUNS.clear()  # one run at a time per worker process: free the last run's state
        _RUNS[spec.run_id] = (study, ctx, cache)
    return study, ctx, cache


def _group_task(spec: _RunSpec, cells: list[Any]) -> Iterator[tuple[Any, dict[str, str], int, int]]:
    """A Ray streaming task: run one group, yield each result with its cache entries."""
    study, ctx, cache = _run_context(spec)
    for res in study.run_group(ctx, cells):
        entries, hits, misses = cache.drain() if cache is not None else ({}, 0, 0)
        yield res, entries, hits, misses
