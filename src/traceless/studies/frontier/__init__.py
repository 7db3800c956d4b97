"""Paper 000's frontier study (``traceless study run frontier``): PR/AER over (S, k), PUA,
Δ_S, Δ_DI and forgetting residue per deletion mode and tier; its residue preset
(``traceless study run frontier-residue``): the §3.3 residue rows on the instances whose summary
kept the canary. See docs/frontier.md."""

from traceless.studies.frontier._config import PAPER_K, PAPER_MODES, PAPER_S, FrontierConfig
from traceless.studies.frontier._residue import (
    ResidueStudy,
    deletion_name,
    residue_instances,
    sensitivity_thresholds,
)
from traceless.studies.frontier._residue_config import SUPERSEDE_GRID, ResidueConfig
from traceless.studies.frontier._study import JUDGE_PROMPT, FrontierStudy, parse_judge, select_instances

__all__ = [
    "PAPER_K",
    "PAPER_MODES",
    "PAPER_S",
    "JUDGE_PROMPT",
    "FrontierConfig",
    "FrontierStudy",
    "ResidueConfig",
    "ResidueStudy",
    "SUPERSEDE_GRID",
    "deletion_name",
    "residue_instances",
    "sensitivity_thresholds",
    "parse_judge",
    "select_instances",
]
