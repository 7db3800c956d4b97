"""Moved to ``traceless.run`` (the run kernel: ``run/_study.py`` declares a study,
``run/_runner.py`` runs it); these names stay importable from here."""

from traceless.run._config import load_config, parse_sets
from traceless.run._runner import (
    _default_workers,
    _load_backend,
    iter_chunks,
    remove_dir,
    run_study,
    served_options,
)
from traceless.run._study import (
    STUDIES,
    Cell,
    CellResult,
    RunContext,
    RunSummary,
    Study,
    derive_seed,
    get_study,
)

__all__ = ["STUDIES", "Study", "Cell", "CellResult", "RunContext", "RunSummary", "run_study", "derive_seed",
           "load_config", "parse_sets", "get_study", "iter_chunks", "remove_dir", "served_options",
           "_default_workers", "_load_backend"]
