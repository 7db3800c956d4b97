"""AfterDeleteBench on real embedded models (slow; `pytest -m integration`).

* smollm2-135m (fast, weak): the whole pipeline through the runner and the report, with
  real generations: rows are well formed and the clean world recovers nothing.
* qwen2.5-coder-0.5b (the default): one atomic profile, both worlds, one DIRECT query. The
  deleted target is recovered from the surviving extractive summary in the forget world and
  not in the clean world (paper 001 §5.1 at the scale of one profile); closure removes it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from traceless.models import GenerationConfig, load_backend
from traceless.studies import read_rows, run_study
from traceless.studies.afterdelete import CONDITIONS, build_world, generate_profiles, make_auditor, run_audits

pytestmark = pytest.mark.integration

SMOL = "smollm2-135m-instruct"


def test_pipeline_on_smollm2(tmp_path: Path) -> None:
    backend = load_backend(SMOL)
    try:
        s = run_study("afterdelete", tmp_path / "run", {"n": 2, "splits": ["iid"], "blocks": ["primary"],
                                                         "max_new_tokens": 32},
                      backend=backend, model_tag="smollm2", progress=False)
    finally:
        backend.close()
    assert s.finished and s.cells_run == 4
    rows = read_rows(tmp_path / "run")
    assert {r.config["cell"]["world"] for r in rows} == {"clean", "forget"}
    assert all(isinstance(r.reply, str) and r.prompt[0]["role"] == "system" for r in rows)
    assert not any(r.metrics["R"] for r in rows if r.config["cell"]["world"] == "clean")
    assert all(r.model["name"] == SMOL for r in rows)
    from traceless.report import render_report

    assert "Table 1" in render_report(tmp_path / "run").read_text()


@pytest.mark.skipif(os.environ.get("TRACELESS_SKIP_QWEN") == "1", reason="TRACELESS_SKIP_QWEN=1")
def test_default_model_recovers_deleted_target_from_summary_only() -> None:
    from traceless.models._catalog import DEFAULT_MODEL, model_status

    if model_status(DEFAULT_MODEL).state == "missing":
        pytest.skip("default model packages not installed")
    p = generate_profiles("iid", 1)[0]  # atomic
    key = secrets.token_bytes(32)
    worlds = [build_world(p, w, CONDITIONS.get(c), gate_key=key)
              for c in ("hier_exact", "hier_closure") for w in ("forget", "clean")]
    q = load_backend(DEFAULT_MODEL)
    try:
        eps = run_audits(q, worlds, make_auditor("direct"), contract="aligned", budget=10,
                         gen=GenerationConfig(max_new_tokens=32, temperature=0.0))
    finally:
        q.close()
    forget_exact, clean_exact, forget_closure, clean_closure = eps
    assert forget_exact.R and forget_exact.statuses == ["prediction"]
    assert not clean_exact.R and not forget_closure.R and not clean_closure.R
    assert not any(forget_closure.anywhere)
