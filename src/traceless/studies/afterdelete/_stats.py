"""Statistics of paper 001 §4: paired-profile bootstrap percentile intervals for Rec_w and
ΔRec (10,000 resamples, seed 20260816), observed endpoints for degenerate cases, and exact
Clopper–Pearson intervals for one world's marginal rate. No pooling across splits/models,
no p-values. Every function takes its seed explicitly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel
from scipy import stats as _st

__all__ = ["BOOTSTRAP_SEED", "RESAMPLES", "PairedGap", "Interval", "paired_gap", "clopper_pearson", "rate"]

BOOTSTRAP_SEED = 20260816
RESAMPLES = 10_000


class Interval(BaseModel):
    """A point estimate with a 95% interval."""

    estimate: float
    """Observed value."""
    low: float
    """Lower end (equal to the estimate for an observed endpoint)."""
    high: float
    """Upper end."""
    degenerate: bool = False
    """All paired differences identical: the observed value is reported, not an interval."""
    method: str = "paired-bootstrap-percentile"
    """How the interval was made."""


class PairedGap(BaseModel):
    """Rec_forget, Rec_clean and ΔRec over N paired profiles."""

    n: int
    """Paired profiles."""
    forget: int
    """Forget-world successes."""
    clean: int
    """Clean-world successes."""
    rec_forget: Interval
    """Rec_forget with its paired bootstrap interval."""
    rec_clean: Interval
    """Rec_clean with its paired bootstrap interval."""
    delta: Interval
    """ΔRec = Rec_forget − Rec_clean with its paired bootstrap interval."""


def _boot(values: np.ndarray, idx: np.ndarray) -> Interval:
    est = float(values.mean()) if len(values) else 0.0
    if len(values) == 0 or np.all(values == values[0]):
        return Interval(estimate=est, low=est, high=est, degenerate=True, method="observed-endpoint")
    means = values[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return Interval(estimate=est, low=float(lo), high=float(hi))


def paired_gap(
    forget: Sequence[bool | int], clean: Sequence[bool | int], *, seed: int = BOOTSTRAP_SEED,
    resamples: int = RESAMPLES,
) -> PairedGap:
    """Paired-profile bootstrap: resample profile indices with replacement ``resamples``
    times (one seeded Generator), recompute the means; 2.5/97.5 percentiles."""
    f = np.asarray(forget, dtype=np.float64)
    c = np.asarray(clean, dtype=np.float64)
    if f.shape != c.shape:
        raise ValueError(f"paired vectors differ in length: {f.shape} vs {c.shape}")
    n = len(f)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n)) if n else np.zeros((0, 0), dtype=np.int64)
    return PairedGap(n=n, forget=int(f.sum()), clean=int(c.sum()), rec_forget=_boot(f, idx),
                     rec_clean=_boot(c, idx), delta=_boot(f - c, idx))


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> Interval:
    """Exact binomial interval of one marginal rate (labelled as such in reports)."""
    if n <= 0:
        return Interval(estimate=0.0, low=0.0, high=1.0, method="clopper-pearson")
    lo = 0.0 if k == 0 else float(_st.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(_st.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return Interval(estimate=k / n, low=lo, high=hi, method="clopper-pearson")


def rate(xs: Sequence[bool | int]) -> float:
    return float(np.mean(np.asarray(xs, dtype=np.float64))) if len(xs) else 0.0
