"""JSON Schemas of every machine-readable document the CLI prints with ``--json``.

``docs/schemas/NAME.json`` is generated from these pydantic models
(``python -m traceless.schemas docs/schemas``); a test fails when they differ, so the
published schemas cannot drift from the code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from traceless._deployment import AccessExport, DeploymentRecheck, DeploymentScan, ExportedStore
from traceless.audit import SystemAuditResult
from traceless.forget import (
    BundleVerifyResult,
    LogVerifyResult,
    Receipt,
    RequestBundle,
    RequestLogEntry,
    VerifyResult,
)
from traceless.memory import SearchResult
from traceless.studies import StudyRunResult
from traceless.systems import ErasurePlan, RecheckResult, ScanReport

__all__ = ["SCHEMAS", "schema_text", "write_schemas"]

SCHEMAS: dict[str, type[BaseModel]] = {
    "receipt": Receipt,  # traceless forget --json
    "verify-result": VerifyResult,  # traceless forget verify --json
    "log-verify": LogVerifyResult,  # traceless log verify --json
    "search-result": SearchResult,  # traceless memory search --json
    "audit-result": SystemAuditResult,  # traceless audit --json
    "study-run": StudyRunResult,  # traceless study run --json
    "scan-result": ScanReport,  # traceless scan --memory SYSTEM --json
    "erasure-plan": ErasurePlan,  # traceless forget --memory SYSTEM --dry-run --json
    "recheck-result": RecheckResult,  # traceless scan --memory SYSTEM --since RECEIPT --json
    "request-log": RequestLogEntry,  # one line of <state dir>/requests.jsonl
    "deployment-scan": DeploymentScan,  # traceless scan --deployment D --json
    "request-bundle": RequestBundle,  # request-<id>/bundle.json (traceless forget --deployment D --json)
    "bundle-verify-result": BundleVerifyResult,  # traceless forget verify request-<id> --json
    "deployment-recheck": DeploymentRecheck,  # traceless scan --deployment D --since request-<id> --json
    "access-export": AccessExport,  # traceless export --json (and export.json in its folder)
    "exported-store": ExportedStore,  # each <instance>.<store>.<n>.json of an export
}


def schema_text(name: str) -> str:
    return json.dumps(SCHEMAS[name].model_json_schema(), indent=2, sort_keys=True) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in SCHEMAS:
        p = folder / f"{name}.json"
        p.write_text(schema_text(name), encoding="utf-8")
        out.append(p)
    return out


if __name__ == "__main__":
    for p in write_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")):
        print(p)
