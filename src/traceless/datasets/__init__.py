"""Data for the studies and audits: datasets shipped in the package, and importers that
turn common conversation datasets into the generic session format.

Also the audit's planted data (high-entropy canaries, their near-copy redaction, synthetic
users) and the audit's and the studies' data loaders: LongMemEval's upstream JSON and the generic
JSON Lines sessions (``load_instances``).

Layering: above memory (it reuses its session parser), below audit and studies (which find
their data here)."""

from traceless.datasets._bundled import (
    DATA_ENV,
    DATASETS,
    DEFAULT_DATASET,
    BundledDataset,
    dataset_path,
    license_text,
    resolve_data,
)
from traceless.datasets._canary import (
    CANARY_SPACE,
    CANARY_WORDS,
    canary_sentence,
    inject_canary,
    is_canary,
    make_canary,
)
from traceless.datasets._data import (
    export_jsonl,
    instances_to_sessions,
    load_instances,
    resolve_longmemeval,
    sessions_to_instances,
)
from traceless.datasets._importers import IMPORTERS, Imported, import_file, write_sessions_atomic
from traceless.datasets._longmemeval import (
    LONGMEMEVAL_FIELDS,
    LONGMEMEVAL_URL,
    Instance,
    longmemeval_instance,
    parse_longmemeval,
    read_longmemeval,
)
from traceless.datasets._redact import redact_canaries
from traceless.datasets._synthetic import synthetic_users

__all__ = [
    "DATA_ENV",
    "DATASETS",
    "DEFAULT_DATASET",
    "BundledDataset",
    "dataset_path",
    "license_text",
    "resolve_data",
    "CANARY_SPACE",
    "CANARY_WORDS",
    "canary_sentence",
    "inject_canary",
    "is_canary",
    "make_canary",
    "redact_canaries",
    "synthetic_users",
    "IMPORTERS",
    "Imported",
    "import_file",
    "write_sessions_atomic",
    "Instance",
    "LONGMEMEVAL_FIELDS",
    "LONGMEMEVAL_URL",
    "export_jsonl",
    "instances_to_sessions",
    "load_instances",
    "longmemeval_instance",
    "parse_longmemeval",
    "read_longmemeval",
    "resolve_longmemeval",
    "sessions_to_instances",
]
