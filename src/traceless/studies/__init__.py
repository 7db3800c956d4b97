"""Studies: each paper's experiment as a declared grid of cells, run by one generic,
resumable runner into a results dir (see docs/study-runner.md).

Public surface: the ``STUDIES`` registry, the ``Study`` base class with ``Cell`` /
``CellResult`` / ``RunContext``, ``run_study``, config helpers, and the read-only results
API (``read_manifest``, ``read_rows``) that reports use; ``read_rows`` also reads an export
bundle (``export_bundle``: metrics-level Parquet rows plus the manifest, no conversation text).

The built-in studies (``afterdelete``, ``frontier``, ``replay``) are default plug-ins of the
kernel's ``STUDIES`` (``traceless.run.DEFAULT_STUDIES``): they register with
``@STUDIES.register`` as a third-party study does and are imported on the registry's first use.
"""

from traceless.run import (
    GENERATIONS_DB,
    MANIFEST,
    RESULTS_DB,
    RESULTS_FORMAT,
    STUDIES,
    BundleSummary,
    Cell,
    CellResult,
    Manifest,
    ManifestSummary,
    MergeSummary,
    PurgeSummary,
    ResultRow,
    ResultsStore,
    RunContext,
    RunRecord,
    RunSummary,
    StoredRow,
    Study,
    StudyRunResult,
    derive_seed,
    export_bundle,
    get_study,
    is_bundle,
    load_config,
    merge_results,
    parse_sets,
    purge_results,
    read_manifest,
    read_rows,
    run_state,
    run_study,
    study_run_result,
    write_manifest,
)
from traceless.studies._claims import PAPER_CLAIMS, paper_claim

__all__ = [
    "PAPER_CLAIMS",
    "paper_claim",
    "BundleSummary",
    "export_bundle",
    "is_bundle",
    "PurgeSummary",
    "purge_results",
    "GENERATIONS_DB",
    "MANIFEST",
    "RESULTS_DB",
    "RESULTS_FORMAT",
    "STUDIES",
    "Cell",
    "CellResult",
    "Manifest",
    "ManifestSummary",
    "MergeSummary",
    "ResultRow",
    "StoredRow",
    "ResultsStore",
    "RunContext",
    "RunRecord",
    "RunSummary",
    "Study",
    "StudyRunResult",
    "derive_seed",
    "get_study",
    "load_config",
    "merge_results",
    "parse_sets",
    "read_manifest",
    "read_rows",
    "write_manifest",
    "run_state",
    "run_study",
    "study_run_result",
]
