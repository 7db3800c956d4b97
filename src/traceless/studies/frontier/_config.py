"""Config of the frontier study (paper 000)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["FrontierConfig", "GridChecks", "PAPER_MODES", "PAPER_K", "PAPER_S", "checked_probe_levels"]

PAPER_MODES = ("noop", "raw_only", "raw_plus_resummarize", "full_purge", "tombstone")
PAPER_K = (1, 3, 6, 10, 25)
PAPER_S = (0, 1, 2)


def checked_probe_levels(v: list[str]) -> list[str]:
    """``v`` without repeats, or a ValueError unless it is a non-empty subset of the probe levels."""
    from traceless.audit import PROBE_LEVELS

    bad = [x for x in v if x not in PROBE_LEVELS]
    if bad or not v:
        raise ValueError(f"probe levels must be a non-empty subset of {list(PROBE_LEVELS)}, got {v}")
    return list(dict.fromkeys(v))


class GridChecks(BaseModel):
    """The checks the frontier study's configs share: their deletion ``modes`` (known forget
    modes, repeats dropped) and ``probe_levels`` (``checked_probe_levels``)."""

    modes_required: ClassVar[bool] = False
    """Whether an empty ``modes`` is refused."""

    @field_validator("modes", check_fields=False)
    @classmethod
    def _grid_modes(cls, v: list[str]) -> list[str]:
        from traceless.forget import FORGET_MODES

        bad = [m for m in v if m not in FORGET_MODES]
        if bad or (cls.modes_required and not v):
            raise ValueError(f"unknown deletion mode(s) {bad}; known: {', '.join(FORGET_MODES.names())}" if bad else
                             f"modes must name at least one deletion mode; known: {', '.join(FORGET_MODES.names())}")
        return list(dict.fromkeys(v))

    @field_validator("probe_levels", check_fields=False)
    @classmethod
    def _grid_levels(cls, v: list[str]) -> list[str]:
        return checked_probe_levels(v)


class FrontierConfig(GridChecks):
    """The privacy–utility frontier and forgetting-residue grid of paper 000."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    data: str | None = None
    """LongMemEval JSON (upstream format), generic JSON Lines sessions, or a shipped dataset's
    name (``traceless data list``). None: the shipped ``longmemeval-oracle-99`` (``traceless
    study run`` fills it from ``--longmemeval`` / ``$TRACELESS_LONGMEMEVAL`` when set)."""
    n: int = Field(50, ge=1)
    """Instances audited: the first ``n`` of a seeded permutation of the file (so growing
    ``n`` on resume keeps every instance already run)."""
    seed: int = 0
    """Base seed: instance sample, canary values and positions, bootstrap."""
    S: list[int] = Field(default_factory=lambda: list(PAPER_S))
    """Summarization levels: 0 raw user turns, 1 key facts, 2 one-sentence session summary."""
    k: list[int] = Field(default_factory=lambda: list(PAPER_K))
    """Retrieval breadths of the frontier sweep."""
    modes: list[str] = Field(default_factory=lambda: list(PAPER_MODES))
    """Deletion modes (Table 1 ladder) for the forgetting-residue cells; [] skips FRS."""
    frs_agent_k: list[int] | None = None
    """Retrieval breadths of the primary FRS (paper 000 eq. 3: post-deletion AER with the
    agent's S view, averaged over k). None: the frontier grid ``k``, as the paper does."""
    frs_k: list[int] = Field(default_factory=lambda: [6])
    """Retrieval breadth(s) of the secondary, tier-restricted FRS views (the context built
    from one tier at a time)."""
    probe_levels: list[str] = Field(default_factory=lambda: ["direct", "indirect", "jailbreak"])
    """Probe levels (paper 000 §2.2)."""
    wordings: int = Field(1, ge=1)
    """Wordings per probe level (from traceless/data/probes.json; 3 available). One wording
    per level, like the paper's three probes, keeps N=50 within the 2-hour budget on 2 CPU
    cores; with more, an instance's AER at a level is the mean over its wordings."""
    attribute: str = "private session token"
    """Public name of the secret used in probe wordings."""
    probe_tokens: int = Field(48, ge=4)
    """max_new_tokens of probe replies: a canary is 8–10 tokens, so 48 leaves room for a
    preamble while keeping decode cost small."""
    answer_tokens: int = Field(48, ge=4)
    """max_new_tokens of answers to the PR question."""
    summary_tokens: int = Field(96, ge=8)
    """Token budget of one S=1/S=2 summary."""
    max_facts: int = Field(6, ge=1)
    """At most this many key-fact chunks per session (S=1)."""
    context_order: Literal["store", "score"] = "store"
    """How the k retrieved chunks are rendered: ``store`` (chronological memory order;
    ranking decides membership only, so probes retrieving the same set share one prompt
    prefix) or ``score`` (by similarity)."""
    pr_threshold: float = Field(0.50, gt=0.0, lt=1.0)
    """Cosine threshold of the PR rule (paper: 0.50)."""
    judge: str | None = None
    """Optional LLM-as-judge for PR: a backend spec, or ``self`` for the studied model."""
    max_batch: int = Field(16, ge=1)
    """Largest backend batch."""
    bootstrap: int = Field(1000, ge=10)
    """Bootstrap resamples for the report's confidence intervals."""
    keep_memory: bool = False
    """Keep each instance's memory files (they hold the canary) in the work dir."""

    @field_validator("S")
    @classmethod
    def _s(cls, v: list[int]) -> list[int]:
        bad = [s for s in v if s not in PAPER_S]
        if bad or not v:
            raise ValueError(f"S must be a non-empty subset of {list(PAPER_S)}, got {v}")
        return sorted(set(v))

    @field_validator("frs_agent_k")
    @classmethod
    def _agent_k(cls, v: list[int] | None) -> list[int] | None:
        return None if v is None else cls._k(v)

    @field_validator("k", "frs_k")
    @classmethod
    def _k(cls, v: list[int]) -> list[int]:
        if not v or any(x < 1 for x in v):
            raise ValueError(f"k values must be ≥ 1 and non-empty, got {v}")
        return sorted(set(v))
