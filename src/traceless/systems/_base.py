"""The ``MemorySystem`` plug-in interface and its registry.

A memory system is anything an agent keeps memory in (traceless's own store, mem0,
LangGraph's store and checkpointer, ...). The audit engine needs five things of it:

* ``write(sessions)``: put conversations into memory the way the system does;
* ``context(owner, query)``: the memory the agent would be shown for ``query``, found
  with the system's own retrieval;
* ``deletions`` and ``delete(operation, target)``: the system's own deletion
  operations, each named (what a user of that system would call on a deletion request);
* ``stores()``: every store the system keeps, by name, each yielding its texts (the
  residue scan counts the canary's copies per store);
* ``files()``: the files it wrote (the byte scan reads them).

A system lives in one work directory (``work_dir``): the engine writes memory once,
closes it, copies the directory for each deletion operation and reopens it there, so
every operation starts from the same memory.

Systems register with ``@memory_system("name")``; other packages register theirs
through the entry-point group ``traceless.memory_systems`` (``name = module:Class``), and the
built-in adapters are loaded through the same door (``DEFAULT_SYSTEMS``).
"""

from __future__ import annotations

import abc
import importlib.util
import os
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from traceless._jsonin import check_value, decode_utf8, loads
from traceless.errors import ConfigError, InputFormatError, TracelessError, UnknownNameError, UnsupportedError
from traceless.memory import Session
from traceless.models import ChatMessage, Embedder, Generation, ModelBackend
from traceless.registry import ENTRY_POINT_GROUPS, PluginWarning, Registry
from traceless.systems import kernel
from traceless.systems._erase import ErasurePlan, ScanReport, StoreOutcome
from traceless.systems.contract import Capability, LiveInstance

__all__ = [
    "DEFAULT_SYSTEMS",
    "ENTRY_POINT_GROUP",
    "MEMORY_SYSTEMS",
    "ContextItem",
    "DeletionTarget",
    "FileVectors",
    "MemorySystem",
    "MissingPackageError",
    "SERVING_CACHE",
    "PluginWarning",
    "SystemConfig",
    "SystemRuntime",
    "SystemSpec",
    "SystemStatus",
    "load_entry_points",
    "load_system_config",
    "memory_system",
    "open_system",
    "resolve_system",
    "system_class",
    "system_status",
]

ENTRY_POINT_GROUP = ENTRY_POINT_GROUPS["memory system"]


class MissingPackageError(ConfigError):
    """A memory system's third-party package is not installed."""


class SystemConfig(BaseModel):
    """Base of every system's config: unknown keys are refused (a typo is named, not ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class SystemRuntime:
    """What the audit hands a system: the models it may use."""

    model: ModelBackend
    """The agent's model (also the summarizer/extractor of systems that call an LLM)."""
    embedder: Embedder
    """The retrieval embedder (systems with their own embedding stack may ignore it)."""
    model_spec: str = ""
    """The ``--model`` spec the model was built from (e.g. ``llamacpp:NAME``)."""


SERVING_CACHE = "serving cache"
"""The tier name of a served model's prompt cache (``MemorySystem.clear_serving_cache``)."""


@dataclass(frozen=True)
class DeletionTarget:
    """What a deletion request names: one user's planted secret."""

    owner: str
    """The user (tenant) the secret belongs to."""
    literal: str
    """The secret's exact text (the canary)."""
    session_id: str
    """The session that carried it."""


@dataclass(frozen=True)
class ContextItem:
    """One memory entry shown to the agent."""

    id: str
    """The system's id of the entry (evaluator-side; never shown to the model)."""
    text: str
    """The text the model sees."""
    origin: str = ""
    """Where the entry comes from, when the system knows (the native store: its tier, ``raw`` or
    ``summary``), so leakage can be attributed to the origin tier (paper 000's primary FRS)."""


@dataclass(frozen=True)
class FileVectors:
    """The vectors a system's files hold, read from their bytes (not through its API), and the
    embedder that wrote them: what the audit's inversion check ranks candidates against."""

    vectors: Any
    """Float32 array, one row per vector read (deleted ones included; one dimension)."""
    embedder: Embedder
    """The system's own embedder (the candidates are embedded with it)."""
    sources: tuple[str, ...] = ()
    """Where they were read (files or parts of files, relative to the work dir)."""


@dataclass(frozen=True)
class AgentAnswer:
    """A system's own agent answering one probe (``agent_reply``): its reply, and the request
    its model last received, so a result row stores the prompt the model saw (the system's
    instructions and the memories it loaded), not the audit's prompt."""

    reply: Generation
    """The agent's final reply."""
    request: tuple[ChatMessage, ...]
    """The chat the agent's model received for that reply (its last model call)."""


C = TypeVar("C", bound=SystemConfig)


class MemorySystem(abc.ABC):
    """One agent memory system, opened in ``work_dir``. Subclass it and register it."""

    name: ClassVar[str] = ""
    """Registered name (set by ``@memory_system``)."""
    extra: ClassVar[str | None] = None
    """The traceless extra that installs its packages (``pip install 'traceless[EXTRA]'``)."""
    install_note: ClassVar[str] = ""
    """Said after the install command (e.g. that the extra needs a venv of its own)."""
    requires: ClassVar[tuple[str, ...]] = ()
    """Importable modules it needs; a missing one makes the system 'not installed'."""
    config_class: ClassVar[type[SystemConfig]] = SystemConfig
    """Its config model (fields documented; unknown keys refused)."""
    views: ClassVar[tuple[str, ...]] = ("agent",)
    """Memory views ``context`` accepts; ``agent`` is what the agent normally reads."""
    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.AGENT})
    """What it can do, declared (never probed): ``Capability.LIVE`` for ``attach``/scan/erase …"""
    read_only: bool = False
    """Attached read-only (``attach(read_only=True)``; an adapter sets it): erasure refused."""
    _planned: tuple[tuple[str, ...], frozenset[tuple[str, str]]] = ((), frozenset())
    """The last plan's literals and the records it removes (what the bystander digests skip)."""

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime) -> None:
        self.work_dir = work_dir
        self.config = config
        self.runtime = runtime

    # ------------------------------------------------------------------ writing
    @abc.abstractmethod
    def write(self, sessions: Sequence[Session]) -> None:
        """Write conversations into memory as the system normally does."""

    # ------------------------------------------------------------------ reading
    @abc.abstractmethod
    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        """The memory entries the agent of ``owner`` is shown for ``query`` (own retrieval)."""

    # ------------------------------------------------------------------ deleting
    @classmethod
    @abc.abstractmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        """Names of the system's native deletion operations, in ladder order."""

    @classmethod
    def audit_overrides(cls, config: SystemConfig) -> list[str]:
        """What the audit changes of the user's configuration to build its fresh instance in
        the work dir (``key: old -> new``); the CLI prints it. Default: nothing."""
        return []

    @classmethod
    def context_tokens(cls, config: SystemConfig) -> int:
        """Context window the system's own LLM prompts need from the model (0: the default
        suffices); ``llamacpp:`` models are started with at least this many tokens."""
        return 0

    @abc.abstractmethod
    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        """Apply one native deletion for ``target``; return what it did (JSON-able notes)."""

    def check_deletion(self, operation: str) -> None:
        """Refuse an ``operation`` that is not one of this instance's ``deletions`` (a
        ``ConfigError`` that names the known ones); ``delete`` calls it first."""
        known = self.deletions(self.config)
        if operation not in known:
            raise ConfigError(f"{self.name}: unknown deletion {operation!r}; known: {', '.join(known)}")

    # ------------------------------------------------------------------ scanning
    @abc.abstractmethod
    def stores(self) -> dict[str, Iterable[str]]:
        """Every store the system keeps, by name, each yielding its texts."""

    @classmethod
    def probe_views_of(cls, config: SystemConfig) -> tuple[str, ...]:
        """The views probed after a deletion, from the config alone (the audit declares its
        cells before it opens the system): default ``views``; a view empty by construction is
        left out."""
        return cls.views

    def probe_views(self) -> tuple[str, ...]:
        """The views probed after a deletion (``probe_views_of`` this instance's config)."""
        return type(self).probe_views_of(self.config)

    def files(self) -> list[Path]:
        """Files the system wrote (default: every file under ``work_dir``)."""
        return sorted(p for p in self.work_dir.rglob("*") if p.is_file())

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files and connections (the engine copies ``work_dir`` after this)."""

    def file_vectors(self) -> FileVectors | None:
        """Every vector the system's files hold, read from the bytes as anyone with the folder
        reads them (what a native deletion left included), with the embedder that wrote them;
        called by the audit after ``close``. None (default): the system keeps no vectors in
        files traceless can read, and the audit's inversion check is not run."""
        return None

    # ------------------------------------------------- live instances: scan and erase
    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *,
               read_only: bool) -> MemorySystem:
        """Open the user's **live** instance that ``config`` describes (no work dir, no copy).
        ``read_only=True`` must guarantee that not one byte of the instance changes (SQLite
        ``mode=ro`` URIs, no migrations, no collection creation); a store that cannot be
        opened read-only is refused, never opened read-write. Paths that do not exist are
        refused before anything is opened."""
        raise UnsupportedError(f"memory system {cls.name!r} cannot attach to a live instance "
                               "(its adapter implements no scan/erase)")

    def agent_reply(self, owner: str, query: str) -> AgentAnswer | None:
        """The system's own agent answering ``query`` for ``owner`` (``Capability.AGENT``: the
        user's graph, the SDK's Runner …); None: the audit's prompt over ``context`` is used."""
        return None

    def probe_instance(self, runtime: SystemRuntime) -> MemorySystem:
        """The attached instance as the audit's agent reads it, for ``forget --certify``
        (``Capability.CERTIFY``). Close it."""
        raise UnsupportedError(f"--certify is not available for {self.name!r} live instances; run the erasure "
                               "without --certify: its receipt is signed as before")

    def probe_ready(self, runtime: SystemRuntime) -> None:
        """The precondition of ``forget --certify``, run before the first write of the erasure:
        prove that every probe ``probe_instance`` will ask after it can run (its embedder built
        and called as configured, the user's graph built and fed the probes' input …), writing
        nothing; else raise a ``TracelessError`` (one line naming the fix). A system that declares
        ``Capability.CERTIFY`` must implement it: the default refuses the certificate."""
        raise UnsupportedError(f"--certify is not available for {self.name!r}: its adapter declares no check that "
                               "the certificate's probes can run before the erasure; run it without --certify")

    @classmethod
    def attach_config(cls, work_dir: Path, config: SystemConfig) -> SystemConfig | None:
        """The config ``attach`` takes for an instance built in ``work_dir`` with ``config``
        (``open_system`` + ``write``): how the conformance suite attaches to what it built.
        None: the suite erases the opened instance itself."""
        return None

    def instance(self) -> LiveInstance:
        """The instance as the erasure kernel reads and changes it (``traceless.systems.contract``):
        an adapter that implements it gets ``scan``, the plan, the bystander digests and the
        erasure from the kernel, the same for every system."""
        raise UnsupportedError(f"memory system {self.name!r} implements no scan or erasure")

    def scan(self, user: str | None, literals: Sequence[str], *, reveal: bool = False) -> ScanReport:
        """Every record of ``user`` and every record or file holding a literal (read-only)."""
        return kernel.scan(self.name, self.instance(), user, literals, reveal=reveal)

    def plan_erasure(self, user: str | None, literals: Sequence[str]) -> ErasurePlan:
        """What a complete erasure of ``user`` (and of records holding a literal) will change."""
        plan = kernel.plan(self.name, self.instance(), user, literals)
        self._planned = (tuple(literals), frozenset((a.store, a.record_id) for a in plan.actions
                                                    if a.action == "remove"))
        return plan

    def check_erasable(self) -> None:  # noqa: B027 - optional hook
        """Preconditions checked before the first write of an erasure (after the plan, before the
        journal): the instance not held by its application, the rights to delete … Raise a
        ``TracelessError`` that says what to do; nothing has been changed when it is raised."""

    def native_erasure(self, plan: ErasurePlan) -> None:  # noqa: B027 - optional hook
        """The system's own deletions for ``plan.user``, run before the kernel removes what they
        leave (Agno's ``clear_user_memories``, the SDK's ``clear_session`` …). Default: none."""

    def execute_erasure(self, plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        """Carry out ``plan`` (native deletions + the residue they leave + compaction);
        idempotent. The claim levels are set by the caller from the re-scan."""
        if self.read_only_instance():
            raise ConfigError(f"{self.name}: this instance was attached read-only; attach it with read_only=False "
                              "to erase")
        self.native_erasure(plan)
        return kernel.execute(self.instance(), plan, literals)

    def clear_serving_cache(self) -> list[StoreOutcome]:
        """The erasure's last step (issue 38.3): when traceless serves this system's model
        (``SystemRuntime.model.serving_cache()``, a llama.cpp server it started), the server's
        prompt cache is cleared, since it keeps the KV of every prompt it served (a forgotten
        record among them) whether or not requests asked to reuse it; one ``StoreOutcome`` for
        the tier ``serving cache``, ``clear`` only when a new server process answers. Empty
        when traceless serves no model (a remote provider's caches stay out of scope)."""
        model = getattr(getattr(self, "runtime", None), "model", None)
        cache = model.serving_cache() if isinstance(model, ModelBackend) else None
        old = None if cache is None else cache.pid
        if cache is None or old is None:  # no server process: nothing of traceless's serves the model
            return []
        seconds = cache.clear_prompt_cache()
        new = cache.pid
        done = new is not None and new != old
        note = (f"the llama.cpp server traceless serves the model from (cache_prompt "
                f"{'on' if cache.cache_prompt else 'off'}) was restarted on the same port in {seconds:.2f} s: the "
                "prompt KV of its slots and host-memory cache went with the old process"
                if done else "the model server's prompt cache could not be verified cleared (no new process)")
        return [StoreOutcome(store=SERVING_CACHE, claim="clear" if done else "logical",
                             ceiling="clear" if done else "logical", notes=[note])]

    def read_only_instance(self) -> bool:
        """Attached read-only (``attach(read_only=True)``): erasure refused. Default: ``read_only``."""
        return self.read_only

    def bystander_digests(self, user: str | None) -> dict[str, kernel.StoreDigest]:
        """Per store: (count, sha256) of every record that does not belong to ``user`` and that
        the last plan does not remove (a planned rewrite digests the same before and after)."""
        literals, removed = self._planned
        return kernel.bystander_digests(self.instance(), user, literals, removed)

    def resume_bystanders(self, before: Mapping[str, kernel.StoreDigest]) -> None:
        """A re-run after a crash, before its bystanders are digested: the digests the
        interrupted run journalled (an adapter whose digests carry the mark of the rows they
        cover counts those rows again). Nothing by default."""
        return None

    def instance_files(self) -> list[Path]:
        """Every file under the instance's configured paths (what the byte scan reads)."""
        return self.files()

    def out_of_scope(self) -> list[str]:
        """What an erasure on this system cannot reach (backups, the server's WAL, …)."""
        model = getattr(getattr(self, "runtime", None), "model", None)
        cache = model.serving_cache() if isinstance(model, ModelBackend) else None
        served = cache is not None and cache.pid is not None
        return ["backups and snapshots", "freed filesystem blocks",
                "the caches of model servers traceless did not start" if served else "the model server's caches",
                "anything outside the instance's configured paths"]

    def describe(self) -> dict[str, Any]:
        """Identity recorded in the results (name, config, package versions)."""
        return {"name": self.name, "config": self.config.model_dump(mode="json"), "packages": _versions(self)}


def _versions(system: MemorySystem) -> dict[str, str]:
    out: dict[str, str] = {}
    for mod in type(system).requires:
        dist = metadata.packages_distributions().get(mod.split(".")[0], [mod])[0]
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


DEFAULT_SYSTEMS = tuple(f"traceless.systems._{m}" for m in (
    "adk", "agno", "crewai", "langgraph", "llamaindex", "mem0", "native", "openai_agents", "strands"))
"""The modules of the built-in adapters: default plug-ins, imported in this order (the order of
``traceless memory systems``) on the registry's first use, through the same door as the entry
points; each imports only public ``traceless.systems`` names, as a third-party adapter does."""

MEMORY_SYSTEMS: Registry[type[MemorySystem]] = Registry(
    "memory system", hint="list them with `traceless memory systems`", entry_points=ENTRY_POINT_GROUP,
    defaults=DEFAULT_SYSTEMS,
)

S = TypeVar("S", bound=type[MemorySystem])


def memory_system(name: str, *, help: str = "") -> Callable[[S], S]:
    """Register a memory system class: ``@memory_system("mine", help="...")``."""

    def deco(cls: S) -> S:
        cls.name = name
        MEMORY_SYSTEMS.register(name, help=help)(cls)
        return cls

    return deco


def _adopt(name: str, obj: object) -> bool:
    """An entry point that names an unregistered ``MemorySystem`` subclass: register it."""
    if not (isinstance(obj, type) and issubclass(obj, MemorySystem)):
        return False
    memory_system(name)(obj)
    return True


MEMORY_SYSTEMS.adopt = _adopt


def load_entry_points(*, force: bool = False) -> list[str]:
    """Register the systems other packages declare under ``traceless.memory_systems``
    (``MEMORY_SYSTEMS.discover``, the door every pluggable kind shares; see
    ``traceless.registry``). Importing an entry point's module is what registers it (via
    ``@memory_system``); an entry point may also name a ``MemorySystem`` subclass that is not
    registered yet, which is then registered under the entry point's name. Returns the names
    added. The built-in adapters (``DEFAULT_SYSTEMS``) are loaded first, through the same door."""
    return MEMORY_SYSTEMS.discover(force=force)


def system_class(name: str) -> type[MemorySystem]:
    """The registered class for ``name`` (entry points included), or an error that says
    which systems are installed and how to install the others."""
    load_entry_points()
    if name not in MEMORY_SYSTEMS:
        rows = system_status()
        ready = sorted(r.name for r in rows if r.installed)
        absent = [f"{r.name} ({r.install})" for r in rows if not r.installed]
        hint = f"installed: {', '.join(ready) or '(none)'}" + (f"; not installed: {', '.join(absent)}" if absent else "")
        raise UnknownNameError("memory system", name, MEMORY_SYSTEMS.names(), hint)
    return MEMORY_SYSTEMS.get(name)


@dataclass(frozen=True)
class SystemStatus:
    """One row of ``traceless memory systems``."""

    name: str
    installed: bool
    missing: tuple[str, ...]
    install: str
    deletions: tuple[str, ...]
    help: str


def _missing(cls: type[MemorySystem]) -> tuple[str, ...]:
    return tuple(m for m in cls.requires if importlib.util.find_spec(m.split(".")[0]) is None
                 or importlib.util.find_spec(m) is None)


def _install_hint(cls: type[MemorySystem]) -> str:
    if not cls.extra:
        return "(a third-party package)"
    return f"pip install 'traceless[{cls.extra}]'" + (f" {cls.install_note}" if cls.install_note else "")


def system_status() -> list[SystemStatus]:
    """Every registered system, whether its packages are importable, and how to install them."""
    load_entry_points()
    out = []
    for e in MEMORY_SYSTEMS.entries():
        cls = e.obj
        miss = _missing(cls)
        try:
            ops = cls.deletions(cls.config_class())
        except ValidationError:
            ops = ()
        out.append(SystemStatus(e.name, not miss, miss, "" if not miss else _install_hint(cls), ops, e.help))
    return out


def load_system_config(name: str, source: str | os.PathLike[str] | dict[str, Any] | None) -> SystemConfig:
    """The validated config of system ``name`` from a JSON/TOML file, a dict or nothing."""
    return resolve_system(name, source).config


def resolve_system(name: str, source: str | os.PathLike[str] | dict[str, Any] | None = None, *,
                   defaults: dict[str, Any] | None = None) -> SystemSpec:
    """``--memory NAME`` resolved once, at the edge: the registered class (one lookup; an
    unknown name lists the installed ones) and its config from a JSON/TOML file, a dict or
    nothing (one validation), ``defaults`` filling the keys the source does not set."""
    cls = system_class(name)
    raw, where = _raw_config(source)
    for key, value in (defaults or {}).items():
        raw.setdefault(key, value)
    try:
        return SystemSpec(name, cls, cls.config_class.model_validate(raw))
    except ValidationError as e:
        bad = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err["loc"]) or "(root)"
            if err["type"] == "extra_forbidden":
                bad.append(f"unknown key {loc!r}")
            else:
                bad.append(f"{loc}: {err['msg']}")
        known = ", ".join(cls.config_class.model_fields) or "(none)"
        raise ConfigError(
            f"{where} for memory system {name!r}: {'; '.join(bad)}. Keys it accepts: {known}"
        ) from None


def _raw_config(source: str | os.PathLike[str] | dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    """A system config's settings, unvalidated (a copy), and how an error names where they came from."""
    if source is None:
        return {}, "the config"
    if isinstance(source, dict):
        return dict(source), "the config"
    p = Path(source)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read memory config {p} ({e.strerror}); give an existing JSON or TOML file") from None
    raw = _parse_config(p, decode_utf8(data, f"memory config {p}"))
    if not isinstance(raw, dict):
        raise InputFormatError(f"{p}: the memory config must be one object of settings")
    return raw, str(p)


def _parse_config(p: Path, text: str) -> Any:
    """A memory config's JSON or TOML text (by suffix), every unreadable form an InputFormatError."""
    fix = "give a JSON or TOML file of the system's settings (see docs/memory-systems.md)"
    if p.suffix != ".toml":
        return loads(text, f"memory config {p}", fix)
    try:
        raw = tomllib.loads(text)
    except RecursionError:
        raise InputFormatError(f"memory config {p}: TOML nested too deeply; {fix}") from None
    except ValueError as e:  # TOMLDecodeError, or an integer longer than int() converts
        raise InputFormatError(f"memory config {p}: not valid TOML ({str(e).splitlines()[0][:200]}); {fix}") from None
    check_value(raw, f"memory config {p}")
    return raw


def open_system(system: str | SystemSpec, work_dir: Path, config: SystemConfig | None,
                runtime: SystemRuntime) -> MemorySystem:
    """Open ``system`` (a name, looked up here, or a ``SystemSpec`` resolved at the edge, not
    looked up again) in ``work_dir`` (created if missing) with ``config`` (None: the spec's, or
    the system's defaults); a missing package is named."""
    if isinstance(system, SystemSpec):
        spec = system
    else:
        cls = system_class(system)
        spec = SystemSpec(system, cls, config if config is not None else cls.config_class())
    return (spec if config is None else spec.with_config(config)).open(work_dir, runtime)


@dataclass(frozen=True)
class SystemSpec:
    """A ``--memory NAME`` resolved once at the edge (``resolve_system``): the adapter class,
    its validated config and the extra that installs it. Passed down, so no layer below looks
    the name up or validates the config again."""

    name: str
    cls: type[MemorySystem]
    config: SystemConfig

    @property
    def install(self) -> str:
        """How to install the system's packages (``pip install 'traceless[EXTRA]'``)."""
        return _install_hint(self.cls)

    def with_config(self, config: SystemConfig) -> SystemSpec:
        """The same system with another config (already validated: an instance of its config class)."""
        if not isinstance(config, self.cls.config_class):
            raise ConfigError(f"memory system {self.name!r} takes a {self.cls.config_class.__name__}, "
                              f"not {type(config).__name__}")
        return SystemSpec(self.name, self.cls, config)

    def open(self, work_dir: Path, runtime: SystemRuntime) -> MemorySystem:
        """A fresh instance in ``work_dir`` (created if missing), as the audit opens one."""
        miss = _missing(self.cls)
        if miss:
            raise MissingPackageError(f"memory system {self.name!r} needs {', '.join(miss)}, which is not "
                                      f"installed; install it with `{self.install}`")
        work_dir.mkdir(parents=True, exist_ok=True)
        try:
            return self.cls(work_dir, self.config, runtime)
        except TracelessError:
            raise
        except ImportError as e:
            raise MissingPackageError(f"memory system {self.name!r} could not import {e.name or e}; install it "
                                      f"with `{self.install}`") from e

    def attach(self, *, read_only: bool) -> MemorySystem:
        """The user's live instance as the config describes it (``MemorySystem.attach``)."""
        try:
            return self.cls.attach(self.config, read_only=read_only)
        except ImportError as e:
            raise MissingPackageError(f"memory system {self.name!r} could not import {e.name or e}; install it "
                                      f"with `pip install 'traceless[{self.cls.extra or self.name}]'`") from e
