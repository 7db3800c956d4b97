"""The one verdict rule of every paper report (000 frontier, 001 afterdelete, 002 replay).

A paper claim "the statistic lies in region R" (bounds like pydantic's: ``gt=0`` positive,
``le=0.05`` at most 0.05) is judged from a 95% interval of the statistic:

* **Intervals.** A proportion k/n: exact Clopper–Pearson (``proportion_ci``). A paired
  difference of two binary outcomes on the same units: Newcombe's hybrid score interval
  (method 10, continuity-corrected phi; ``paired_ci``), which never has zero width. Anything else: the percentile
  bootstrap over units (``traceless.metrics.bootstrap_ci``), whose zero-width intervals are
  widened when the point sits at a bound (``_widen``: n units all at 0 can only show what a
  Clopper–Pearson 0/n shows).
* **REPRODUCED / CONTRADICTED** — the interval lies inside R / outside R, and the claim
  has at least ``MIN_UNITS`` units. Below that the verdict is **INCONCLUSIVE** whatever the
  interval says.
* **INCONCLUSIVE** — too few units, or the interval admits both; ``n_needed`` is a power
  calculation: the n at which, if the true value were the observed one, the same rule
  would decide the claim with probability ``POWER`` (exact binomial power for proportions,
  a normal approximation otherwise; ``None`` when the estimate sits on R's boundary).
* **NOT TESTABLE** — no data, or a ceiling/floor (``pinned``) or missing precondition
  makes the claim's direction unobservable; the reason names it.
* **BY CONSTRUCTION** — the check holds because of how the mode or engine is built
  (``construction_verdict``): a regression guarantee, shown in its own section and never
  counted as a reproduction; a violation is CONTRADICTED (a bug).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from enum import StrEnum

import numpy as np
from pydantic import BaseModel
from scipy import stats as _st

__all__ = [
    "MIN_UNITS",
    "POWER",
    "LEVEL",
    "N_CAP",
    "CI",
    "Verdict",
    "ClaimVerdict",
    "proportion_ci",
    "paired_ci",
    "mean_ci",
    "ratio_ci",
    "claim_verdict",
    "decides",
    "count_verdict",
    "construction_verdict",
    "pinned",
    "n_needed",
    "combine_verdicts",
    "either_verdict",
]

MIN_UNITS = 6
"""Fewest units on which any claim is decided. Below 6, even a unanimous sample cannot
exclude a rate of one half under the exact interval (Clopper–Pearson 5/5 has lower bound
0.025^(1/5) = 0.48) and no sign or signed-rank test reaches p < 0.05 (2/2^5 = 0.0625), so
a REPRODUCED or CONTRADICTED there would rest on the interval method, not on the data."""
POWER = 0.8
"""``n_needed`` is the n at which the rule decides the claim with this probability when the
true value equals the observed estimate (the conventional 80% power)."""
LEVEL = 0.95
"""Confidence level of every interval the rule judges."""
N_CAP = 1_000_000
"""``n_needed`` beyond this is reported as None (no practical n decides the claim)."""
SIM_MAX = 256
"""``n_needed`` of a ratio is simulated up to this n; beyond it the delta-method normal
approximation (accurate there) is used."""
SIM_DRAWS = 600
"""Simulated samples per candidate n of a ratio's ``n_needed``."""
SIM_BOOT = 400
"""Bootstrap resamples within each simulated sample."""
SIM_CHUNK = 50
"""Simulated samples resampled at once (bounds the memory at ``SIM_MAX``)."""
EXACT_MAX = 2_000
"""Exact binomial power is searched up to about this n; beyond it the normal approximation
(accurate there) is used."""


class CI(BaseModel):
    """A point estimate with a confidence interval, and what the power calculation needs."""

    value: float
    """The statistic on the full sample."""
    low: float
    """Lower bound."""
    high: float
    """Upper bound."""
    n: int
    """Number of units (instances, profiles, episodes) behind the interval."""
    method: str = "bootstrap"
    """``bootstrap`` (percentile over units), ``bootstrap-ratio`` (percentile, of Σ numerator /
    Σ denominator), ``clopper-pearson`` or ``newcombe``."""
    successes: int | None = None
    """``clopper-pearson``: k of k/n."""
    discordant: tuple[int, int] | None = None
    """``newcombe``: units where only the first outcome holds, and only the second."""
    units: list[tuple[float, float]] | None = None
    """``bootstrap-ratio``: (numerator, denominator) per unit, so ``n_needed`` can simulate the rule."""

    def fmt(self, digits: int = 2) -> str:
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def _z(level: float = LEVEL) -> float:
    return float(_st.norm.ppf(0.5 + level / 2))


def _cp_bounds(k: np.ndarray, n: int, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    a = (1 - level) / 2
    with np.errstate(invalid="ignore"):
        lo = np.where(k == 0, 0.0, _st.beta.ppf(a, np.maximum(k, 1), n - k + 1))
        hi = np.where(k == n, 1.0, _st.beta.ppf(1 - a, k + 1, np.maximum(n - k, 1)))
    return lo, hi


def proportion_ci(k: int, n: int, level: float = LEVEL) -> CI:
    """Exact Clopper–Pearson interval of k successes in n units (NaN for n = 0)."""
    if n <= 0:
        return CI(value=float("nan"), low=float("nan"), high=float("nan"), n=0, method="clopper-pearson")
    lo, hi = _cp_bounds(np.array([k]), n, level)
    return CI(value=k / n, low=float(lo[0]), high=float(hi[0]), n=n, method="clopper-pearson", successes=k)


def _wilson(k: float, n: int, z: float) -> tuple[float, float]:
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    arm = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - arm), min(1.0, mid + arm)


def _newcombe(a: int, b: int, c: int, d: int, level: float = LEVEL) -> tuple[float, float, float]:
    """Newcombe (1998) method 10 for p1 − p2 of paired binary outcomes (a: both, b: first
    only, c: second only, d: neither)."""
    n, z = a + b + c + d, _z(level)
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = _wilson(a + b, n, z)
    l2, u2 = _wilson(a + c, n, z)
    den = (a + b) * (c + d) * (a + c) * (b + d)
    # phi with Newcombe's continuity correction when ad > bc: without it a table with every
    # unit concordant but both kinds present (phi = 1) gives a zero-width interval
    cross = float(a * d - b * c)
    cross = max(cross - n / 2, 0.0) if cross > 0 else cross
    phi = cross / math.sqrt(den) if den > 0 else 0.0
    dl = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    du = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    est = p1 - p2
    return est, max(-1.0, est - dl), min(1.0, est + du)


def paired_ci(first: Sequence[bool | int], second: Sequence[bool | int], level: float = LEVEL) -> CI:
    """mean(first) − mean(second) over paired binary units, with Newcombe's interval."""
    if len(first) != len(second):
        raise ValueError(f"paired outcomes differ in length: {len(first)} vs {len(second)}")
    x, y = np.asarray(first, dtype=bool), np.asarray(second, dtype=bool)
    n = len(x)
    if n == 0:
        return CI(value=float("nan"), low=float("nan"), high=float("nan"), n=0, method="newcombe")
    a, b, c = int(np.sum(x & y)), int(np.sum(x & ~y)), int(np.sum(~x & y))
    est, lo, hi = _newcombe(a, b, c, n - a - b - c, level)
    return CI(value=est, low=lo, high=hi, n=n, method="newcombe", discordant=(b, c))


def mean_ci(xs: Sequence[float], rng: np.random.Generator, n_resamples: int = 1000) -> CI:
    """The mean of per-unit values with the interval the rule judges: a per-unit binary (every
    value 0 or 1) is a proportion, so exact Clopper–Pearson (a percentile bootstrap of 7/8 would
    exclude one half, which the exact interval [0.47, 1.00] does not); anything else the
    percentile bootstrap over units."""
    arr = np.asarray(xs, dtype=np.float64)
    if arr.size and bool(np.all((arr == 0) | (arr == 1))):
        return proportion_ci(int(arr.sum()), int(arr.size))
    if arr.size == 0:
        return CI(value=float("nan"), low=float("nan"), high=float("nan"), n=0)
    stats = arr[rng.integers(0, arr.size, size=(n_resamples, arr.size))].mean(axis=1)  # as bootstrap_ci
    lo, hi = np.nanquantile(stats, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return CI(value=float(arr.mean()), low=float(lo), high=float(hi), n=int(arr.size))


def ratio_ci(num: Sequence[float], den: Sequence[float], rng: np.random.Generator, n_resamples: int = 1000) -> CI:
    """Σ num / Σ den over units with the percentile bootstrap over units; keeps the units so
    ``n_needed`` simulates the rule on them instead of a normal approximation."""
    pairs = np.column_stack([np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)])
    n = len(pairs)
    if n == 0:
        return CI(value=float("nan"), low=float("nan"), high=float("nan"), n=0, method="bootstrap-ratio")
    idx = rng.integers(0, n, size=(n_resamples, n))
    stats = pairs[idx, 0].sum(axis=1) / pairs[idx, 1].sum(axis=1)
    lo, hi = np.nanquantile(stats, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return CI(value=float(pairs[:, 0].sum() / pairs[:, 1].sum()), low=float(lo), high=float(hi), n=n,
              method="bootstrap-ratio", units=[(float(a), float(b)) for a, b in pairs])


class Verdict(StrEnum):
    """The outcomes of checking one paper claim."""

    REPRODUCED = "REPRODUCED"
    CONTRADICTED = "CONTRADICTED"
    INCONCLUSIVE = "INCONCLUSIVE"
    NOT_TESTABLE = "NOT TESTABLE"
    BY_CONSTRUCTION = "BY CONSTRUCTION"
    SET_BY_DESIGN = "SET BY DESIGN"


class ClaimVerdict(BaseModel):
    """A verdict with what decides it."""

    verdict: Verdict
    """One of the five labels."""
    n: int = 0
    """Units behind the verdict."""
    n_needed: int | None = None
    """INCONCLUSIVE only: the n at which the rule decides the claim with probability
    ``POWER`` if the true value is the observed one; None when no n does (the estimate sits on
    the claim's boundary)."""
    min_n: int = MIN_UNITS
    """The claim's minimum number of units."""
    reason: str = ""
    """Why NOT TESTABLE / BY CONSTRUCTION / SET BY DESIGN, or what keeps an INCONCLUSIVE open."""
    model: str = ""
    """The model the verdict holds for, when it is about this model's behaviour and not the
    paper's general claim (e.g. a level the summarizer never reaches): printed after the label."""
    ci: CI | None = None
    """The interval that decided (after ``_widen``): the one a report must print next to the verdict."""

    def fmt(self) -> str:
        """``VERDICT`` plus, for INCONCLUSIVE, the n that would decide it."""
        if self.model and self.verdict in (Verdict.REPRODUCED, Verdict.CONTRADICTED):
            return f"{self.verdict.value} for {self.model}"
        if self.verdict is Verdict.INCONCLUSIVE:
            few = f" < {self.min_n} minimum" if self.n < self.min_n else ""
            need = (f"n ≈ {self.n_needed} decides it with {POWER:.0%} power at the observed effect"
                    if self.n_needed else "no n decides it at this estimate")
            why = f"; {self.reason}" if self.n == 0 and self.reason else ""  # which part had no unit
            return f"{self.verdict.value} (n={self.n}{few}; {need}{why})"
        if self.verdict in (Verdict.NOT_TESTABLE, Verdict.BY_CONSTRUCTION, Verdict.SET_BY_DESIGN) and self.reason:
            return f"{self.verdict.value} ({self.reason})"
        return self.verdict.value


Bounds = tuple[float | None, float | None, float | None, float | None]


def _inside(x: float, r: Bounds) -> bool:
    gt, ge, lt, le = r
    return ((gt is None or x > gt) and (ge is None or x >= ge) and (lt is None or x < lt)
            and (le is None or x <= le))


def decides(ci: CI, *, gt: float | None = None, ge: float | None = None, lt: float | None = None,
            le: float | None = None) -> Verdict | None:
    """The interval half of the rule, ignoring the minimum n: REPRODUCED when ``ci`` (widened
    if degenerate) lies in R, CONTRADICTED when it lies outside, None when it admits both."""
    return _decides(*_widen(ci), (gt, ge, lt, le))


def _decides(lo: float, hi: float, r: Bounds) -> Verdict | None:
    """REPRODUCED when [lo, hi] ⊂ R, CONTRADICTED when [lo, hi] ∩ R = ∅, else None."""
    if _inside(lo, r) and _inside(hi, r):
        return Verdict.REPRODUCED
    gt, ge, lt, le = r
    lower = max((b for b in (gt, ge) if b is not None), default=None)
    upper = min((b for b in (lt, le) if b is not None), default=None)
    if (upper is not None and not _inside(lo, r) and lo >= upper) or (
            lower is not None and not _inside(hi, r) and hi <= lower):
        return Verdict.CONTRADICTED
    return None


def _unanimous_arm(n: int, level: float = LEVEL) -> float:
    """How far from a bound the exact interval of n units all at that bound reaches."""
    return float(1.0 - ((1 - level) / 2) ** (1.0 / n))


def _widen(ci: CI) -> tuple[float, float]:
    """A zero-width bootstrap interval at 0 or ±1 (every unit at the bound) widened to what a
    unanimous sample of n can show (Clopper–Pearson 0/n); any other interval unchanged."""
    lo, hi = min(ci.low, ci.high), max(ci.low, ci.high)
    if ci.method != "bootstrap" or hi > lo:
        return lo, hi
    arm = _unanimous_arm(ci.n)
    if ci.value == 0:
        return -arm, arm
    if abs(ci.value) == 1:
        return (1 - arm, 1.0) if ci.value > 0 else (-1.0, -1 + arm)
    return lo, hi


def claim_verdict(
    ci: CI | None, *, gt: float | None = None, ge: float | None = None, lt: float | None = None,
    le: float | None = None, testable: bool = True, why_not: str = "precondition not met",
    min_n: int = MIN_UNITS,
) -> ClaimVerdict:
    """Judge the claim "statistic ∈ R" from ``ci`` by the module's rule (see its docstring).
    ``testable=False`` (a ceiling/floor or failed precondition, ``why_not`` names it) gives NOT
    TESTABLE; so does a missing, empty or NaN interval."""
    r: Bounds = (gt, ge, lt, le)
    if not testable:
        return ClaimVerdict(verdict=Verdict.NOT_TESTABLE, n=ci.n if ci else 0, reason=why_not, min_n=min_n)
    if ci is None or ci.n == 0 or any(math.isnan(v) for v in (ci.value, ci.low, ci.high)):
        return ClaimVerdict(verdict=Verdict.NOT_TESTABLE, n=ci.n if ci else 0, reason="no data", min_n=min_n)
    lo, hi = _widen(ci)
    used = ci.model_copy(update={"low": lo, "high": hi})
    got = _decides(lo, hi, r)
    if got is not None and ci.n >= min_n:
        return ClaimVerdict(verdict=got, n=ci.n, min_n=min_n, ci=used)
    why = (f"the interval [{lo:.2f}, {hi:.2f}] admits both" if got is None else
           f"{ci.n} units are fewer than the minimum of {min_n}")
    need = n_needed(ci, gt=gt, ge=ge, lt=lt, le=le)
    return ClaimVerdict(verdict=Verdict.INCONCLUSIVE, n=ci.n, min_n=min_n, reason=why, ci=used,
                        n_needed=None if need is None else max(need, min_n))


def count_verdict(violations: int, n: int, *, min_n: int = MIN_UNITS) -> ClaimVerdict:
    """A claim "no unit shows the event" (the paper's zero-observed and every-cell claims):
    CONTRADICTED by one violation; REPRODUCED with none on at least ``min_n`` units;
    INCONCLUSIVE (n needed = ``min_n``) with none on fewer; NOT TESTABLE without units."""
    if n == 0:
        return ClaimVerdict(verdict=Verdict.NOT_TESTABLE, reason="no units", min_n=min_n)
    if violations:
        return ClaimVerdict(verdict=Verdict.CONTRADICTED, n=n, min_n=min_n)
    if n < min_n:
        return ClaimVerdict(verdict=Verdict.INCONCLUSIVE, n=n, n_needed=min_n, min_n=min_n,
                            reason=f"{n} units are fewer than the minimum of {min_n}")
    return ClaimVerdict(verdict=Verdict.REPRODUCED, n=n, min_n=min_n)


def construction_verdict(violations: int, n: int, why: str) -> ClaimVerdict:
    """A check that holds by how the mode/engine is built (``why`` says how): BY CONSTRUCTION
    when no unit violates it (a regression guarantee at any n), CONTRADICTED by one violation
    (a bug), NOT TESTABLE without units."""
    if n == 0:
        return ClaimVerdict(verdict=Verdict.NOT_TESTABLE, reason="no units")
    if violations:
        return ClaimVerdict(verdict=Verdict.CONTRADICTED, n=n,
                            reason=f"guarantee violated in {violations} of {n} units: {why}")
    return ClaimVerdict(verdict=Verdict.BY_CONSTRUCTION, n=n, reason=why)


def pinned(name: str, start: float | None, direction: str, *, low: float = 0.0, high: float = 1.0) -> str | None:
    """The ceiling/floor that makes a claim's direction unobservable, or None: a ``rise`` from
    ``start`` at ``high`` (ceiling) or a ``drop`` from ``start`` at ``low`` (floor)."""
    if start is None or math.isnan(start):
        return None
    if direction == "rise" and start >= high:
        return f"{name} = {start:.2f} (ceiling): a rise cannot be observed"
    if direction == "drop" and start <= low:
        return f"{name} = {start:.2f} (floor): a drop cannot be observed"
    return None


def n_needed(ci: CI, *, gt: float | None = None, ge: float | None = None, lt: float | None = None,
             le: float | None = None, power: float = POWER) -> int | None:
    """The n at which the rule decides "statistic ∈ R" with probability ``power`` if the true
    value is ``ci.value``: exact binomial power for ``clopper-pearson``; otherwise a normal
    approximation with the per-unit spread of the data (``newcombe``: from the discordant
    counts; ``bootstrap``: from the interval's width), and a deterministic count when every unit
    is equal. None when the estimate sits on a boundary of R or no n up to ``N_CAP`` decides."""
    r: Bounds = (gt, ge, lt, le)
    bounds = [b for b in (gt, ge, lt, le) if b is not None]
    if any(ci.value == b for b in bounds) or not bounds or ci.n == 0:
        return None
    d = min(abs(ci.value - b) for b in bounds)
    z = _z() + float(_st.norm.ppf(power))
    p = ci.value
    if ci.method == "clopper-pearson" and p not in (0.0, 1.0):
        approx = math.ceil((z * math.sqrt(p * (1 - p)) / d) ** 2)
        if approx > EXACT_MAX:
            return approx if approx <= N_CAP else None
        return _search(lambda m: _cp_power(p, m, r) >= power, cap=4 * EXACT_MAX) or approx
    if ci.method == "bootstrap-ratio" and ci.units:
        return _ratio_n_needed(np.array(ci.units, dtype=np.float64), r, d, power)
    if ci.method == "clopper-pearson":  # p = 0 or 1: every sample at n is the same
        return _search(lambda m: _decides(*_cp1(round(p * m), m), r) is not None)
    sd = _unit_sd(ci)
    if sd > 0:
        need = math.ceil((z * sd / d) ** 2)
        return need if need <= N_CAP else None
    if ci.method == "newcombe":  # every unit shows the same difference: the data at n are fixed
        return _search(lambda m: _decides(*_unanimous_newcombe(ci.value, m), r) is not None)
    if ci.value in (0.0, 1.0, -1.0):
        return _search(lambda m: _decides(*_widen(ci.model_copy(update={"n": m, "low": ci.value, "high": ci.value})),
                                          r) is not None)
    return 1


def _unanimous_newcombe(value: float, n: int) -> tuple[float, float]:
    if value > 0:
        cells = (0, n, 0, 0)
    elif value < 0:
        cells = (0, 0, n, 0)
    else:
        cells = (0, 0, 0, n)
    _, lo, hi = _newcombe(*cells)
    return lo, hi


def _cp1(k: int, n: int) -> tuple[float, float]:
    lo, hi = _cp_bounds(np.array([k]), n)
    return float(lo[0]), float(hi[0])


def _unit_sd(ci: CI) -> float:
    """Per-unit standard deviation behind the interval."""
    if ci.method == "newcombe" and ci.discordant is not None:
        b, c = ci.discordant
        return math.sqrt(max(0.0, (b + c) / ci.n - ci.value ** 2))
    return (max(ci.high, ci.low) - min(ci.high, ci.low)) / (2 * _z()) * math.sqrt(ci.n)


def _decided(lo: np.ndarray, hi: np.ndarray, r: Bounds) -> np.ndarray:
    """Element-wise ``_decides(lo, hi, r) is not None``."""
    gt, ge, lt, le = r

    def inside(x: np.ndarray) -> np.ndarray:
        ok = np.ones(x.shape, dtype=bool)
        for b, op in ((gt, np.greater), (ge, np.greater_equal), (lt, np.less), (le, np.less_equal)):
            if b is not None:
                ok &= op(x, b)
        return ok

    lower = max((b for b in (gt, ge) if b is not None), default=None)
    upper = min((b for b in (lt, le) if b is not None), default=None)
    dec = inside(lo) & inside(hi)
    if upper is not None:
        dec |= ~inside(lo) & (lo >= upper)
    if lower is not None:
        dec |= ~inside(hi) & (hi <= lower)
    out: np.ndarray = dec
    return out


def _cp_power(p: float, n: int, r: Bounds) -> float:
    """P(the Clopper–Pearson interval of Binomial(n, p) decides R)."""
    k = np.arange(n + 1)
    lo, hi = _cp_bounds(k, n)
    return float(_st.binom.pmf(k, n, p)[_decided(lo, hi, r)].sum())


def _ratio_power(units: np.ndarray, m: int, r: Bounds) -> float:
    """P(the rule decides R) for m units drawn from the observed ones (the population the
    bootstrap itself assumes), each sample judged by the same percentile bootstrap of
    Σ num / Σ den (seeded; ``SIM_DRAWS`` samples of ``SIM_BOOT`` resamples, in chunks)."""
    rng = np.random.default_rng(m)
    decided = 0
    for start in range(0, SIM_DRAWS, SIM_CHUNK):
        k = min(SIM_CHUNK, SIM_DRAWS - start)
        samp = units[rng.integers(0, len(units), size=(k, m))]  # k × m × 2
        b = rng.integers(0, m, size=(k, SIM_BOOT, m))
        rows = np.arange(k)[:, None, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            stats = samp[rows, b, 0].sum(axis=2) / samp[rows, b, 1].sum(axis=2)
        lo, hi = np.nanquantile(stats, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=1)
        decided += int(_decided(lo, hi, r).sum())
    return decided / SIM_DRAWS


def _ratio_n_needed(units: np.ndarray, r: Bounds, d: float, power: float) -> int | None:
    """``n_needed`` of a ratio of sums: the rule simulated from the minimum n doubling up to
    ``SIM_MAX`` units, then bisection; beyond ``SIM_MAX`` the delta-method normal approximation
    of the ratio's per-unit spread."""
    lo, hi = MIN_UNITS - 1, MIN_UNITS  # the rule decides nothing below the minimum n
    while _ratio_power(units, hi, r) < power:
        lo, hi = hi, 2 * hi
        if hi > SIM_MAX:
            return _delta_n_needed(units, d, power)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _ratio_power(units, mid, r) >= power else (mid, hi)
    return hi


def _delta_n_needed(units: np.ndarray, d: float, power: float) -> int | None:
    num, den = units[:, 0], units[:, 1]
    q = float(num.sum() / den.sum())
    sd = float(np.std(num - q * den, ddof=1) / np.mean(den)) if len(units) > 1 else 0.0
    need = math.ceil(((_z() + float(_st.norm.ppf(power))) * sd / d) ** 2) if sd > 0 else None
    return need if need is not None and need <= N_CAP else None


def _search(ok: Callable[[int], bool], cap: int = N_CAP) -> int | None:
    """Smallest n in [1, cap] with ok(n) (doubling, then bisection: assumes ok is monotone
    up to the discreteness of the data)."""
    hi = 1
    while not ok(hi):
        hi *= 2
        if hi > cap:
            return None
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _reasons(parts: Sequence[ClaimVerdict]) -> str:
    return "; ".join(dict.fromkeys(p.reason for p in parts if p.reason))


def combine_verdicts(*parts: ClaimVerdict) -> ClaimVerdict:
    """A claim made of several parts (all must hold). BY CONSTRUCTION parts are guarantees,
    not evidence: they drop out (all of them: BY CONSTRUCTION). Then CONTRADICTED if any part
    is (one failed part sinks the claim, whatever the others), NOT TESTABLE if nothing is
    contradicted and some part cannot be tested, REPRODUCED if all are, else INCONCLUSIVE (the
    largest ``n_needed``)."""
    if not parts:
        return ClaimVerdict(verdict=Verdict.NOT_TESTABLE, reason="no parts")
    broken = [p for p in parts if p.verdict is Verdict.CONTRADICTED and p.reason.startswith("guarantee violated")]
    if broken:
        return broken[0]
    measured = [p for p in parts if p.verdict is not Verdict.BY_CONSTRUCTION]
    if not measured:
        return ClaimVerdict(verdict=Verdict.BY_CONSTRUCTION, n=min(p.n for p in parts), reason=_reasons(parts))
    n = min(p.n for p in measured)
    for v in (Verdict.CONTRADICTED, Verdict.NOT_TESTABLE, Verdict.SET_BY_DESIGN):
        hit = [p for p in measured if p.verdict is v]
        if hit:
            return ClaimVerdict(verdict=v, n=n if v is not Verdict.CONTRADICTED else min(p.n for p in hit),
                                reason=_reasons(hit), model=hit[0].model if v is Verdict.CONTRADICTED else "")
    if all(p.verdict is Verdict.REPRODUCED for p in measured):
        models = {p.model for p in measured}
        return ClaimVerdict(verdict=Verdict.REPRODUCED, n=n, model=models.pop() if len(models) == 1 else "")
    und = [p for p in measured if p.verdict is Verdict.INCONCLUSIVE]
    needs = [p.n_needed for p in und]
    return ClaimVerdict(verdict=Verdict.INCONCLUSIVE, n=n, min_n=max(p.min_n for p in und),
                        n_needed=None if any(x is None for x in needs) else max(x for x in needs if x is not None),
                        reason=_reasons([p for p in und if p.n == n]))


def either_verdict(*parts: ClaimVerdict) -> ClaimVerdict:
    """A claim that holds if any part holds: REPRODUCED if any part is (else BY CONSTRUCTION if
    any part is), CONTRADICTED if every part is, INCONCLUSIVE if some part is (the smallest known
    ``n_needed``), else NOT TESTABLE (every part contradicted or untestable: an untested part
    might still hold, and no n of the others decides it)."""
    if not parts:
        return ClaimVerdict(verdict=Verdict.NOT_TESTABLE, reason="no parts")
    n = max(p.n for p in parts)
    for v in (Verdict.REPRODUCED, Verdict.BY_CONSTRUCTION):
        hit = [p for p in parts if p.verdict is v]
        if hit:
            return ClaimVerdict(verdict=v, n=n, reason=hit[0].reason if v is Verdict.BY_CONSTRUCTION else "",
                                model=hit[0].model)
    if all(p.verdict is Verdict.CONTRADICTED for p in parts):
        return ClaimVerdict(verdict=Verdict.CONTRADICTED, n=n, reason=_reasons(parts), model=parts[0].model)
    und = [p for p in parts if p.verdict is Verdict.INCONCLUSIVE]
    if not und:
        return ClaimVerdict(verdict=Verdict.NOT_TESTABLE, n=n, reason=_reasons(
            [p for p in parts if p.verdict is not Verdict.CONTRADICTED]))
    needs = [p.n_needed for p in und if p.n_needed]
    return ClaimVerdict(verdict=Verdict.INCONCLUSIVE, n=n, n_needed=min(needs) if needs else None,
                        min_n=min(p.min_n for p in und))
