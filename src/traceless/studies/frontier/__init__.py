"""Paper 000's frontier study (``traceless study run frontier``): PR/AER over (S, k), PUA,
Δ_S, Δ_DI and forgetting residue per deletion mode and tier. See docs/frontier.md."""

from traceless.studies.frontier._config import PAPER_K, PAPER_MODES, PAPER_S, FrontierConfig
from traceless.studies.frontier._study import JUDGE_PROMPT, FrontierStudy, parse_judge, select_instances

__all__ = [
    "PAPER_K",
    "PAPER_MODES",
    "PAPER_S",
    "JUDGE_PROMPT",
    "FrontierConfig",
    "FrontierStudy",
    "parse_judge",
    "select_instances",
]
