"""The frontier study's golden record (tests/fixtures/frontier_golden.json): per cell, the
metrics, receipt flags, memory counts and the digests of the exact prompt and reply, as the
frontier study gave them before it ran on the audit engine's steps. Shared by the unit
(scripted model) and integration (smollm2) golden tests; tests/ is on sys.path through its
conftest."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from traceless.studies import read_rows

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "frontier_golden.json"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def cells_snapshot(out: Path) -> dict[str, dict[str, Any]]:
    """Per cell key of the results dir ``out``: what the golden record pins."""
    snap: dict[str, dict[str, Any]] = {}
    for r in read_rows(out):
        receipt = r.extra.get("receipt")
        snap[r.key] = {
            "metrics": r.metrics, "prompt": _digest(r.prompt), "reply": _digest(r.reply),
            "context_ids": len(r.extra["context_ids"]), "memory_counts": r.extra["memory_counts"],
            "receipt": None if receipt is None else {k: receipt.get(k) for k in ("matched", "verified")},
        }
    return snap


def golden(name: str) -> dict[str, dict[str, Any]]:
    """The recorded cells of slice ``name``."""
    record: dict[str, dict[str, dict[str, Any]]] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return record[name]


def assert_matches(got: dict[str, dict[str, Any]], name: str) -> None:
    """Every cell of slice ``name`` as recorded (same keys, same values)."""
    want = golden(name)
    assert sorted(got) == sorted(want)
    differing = [k for k in want if got[k] != want[k]]
    assert not differing, f"{len(differing)} cells differ, e.g. {differing[0]}: {got[differing[0]]} != {want[differing[0]]}"


def record(name: str, snap: dict[str, dict[str, Any]]) -> None:
    """Write slice ``name`` into the record (run once, on the code being pinned)."""
    data = json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.exists() else {}
    data[name] = snap
    GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
