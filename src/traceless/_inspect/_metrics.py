"""``key_stderr``: inspect's ``stderr()`` for every key of a dict-valued score.

inspect applies ``stderr()`` to a float score; the tasks' scores are dicts (AER per level and
phase, R per world). This metric projects each numeric key to a float score and calls
inspect's own ``stderr()`` on it, so the task's one score row carries ``KEY_stderr`` next to the
means (standard error of the mean over samples, CLT; 0 with one sample)."""

from __future__ import annotations

from inspect_ai.scorer import Metric, SampleScore, Score, Value, metric, stderr

__all__ = ["key_stderr"]


@metric
def key_stderr(prefix: str = "") -> Metric:
    """``{prefix}{key}_stderr`` for each numeric key of the samples' dict scores."""
    se = stderr()

    def compute(scores: list[SampleScore]) -> Value:
        rows = [(s, {k: float(v) for k, v in s.score.value.items()
                     if isinstance(v, int | float) and not isinstance(v, bool)})
                for s in scores if isinstance(s.score.value, dict)]
        keys = list(dict.fromkeys(k for _, vals in rows for k in vals))
        out: dict[str, float] = {}
        for k in keys:
            proj = [SampleScore(score=Score(value=vals[k]), sample_id=s.sample_id) for s, vals in rows if k in vals]
            out[f"{prefix}{k}_stderr"] = float(se(proj))  # type: ignore[arg-type]
        return out

    return compute
