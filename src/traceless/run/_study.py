"""What a study declares: its grid of ``Cell`` s, what ``run_group`` yields per cell
(``CellResult``), the ``Study`` base class and its registry, and the ``RunContext`` a
group runs in. The runner (``_runner``) does the rest."""

from __future__ import annotations

import abc
import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from traceless.errors import StudyError
from traceless.models import ChatMessage, Embedder, Generation, GenerationConfig, ModelBackend
from traceless.registry import ENTRY_POINT_GROUPS, Registry

if TYPE_CHECKING:
    from traceless.models import EngineOptions
    from traceless.run._results import Manifest

__all__ = [
    "DEFAULT_STUDIES",
    "STUDIES",
    "Cell",
    "CellResult",
    "RunContext",
    "RunSummary",
    "Study",
    "derive_seed",
    "get_study",
    "registered_studies",
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
    threads: ClassVar[str] = "cell"
    """Name prefix of the runner's worker threads for this study's groups."""
    resume_may_change: ClassVar[frozenset[str]] = frozenset()
    """Config fields that may differ on resume (e.g. ``n``: grow the instance set). Any
    other difference is refused, because stored cells would not match the new config."""
    bundle_extra: ClassVar[tuple[str, ...]] = ()
    """Dotted paths of a row's ``extra`` that an export bundle keeps (ids, labels and flags the
    report reads); every other key of ``extra`` (canaries, expected answers, replies) is dropped."""

    def validate(self, config: C) -> None:  # noqa: B027 - optional hook
        """Check every input named by ``config`` (data files, checkpoints) before any work:
        called by ``run_study`` before the results dir, the model or the embedder is touched,
        so a bad path fails in a second, not after minutes of setup. Raise a
        ``TracelessError`` whose message says the fix."""

    def check_dir(self, out: Path, stored: Manifest | None, config: C) -> None:  # noqa: B027 - optional hook
        """Refuse an existing out dir with the study's own message (``stored``: its manifest,
        None for a dir without one) before the runner's generic checks; default: nothing."""

    def setup(self, ctx: RunContext[C]) -> None:  # noqa: B027 - optional hook
        """Run once before any group (load data, check inputs)."""

    @abc.abstractmethod
    def cells(self, config: C) -> Iterable[Cell]:
        """The full grid, in execution order."""

    @abc.abstractmethod
    def run_group(self, ctx: RunContext[C], cells: list[Cell]) -> Iterable[CellResult | list[CellResult]]:
        """Run the unfinished ``cells`` of one group; yield (or return) one result per cell.

        Results are written the moment they are yielded, so a generator loses nothing when
        the run is killed between two cells; a yielded list is committed in one transaction
        (cells that must appear together)."""


DEFAULT_STUDIES = ("traceless.studies.afterdelete", "traceless.studies.frontier", "traceless.studies.replay")
"""The packages of the built-in studies: default plug-ins of this kernel, loaded by name through
the registry's door on first use (the kernel does not import the studies)."""

STUDIES: Registry[type[Study[Any]]] = Registry("study", hint="list them with `traceless study list`",
                                               entry_points=ENTRY_POINT_GROUPS["study"], defaults=DEFAULT_STUDIES)


def registered_studies() -> Registry[type[Study[Any]]]:
    """``STUDIES`` with the built-in studies and the plug-ins registered."""
    STUDIES.discover()
    return STUDIES


def get_study(name: str) -> Study[Any]:
    """An instance of the registered study ``name``."""
    return registered_studies().get(name)()


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
    engine: EngineOptions | None = None
    """The engine options built at the edge (CLI options, API arguments), for the models a
    study loads itself (a judge, a selector): their credentials and engine settings."""

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
