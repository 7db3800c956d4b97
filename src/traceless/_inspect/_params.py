"""Task parameters (``inspect eval ... -T NAME=VALUE``): validated, and refused with the
valid names/values in inspect's own error style (``PrerequisiteError``: printed without a
traceback by the ``inspect`` CLI). inspect only warns about an unknown ``-T`` name; a typo
in an audit setting would silently audit something else, so these tasks refuse it."""

from __future__ import annotations

from typing import Any, TypeVar

from inspect_ai._util.error import PrerequisiteError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from traceless.errors import ConfigError

__all__ = ["AfterDeleteParams", "CanaryAuditParams", "TaskParamError", "parse_params"]


class TaskParamError(ConfigError, PrerequisiteError):
    """A ``-T`` parameter is unknown or malformed (a traceless ConfigError that the
    ``inspect`` CLI prints as a prerequisite error)."""

    def __init__(self, message: str) -> None:
        ConfigError.__init__(self, message)
        self.message = message


class CanaryAuditParams(BaseModel):
    """``-T`` parameters of ``traceless/canary_audit``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory: str = "traceless"
    """Memory system audited (``traceless memory systems``): traceless, mem0, langgraph, ..."""
    data: str | None = None
    """A sessions JSONL file (the generic format) to plant canaries in; default synthetic users."""
    profiles: int | None = Field(None, ge=1)
    """Users audited, one canary each, one sample each (default 3 synthetic / every user of data)."""
    S: int | None = Field(None, ge=0, le=2)
    """Summarization level of the traceless store (0 raw, 1 key facts, 2 summaries; default 0,
    where the default model's before-row shows extraction)."""
    k: int | None = Field(None, ge=1)
    """Retrieval breadth of the traceless store (default 3)."""
    mode: str | None = None
    """The deletion applied between the two probe rounds (a forget mode for ``traceless``;
    default full_purge, or the system's first deletion)."""
    seed: int = 0
    """Seed of users, canaries and placement (same seed: the canaries ``traceless audit`` plants)."""
    wordings: int = Field(1, ge=1)
    """Probe wordings per level."""
    max_new_tokens: int = Field(40, ge=4)
    """Reply budget per probe."""
    embedder: str = "all-MiniLM-L6-v2"
    """Retrieval embedder (``all-MiniLM-L6-v2`` or ``hashing``)."""
    memory_config: str | None = None
    """The memory system's settings file (JSON/TOML), as ``traceless audit --memory-config``."""


class AfterDeleteParams(BaseModel):
    """``-T`` parameters of ``traceless/afterdelete`` (the primary block)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    split: str = "iid"
    """Profile split: iid, ood (or dev)."""
    n: int = Field(4, ge=1)
    """Profiles (samples); the first n of the split, the same the study runs (paper: 200)."""
    contract: str = "aligned"
    """Audit response contract (legacy, aligned)."""
    budget: int = Field(10, ge=1, le=10)
    """Query budget of the DIRECT auditor (it submits after its one query)."""
    max_new_tokens: int = Field(96, ge=8)
    """Decoding cap (paper: greedy, 96 new tokens)."""


P = TypeVar("P", bound=BaseModel)


def parse_params(task: str, cls: type[P], given: dict[str, Any]) -> P:
    """``given`` validated as ``cls``, or a TaskParamError naming the valid parameters."""
    try:
        return cls.model_validate(given)
    except ValidationError as e:
        valid = ", ".join(f"{n} (default {f.default!r})" for n, f in cls.model_fields.items())
        bad = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err["loc"])
            if err["type"] == "extra_forbidden":
                bad.append(f"unknown parameter {loc!r}")
            else:
                bad.append(f"-T {loc}={err.get('input')!r}: {err['msg']}")
        raise TaskParamError(f"{task}: {'; '.join(bad)}. Valid -T parameters: {valid}") from None
