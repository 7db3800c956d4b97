"""Module B and Table 10 on a real model (slow; `pytest -m integration`): each branch's
activation is generated in its own uncached call, the identity check is computed from those
separate replies, and Table 10's legacy probes run on the very states module B used."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceless.models import load_backend
from traceless.studies import read_rows, run_study

pytestmark = pytest.mark.integration


def test_module_b_and_table10_on_smollm2(tmp_path: Path) -> None:
    backend = load_backend("smollm2-135m-instruct", num_threads=1)
    calls: list[int] = []
    orig = backend.generate_batch

    def spy(batch, config=None, **kw):  # type: ignore[no-untyped-def]
        calls.append(len(batch))
        return orig(batch, config, **kw)

    backend.generate_batch = spy  # type: ignore[method-assign]
    try:
        s = run_study("afterdelete", tmp_path / "run",
                      {"n_modules": 2, "splits": ["iid"], "blocks": ["writediag", "legacyact"],
                       "writediag_auditor": "direct", "max_new_tokens": 32},
                      backend=backend, model_tag="smollm2", progress=False)
    finally:
        backend.close()
    assert s.finished and s.cells_run == 2 * (2 * 2 * 3)
    rows = read_rows(tmp_path / "run")
    wd = [r for r in rows if r.config["cell"]["block"] == "writediag"]
    assert all(r.metrics["branches_generated_separately"] for r in wd)
    # three activation calls per block (one per branch, 4 worlds each), none answered by the cache
    assert calls.count(4) >= 6
    for r in wd:
        assert isinstance(r.metrics["nowrite_gate_nondeterministic"], bool)
        if r.metrics["nowrite_gate_same_prompt"] and not r.metrics["nowrite_gate_nondeterministic"]:
            assert r.metrics["nowrite_gate_same_reply"]
    twin = {(r.config["cell"]["profile"], r.config["cell"]["world"], r.config["cell"]["branch"]):
            r.metrics["state_digest"] for r in wd}
    leg = [r for r in rows if r.config["cell"]["block"] == "legacyact"]
    assert leg and all(r.metrics["state_digest"] == twin[(r.config["cell"]["profile"], r.config["cell"]["world"],
                                                          r.config["cell"]["branch"])] for r in leg)
    assert all(r.metrics["activation_contract"] == "legacy" for r in leg)
    from traceless.report import render_report

    text = render_report(tmp_path / "run").read_text()
    assert "Table 10" in text and "nondeterministic" in text
