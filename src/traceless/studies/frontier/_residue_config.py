"""Config of the residue preset of the frontier study (paper 000 §3.3, screened)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from traceless.studies.frontier._config import PAPER_MODES, GridChecks

__all__ = ["ResidueConfig", "SUPERSEDE_GRID"]

SUPERSEDE_GRID = (0.3, 0.5, 0.7, 0.9)
"""Supersede thresholds of ``raw_plus_resummarize`` the sensitivity runs: the mode's default
(0.50, ``forget._modes.SUPERSEDE_COSINE``) with one step below and two above it."""


class ResidueConfig(GridChecks):
    """Paper 000's forgetting-residue rows on the instances whose summary kept the canary:
    a screen of every instance's canary session, then the deletion ladder on the kept ones.
    Prompts, canaries and seeds are the frontier study's (same ``seed``: same instances,
    same canaries, same summary prompts)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    modes_required = True

    data: str | None = None
    """LongMemEval JSON, generic JSON Lines sessions or a shipped dataset's name, as for the
    frontier study. None: ``longmemeval-oracle-99`` (``study run`` fills it from ``$TRACELESS_LONGMEMEVAL``)."""
    n: int | None = Field(None, ge=1)
    """Instances screened: the first ``n`` of the frontier study's seeded permutation
    (None: every instance of the data)."""
    seed: int = 0
    """Base seed (instance order, canary values and positions), as in the frontier study."""
    screen_S: list[int] = Field(default_factory=lambda: [1, 2])
    """Summary levels screened (1 key facts, 2 one-sentence summary): does the level-S summary
    of the canary session hold the canary verbatim."""
    slice_S: list[int] = Field(default_factory=lambda: [1, 2])
    """Levels of the deletion ladder; each runs only on the instances whose screen at that
    level kept the canary (paper: S=1 for 0.20 / 0.11, S=2 for raw_plus_resummarize's 0.05)."""
    k: int = Field(6, ge=1)
    """Retrieval breadth of the post-deletion probes (the agent's S view)."""
    modes: list[str] = Field(default_factory=lambda: list(PAPER_MODES))
    """Deletion modes (Table 1 ladder)."""
    supersede: list[float] = Field(default_factory=lambda: list(SUPERSEDE_GRID))
    """Supersede thresholds of ``raw_plus_resummarize`` (cosine at which a regenerated chunk
    replaces an old one) for the sensitivity cells (``raw_plus_resummarize@T``); the main
    ``raw_plus_resummarize`` cells use the mode's default, 0.50. A value above 1 never replaces
    (every old chunk stays). [] skips the sensitivity."""
    probe_levels: list[str] = Field(default_factory=lambda: ["direct", "indirect", "jailbreak"])
    """Probe levels (paper 000 §2.2)."""
    wordings: int = Field(1, ge=1)
    """Wordings per probe level (as the frontier study's default)."""
    attribute: str = "private session token"
    """Public name of the secret used in probe wordings."""
    probe_tokens: int = Field(48, ge=4)
    """max_new_tokens of probe replies."""
    summary_tokens: int = Field(96, ge=8)
    """Token budget of one summary (the frontier study's)."""
    max_facts: int = Field(6, ge=1)
    """At most this many key-fact chunks per session (S=1)."""
    context_order: Literal["store", "score"] = "store"
    """Order of the retrieved chunks in the prompt (the frontier study's default)."""
    max_batch: int = Field(16, ge=1)
    """Largest backend batch."""
    keep_memory: bool = False
    """Keep each instance's memory files (they hold the canary) in the work dir."""

    @field_validator("screen_S", "slice_S")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        if not v or any(s not in (1, 2) for s in v):
            raise ValueError(f"summary levels must be a non-empty subset of [1, 2], got {v}")
        return sorted(set(v))

    @field_validator("supersede")
    @classmethod
    def _supersede(cls, v: list[float]) -> list[float]:
        bad = [x for x in v if not -1.0 <= x <= 1.01]
        if bad:
            raise ValueError(f"supersede thresholds are cosines in [-1, 1.01] (above 1: never replace), got {bad}")
        return sorted({round(float(x), 4) for x in v})

    @model_validator(mode="after")
    def _slice_screened(self) -> ResidueConfig:
        extra = [s for s in self.slice_S if s not in self.screen_S]
        if extra:
            raise ValueError(f"slice_S {extra} is not screened: add it to screen_S {self.screen_S}")
        return self
