"""Moved to ``traceless.run`` (the run kernel); these names stay importable from here."""

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
    read_manifest,
    read_rows,
    write_manifest,
)

__all__ = ["GENERATIONS_DB", "MANIFEST", "RESULTS_DB", "RESULTS_FORMAT", "Manifest", "ResultRow", "ResultsStore",
           "RunRecord", "StoredRow", "read_manifest", "read_rows", "write_manifest"]
