"""Data types of the execution-state runtime (paper 002): observations, artifacts, steps,
checkpoints, trajectories and forget requests. All pydantic, all serialisable."""

from __future__ import annotations

import hashlib
import itertools
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ARTIFACT_TIERS",
    "Observation",
    "RArtifact",
    "ToolCall",
    "StepRecord",
    "Checkpoint",
    "Trajectory",
    "ForgetRequest",
    "Cost",
    "step_seed",
    "digest_ids",
    "new_version",
]

ARTIFACT_TIERS: tuple[str, ...] = ("transcript", "summary", "memory", "plan", "kv")
"""Tiers of runtime state a forget receipt accounts for."""

ObsKind = Literal["user", "memory", "tool"]


class Observation(BaseModel):
    """One external input the runtime consumes at a step (paper 002: user input, memory
    injection or tool return). Post-target observations are held fixed on replay (A2)."""

    model_config = ConfigDict(frozen=True)

    obs_id: str
    """Stable id (unique within an episode)."""
    kind: ObsKind = "user"
    """user input, memory injection, or tool return."""
    text: str
    """What the agent sees."""
    session: int = 0
    """Session index; a session's last step also writes a compressed summary."""
    tool: str | None = None
    """For a tool return: the tool that produced it."""
    remember: bool = False
    """The scaffold's memory policy writes this observation to plaintext memory."""


_VERSIONS = itertools.count(1)
"""Process-wide source of artifact versions: every artifact the runtime produces gets a new one."""


def new_version() -> int:
    """A fresh artifact version, never reused within the process (unlike ``id()``)."""
    return next(_VERSIONS)


class RArtifact(BaseModel):
    """A piece of runtime state with its provenance (sources are observation or artifact ids)."""

    art_id: str
    """Unique id: ``obs:<id>``, ``reply:<step>``, ``summary:<step>``, ``mem:<step>``, ``plan:<call id>`` …"""
    tier: Literal["transcript", "summary", "memory", "plan", "kv", "system"]
    """Where it lives."""
    kind: str
    """observation, reply, summary, memory, plan, instruction, system, probe."""
    step: int
    """Step that produced it (0 = before the first observation)."""
    text: str
    """Content."""
    sources: list[str] = Field(default_factory=list)
    """Artifacts it was derived from (the provenance edges)."""
    kv_start: int | None = None
    """First KV position of its tokens, when it is in the context."""
    kv_end: int | None = None
    """One past its last KV position."""
    version: int = Field(default_factory=new_version)
    """Identity of this computation of the artifact: a clone keeps it, a recomputation gets a new
    one. Receipts decide whether a descendant survived by (id, version), never by ``id()`` of the
    Python object, which CPython reuses once an object is freed."""


class ToolCall(BaseModel):
    """A tool call parsed from a reply."""

    call_id: str
    """Deterministic id: digest of (episode, tool, arguments); replay deduplicates by it."""
    tool: str
    """Tool name."""
    args: str
    """Argument text as written by the model."""
    step: int
    """Step whose reply issued it."""
    consequential: bool
    """Has side effects outside the runtime (send, book, pay …)."""
    status: Literal["committed", "shadow", "deduplicated", "blocked", "pending"] = "pending"
    """committed (live side effect), shadow (executed on a snapshot during replay),
    deduplicated (same call id already committed; not repeated), blocked (sink policy)."""
    result: str = ""
    """What the tool returned (or the shadow result)."""


class StepRecord(BaseModel):
    """One transition: the observation consumed and what it produced."""

    step: int
    """1-based step index t."""
    obs_id: str
    """Observation consumed."""
    seed: int
    """Decoding seed of this step (derived from the episode seed and t)."""
    reply: str
    """The reply decoded at this step."""
    reply_token_ids: list[int] = Field(default_factory=list)
    """The decoded token ids (end of turn included): the matched-seed equivalence check."""
    summary: str | None = None
    """Compressed summary written at the end of a session, if any."""
    summary_token_ids: list[int] = Field(default_factory=list)
    """Decoded token ids of the summary."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Tool calls parsed from the reply."""
    kv_length: int = 0
    """Context length (tokens) after the step."""
    prefill_tokens: int = 0
    """Tokens prefilled by this step."""
    decode_tokens: int = 0
    """Tokens decoded by this step."""
    seconds: float = 0.0
    """Wall time of the step."""


class Checkpoint(BaseModel):
    """Sparse checkpoint metadata after a step: never a tensor copy. Restoring is a KV crop
    to ``kv_length`` plus truncation of the artifact lists."""

    step: int
    """Steps completed (0 = system prompt only)."""
    kv_length: int
    """KV cache length to crop to."""
    kv_digest: str
    """sha256 of the covered token ids (checked on restore)."""
    n_messages: int
    """Transcript messages alive at the checkpoint."""
    artifact_ids: list[str]
    """Artifacts alive at the checkpoint."""
    committed_calls: int
    """Committed tool calls at the checkpoint (environment log length)."""
    model: dict[str, Any]
    """backend.describe() of the model that computed the state."""
    code_version: str
    """traceless.code_version() of the runtime that computed it."""

    def nbytes(self) -> int:
        """Size of this metadata as JSON (the paper reports ≤4.4 KB)."""
        return len(self.model_dump_json().encode())


class Trajectory(BaseModel):
    """What a run recorded: enough to replay it (observations, seeds, replies) and to check
    that a replay is done by the same model and code."""

    episode_id: str
    """Episode identifier."""
    system: str
    """System prompt."""
    observations: list[Observation]
    """Observations in step order."""
    steps: list[StepRecord] = Field(default_factory=list)
    """One record per completed step."""
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    """Sparse checkpoints taken."""
    seed: int = 0
    """Episode seed."""
    model: dict[str, Any] = Field(default_factory=dict)
    """backend.describe() of the model."""
    code_version: str = ""
    """Code version that produced it."""
    generation: dict[str, Any] = Field(default_factory=dict)
    """GenerationConfig used for replies (JSON)."""


class ForgetRequest(BaseModel):
    """A revocation: the target span and how the world names it."""

    model_config = ConfigDict(frozen=True)

    span: str
    """Exact text of the target inside an observation (what redaction removes)."""
    secret: str
    """The string whose emission counts as a leak (a canary value, a brand)."""
    description: str
    """Public description used in forget instructions and probes ('my private session token')."""
    kind: Literal["canary", "preference"] = "canary"
    """Canary (a secret value) or a revoked preference."""
    strings: tuple[str, ...] = ()
    """Extra strings a string-list redactor is given (B6 'with the brand supplied')."""


class Cost(BaseModel):
    """Recomputation accounting of one operator."""

    prefill_tokens: int = 0
    """Tokens run through the model as prompt."""
    decode_tokens: int = 0
    """Tokens decoded."""
    transitions: int = 0
    """Agent transitions (steps) recomputed."""
    seconds: float = 0.0
    """Wall time."""

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_tokens

    def add(self, other: Cost) -> Cost:
        return Cost(
            prefill_tokens=self.prefill_tokens + other.prefill_tokens,
            decode_tokens=self.decode_tokens + other.decode_tokens,
            transitions=self.transitions + other.transitions,
            seconds=self.seconds + other.seconds,
        )


def step_seed(episode_seed: int, step: int) -> int:
    """Per-step decoding seed: the same step of the same episode always samples alike, so a
    replay from τ reproduces a full reset token for token (matched seeds)."""
    h = hashlib.sha256(f"{episode_seed}:{step}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def digest_ids(ids: list[int]) -> str:
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()
