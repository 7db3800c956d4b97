"""Paper 002 study: execution-state unlearning by provenance-guided selective replay.

Registers the ``replay`` study (``traceless study run replay``) and its suites.
"""

from traceless.studies.replay._audits import PROBE_NAMES, cad, executed_actions, leaked, probes_for
from traceless.studies.replay._study import (
    DEFAULT_OPERATORS,
    ReplayConfig,
    ReplayStudy,
    late_target,
    long_episodes,
    place_target,
)
from traceless.studies.replay._suites import SUITES, Choice, Episode, Task, agentdojo_status, make_env

__all__ = [
    "DEFAULT_OPERATORS",
    "PROBE_NAMES",
    "SUITES",
    "Choice",
    "Episode",
    "ReplayConfig",
    "ReplayStudy",
    "Task",
    "agentdojo_status",
    "cad",
    "executed_actions",
    "late_target",
    "leaked",
    "long_episodes",
    "make_env",
    "place_target",
    "probes_for",
]
