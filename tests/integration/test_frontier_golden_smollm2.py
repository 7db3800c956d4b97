"""Real models: a tiny frontier slice on smollm2-135m-instruct and all-MiniLM-L6-v2 gives,
cell for cell, the metrics and the prompt/reply digests that the frontier study gave before
it ran on the audit engine's steps (tests/fixtures/frontier_golden.json, key ``smollm2``;
recorded with greedy decoding, one thread, on the project's x86-64 CPU build of torch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from _frontier_golden import assert_matches, cells_snapshot
from traceless.studies import run_study

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_tiny.json"
SLICE = {"data": str(FIXTURE), "n": 1, "S": [0, 1, 2], "k": [1, 3],
         "modes": ["raw_only", "raw_plus_resummarize", "full_purge"], "wordings": 1, "frs_k": [3],
         "probe_tokens": 24, "answer_tokens": 24, "summary_tokens": 48, "bootstrap": 50}


def run_slice(out: Path) -> None:
    from traceless.errors import ModelError
    from traceless.models import load_backend, load_embedder

    try:
        be = load_backend("smollm2-135m-instruct", num_threads=1)
        emb = load_embedder()
    except (ModelError, OSError) as e:
        pytest.skip(f"smollm2-135m-instruct or all-MiniLM-L6-v2 is not installed here: {e}")
    try:
        run_study("frontier", out, SLICE, backend=be, model_tag="smollm2", embedder=emb, progress=False)
    finally:
        be.close()


def test_smollm2_slice_matches_the_golden_record(tmp_path: Path) -> None:
    run_slice(tmp_path / "fr")
    assert_matches(cells_snapshot(tmp_path / "fr"), "smollm2")
