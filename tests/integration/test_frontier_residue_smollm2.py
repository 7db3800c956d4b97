"""Real models, end to end: the frontier study's residue preset on the tiny fixture with
smollm2-135m-instruct (greedy, one thread) and all-MiniLM-L6-v2 — screen, the kept slice,
the supersede sensitivity and the report. smollm2's one-sentence summary of tiny_bike's
canary session keeps the canary (seed 0), so the S=2 slice runs on a real model."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceless.report import render_report
from traceless.studies import read_rows, run_study

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_tiny.json"
CONFIG = {"data": str(FIXTURE), "supersede": [1.01], "probe_tokens": 32}


def test_smollm2_residue_preset_end_to_end(tmp_path: Path) -> None:
    from traceless.errors import ModelError
    from traceless.models import load_backend, load_embedder

    try:
        be = load_backend("smollm2-135m-instruct", num_threads=1)
        emb = load_embedder()
    except (ModelError, OSError) as e:
        pytest.skip(f"smollm2-135m-instruct or all-MiniLM-L6-v2 is not installed here: {e}")
    out = tmp_path / "res"
    try:
        s = run_study("frontier-residue", out, CONFIG, backend=be, model_tag="smollm2", embedder=emb, progress=False)
    finally:
        be.close()
    assert s.finished
    rows = {r.key: r for r in read_rows(out)}
    assert len(rows) == 3 * (2 + 2 * 6 * 3)
    kept = {(k.split("/")[0], int(k[-1])) for k, r in rows.items() if "/screen/" in k and r.metrics["kept"]}
    assert ("inst=tiny_bike", 2) in kept
    for k, r in rows.items():
        if "/frs/" not in k:
            continue
        inst, s_ = k.split("/")[0], int(k.split("/S=")[1][0])
        assert r.metrics["eligible"] is ((inst, s_) in kept), k
        if not r.metrics["eligible"]:
            continue
        mode = k.split("/")[2]
        if mode in ("full_purge", "tombstone"):
            assert r.metrics["summary_copies_after"] == 0 and not r.metrics["extracted"], k
        if mode in ("noop", "raw_only", "raw_plus_resummarize@1.01"):
            assert r.metrics["summary_copies_after"] >= 1, k  # nothing retires the old chunk
        assert r.extra["receipt"]["matched"], k
    text = render_report(out, tmp_path / "rep").read_text()
    assert "| smollm2 | 2 | 3 | 1 | 0.33 [0.01, 0.91] |" in text
    assert not any(r.extra["canary"] in text for r in rows.values())
