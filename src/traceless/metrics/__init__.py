"""The shared metrics of the paper reports, public: paper 000's metrics and bootstrap
intervals (``traceless.metrics._metrics``) and the one verdict rule every report judges its
claims by (``traceless.metrics._verdict``: exact/Newcombe intervals, the minimum n, the power
calculation behind "n needed", NOT TESTABLE at a ceiling or floor, BY CONSTRUCTION)."""

from traceless.metrics._claims import ClaimForm, PaperClaim
from traceless.metrics._metrics import (
    PR_COSINE_THRESHOLD,
    STOPWORDS,
    PRJudgement,
    aer,
    aer_columns,
    aer_max,
    agreement,
    bootstrap_ci,
    content_match,
    content_words,
    delta_di,
    delta_s,
    frs_worst,
    pr,
    pr_judge,
    pr_judge_many,
    pua,
)
from traceless.metrics._verdict import (
    CI,
    LEVEL,
    MIN_UNITS,
    N_CAP,
    POWER,
    ClaimVerdict,
    Verdict,
    claim_verdict,
    combine_verdicts,
    construction_verdict,
    count_verdict,
    decides,
    either_verdict,
    mean_ci,
    n_needed,
    paired_ci,
    pinned,
    proportion_ci,
    ratio_ci,
)

__all__ = [
    "CI", "ClaimForm", "LEVEL", "PaperClaim", "MIN_UNITS", "N_CAP", "POWER", "PR_COSINE_THRESHOLD", "STOPWORDS", "ClaimVerdict", "PRJudgement", "Verdict",
    "aer", "aer_columns", "aer_max", "agreement", "bootstrap_ci", "claim_verdict", "combine_verdicts", "construction_verdict",
    "content_match", "content_words", "count_verdict", "decides", "delta_di", "delta_s", "either_verdict",
    "frs_worst", "mean_ci", "n_needed", "paired_ci", "pinned", "pr", "pr_judge", "pr_judge_many", "proportion_ci", "pua", "ratio_ci",
]
