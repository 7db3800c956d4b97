"""Data for the studies and audits: datasets shipped in the package, and importers that
turn common conversation datasets into the generic session format.

Layering: above memory and audit (it reuses their parsers), below studies (which find
their default data here)."""

from traceless.datasets._bundled import (
    DATA_ENV,
    DATASETS,
    DEFAULT_DATASET,
    BundledDataset,
    dataset_path,
    license_text,
    resolve_data,
)
from traceless.datasets._importers import IMPORTERS, Imported, import_file, write_sessions_atomic

__all__ = [
    "DATA_ENV",
    "DATASETS",
    "DEFAULT_DATASET",
    "BundledDataset",
    "dataset_path",
    "license_text",
    "resolve_data",
    "IMPORTERS",
    "Imported",
    "import_file",
    "write_sessions_atomic",
]
