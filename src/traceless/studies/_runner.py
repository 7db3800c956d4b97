"""The study vocabulary the built-in studies import (``Study``, ``Cell``, …): the run
kernel's public names (``traceless.run``), re-exported for the studies of this package."""

from traceless.run import (
    STUDIES,
    Cell,
    CellResult,
    RunContext,
    RunSummary,
    Study,
    derive_seed,
    get_study,
    iter_chunks,
    load_config,
    parse_sets,
    remove_dir,
    run_study,
    served_options,
)

__all__ = ["STUDIES", "Study", "Cell", "CellResult", "RunContext", "RunSummary", "run_study", "derive_seed",
           "load_config", "parse_sets", "get_study", "iter_chunks", "remove_dir", "served_options"]
