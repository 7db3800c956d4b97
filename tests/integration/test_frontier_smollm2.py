"""Real models: the frontier study on a tiny slice with smollm2-135m-instruct and the
all-MiniLM-L6-v2 embedder (the fixture's three instances), then resume and report."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from traceless.studies import read_rows, run_study

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_tiny.json"
SLICE = {"data": str(FIXTURE), "n": 1, "S": [0, 1], "k": [1, 3], "modes": ["noop", "raw_only", "full_purge"],
         "wordings": 1, "frs_k": [3], "probe_tokens": 24, "answer_tokens": 24, "summary_tokens": 48,
         "bootstrap": 50}


@pytest.fixture(scope="module")
def models():  # type: ignore[no-untyped-def]
    from traceless.errors import ModelError
    from traceless.models import load_backend, load_embedder

    try:
        be = load_backend("smollm2-135m-instruct", num_threads=1)
        emb = load_embedder()
    except (ModelError, OSError) as e:
        pytest.skip(f"smollm2-135m-instruct or all-MiniLM-L6-v2 is not installed here: {e}")
    yield be, emb
    be.close()


def test_tiny_slice_runs_resumes_and_reports(models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    be, emb = models
    out = tmp_path / "fr"
    t0 = time.perf_counter()
    s = run_study("frontier", out, SLICE, backend=be, model_tag="smollm2", embedder=emb, progress=False)
    # frontier cells + tier views + the primary FRS (3 modes × 2 S × 2 k × 3 probes, agent view)
    assert s.finished and s.cells_run == 2 * 2 * 4 + 3 * 2 * 3 + 3 * 2 * 2 * 3
    rows = read_rows(out)
    assert all(r.reply is not None for r in rows)
    assert all(r.model["name"] == "smollm2-135m-instruct" and r.model["weights_sha256"] for r in rows)
    assert all(r.extra["embedder"]["name"] == "all-MiniLM-L6-v2" for r in rows)
    for r in rows:
        if "/frs/" in r.key and "noop" not in r.key:
            assert r.extra["receipt"]["verified"]
        if "/frs/full_purge/" in r.key or "/frs/raw_only/raw/" in r.key or "/frs/raw_only/agent@S=0/" in r.key:
            # the canary is gone from what this view can retrieve, so it cannot be reproduced
            assert not r.metrics["in_context"] and not r.metrics["extracted"]
        if "/agent@S=" in r.key and r.metrics["in_context"]:  # the S view reads one tier only
            assert r.metrics["carrier_tiers"] == (["raw"] if "/agent@S=0/" in r.key else ["summary"])
    # S=0 at k=3 retrieves the canary turn for some probe of these short memories
    assert any(r.metrics.get("in_context") for r in rows if "/aer/S=0/k=3/" in r.key)
    # resume of a finished run: nothing is generated again
    s2 = run_study("frontier", out, SLICE, resume=True, backend=be, model_tag="smollm2", embedder=emb,
                   progress=False)
    assert s2.cells_run == 0 and s2.cache_misses == 0
    from traceless.report import render_report

    text = render_report(out).read_text()
    assert "## Findings" in text and "smollm2-135m-instruct" in text
    print(f"tiny frontier slice on smollm2: {time.perf_counter() - t0:.0f}s")
