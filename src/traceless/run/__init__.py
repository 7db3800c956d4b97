"""The run kernel under the audit and the studies: the results store and its row schema
(``ResultRow``), the runner (``run_study`` = ``open_run`` / ``schedule`` / ``finalize``:
manifest, resume, thread pool or Ray executor, one generation cache), export bundles,
merge and purge of results dirs. A study (``Study``) declares a grid of ``Cell`` s and
runs one group of them; everything else is here."""

from traceless.run._bundle import (
    BUNDLE_ROWS,
    BundleSummary,
    export_bundle,
    is_bundle,
    read_bundle_rows,
    read_rows,
)
from traceless.run._config import load_config, parse_sets
from traceless.run._merge import MergeSummary, merge_results
from traceless.run._progress import progress_bar
from traceless.run._purge import PurgeSummary, purge_results
from traceless.run._ray import GenerationFile, RaySession, check_address
from traceless.run._results import (
    GENERATIONS_DB,
    MANIFEST,
    RESULTS_DB,
    RESULTS_FORMAT,
    Manifest,
    ResultRow,
    ResultsStore,
    RunRecord,
    StoredRow,
    atomic_write,
    read_manifest,
    write_manifest,
)
from traceless.run._run_result import ManifestSummary, StudyRunResult, run_state, study_run_result
from traceless.run._runner import (
    OpenRun,
    RunOptions,
    finalize,
    iter_chunks,
    open_run,
    remove_dir,
    run_study,
    schedule,
    served_options,
)
from traceless.run._study import (
    DEFAULT_STUDIES,
    STUDIES,
    Cell,
    CellResult,
    RunContext,
    RunSummary,
    Study,
    derive_seed,
    get_study,
    registered_studies,
)

__all__ = [
    "progress_bar",
    "BUNDLE_ROWS",
    "DEFAULT_STUDIES",
    "BundleSummary",
    "Cell",
    "CellResult",
    "GENERATIONS_DB",
    "GenerationFile",
    "MANIFEST",
    "Manifest",
    "ManifestSummary",
    "MergeSummary",
    "OpenRun",
    "PurgeSummary",
    "RESULTS_DB",
    "RESULTS_FORMAT",
    "RaySession",
    "ResultRow",
    "ResultsStore",
    "RunContext",
    "RunOptions",
    "RunRecord",
    "RunSummary",
    "STUDIES",
    "StoredRow",
    "Study",
    "StudyRunResult",
    "atomic_write",
    "check_address",
    "derive_seed",
    "export_bundle",
    "finalize",
    "get_study",
    "is_bundle",
    "iter_chunks",
    "load_config",
    "merge_results",
    "open_run",
    "parse_sets",
    "purge_results",
    "read_bundle_rows",
    "read_manifest",
    "read_rows",
    "registered_studies",
    "remove_dir",
    "run_state",
    "run_study",
    "schedule",
    "served_options",
    "study_run_result",
    "write_manifest",
]
