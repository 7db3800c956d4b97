"""The afterdelete study through the shared runner (scripted model) and its report:
the paper's known guarantees must hold, resume must not redo work, the report renders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_afterdelete import reader

from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.studies import read_rows, run_study
from traceless.studies.afterdelete import AfterDelete
from traceless.studies.afterdelete._study import BLOCKS

ALL = list(BLOCKS)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ad") / "run"
    run_study("afterdelete", out, {"n": 8, "n_transformed": 4, "n_train": 4, "ppo_iterations": 2, "blocks": ALL,
                                          "n_modules": 8, "n_calibration": 4},
              backend=ScriptedBackend(reader), model_tag="scripted", embedder=HashingEmbedder(), progress=False)
    return out


def _by(rows, **kv):  # type: ignore[no-untyped-def]
    return [r for r in rows if all(r.config["cell"].get(k) == v for k, v in kv.items())]


def test_grid_is_complete_and_paired(run_dir: Path) -> None:
    rows = read_rows(run_dir)
    cells = list(AfterDelete().cells(AfterDelete.config_cls(n=8, n_transformed=4, blocks=ALL, n_modules=8,
                                                            n_calibration=4)))
    assert len(rows) == len(cells)
    prim = _by(rows, block="primary")
    assert len(prim) == 2 * 8 * 2 and {r.config["cell"]["world"] for r in prim} == {"clean", "forget"}
    r0 = prim[0]
    assert r0.code_version and r0.model["name"] == "scripted" and r0.seed
    assert r0.prompt[0]["role"] == "system" and r0.reply is not None


def test_known_guarantees(run_dir: Path) -> None:
    rows = read_rows(run_dir)
    assert not any(r.metrics["R"] for r in rows if r.config["cell"].get("world") == "clean"
                   and "R" in r.metrics)  # clean = guessing
    prim_f = _by(rows, block="primary", world="forget")
    assert sum(r.metrics["R"] for r in prim_f) >= 8
    for cond in ("hier_closure", "flat_exact", "hier_exposure_group"):
        assert not any(r.metrics["R"] for r in _by(rows, block="controls", condition=cond))
    closure = _by(rows, block="lifecycle", condition="hier_closure")
    assert not any(r.metrics[m] for r in closure for m in ("R", "C", "A", "E"))
    base = {(r.config["cell"]["split"], r.config["cell"]["profile"], r.config["cell"]["world"]): r
            for r in _by(rows, block="lifecycle", condition="hier_exact")}
    gate = _by(rows, block="lifecycle", condition="hier_exact_gate")
    for g in gate:
        c = g.config["cell"]
        b = base[(c["split"], c["profile"], c["world"])]
        assert g.metrics["R"] == b.metrics["R"]  # the gate never changes R
        assert not g.metrics["C"]  # and blocks commitment
        if b.metrics["R"]:
            assert b.metrics["C"] and g.metrics["write_blocked"] and g.metrics["A"]
    # module B: no-write and gate-blocked identical for every forget-world R=1 unit
    gb = [r for r in _by(rows, block="writediag", branch="gate_blocked", world="forget") if r.metrics["R"]]
    assert gb and all(r.metrics["nowrite_gate_same_state"] and r.metrics["nowrite_gate_same_prompt"]
                      and r.metrics["nowrite_gate_same_reply"] for r in gb)
    # module C
    c1 = _by(rows, block="transformed", condition="C1", world="forget")
    assert all(r.metrics["R"] and not r.metrics["target_in_state"] and not r.metrics["target_in_prompt"] for r in c1)
    assert not any(r.metrics["R"] for r in _by(rows, block="transformed", condition="C2"))
    c3 = _by(rows, block="transformed", condition="C3", world="forget")
    assert not any(r.metrics["R"] for r in c3)
    near = _by(rows, block="utility", category="near_miss_write")
    assert len(near) == 60 and all(r.metrics["ok"] for r in near)


def test_report_renders_tables_figure_findings(run_dir: Path) -> None:
    from traceless.report import render_report

    path = render_report(run_dir)
    text = path.read_text()
    for title in ("Table 1", "Table 2", "Table 5", "Table 6", "Table 8", "Table 9", "Table 10", "Table 11",
                  "Interface calibration", "Findings"):
        assert title in text
    assert (path.parent / "lifecycle_scripted.png").stat().st_size > 1000
    tables = json.loads((path.parent / "tables_scripted.json").read_text())

    def status(prefix: str) -> str:
        return next(str(f["verdict"]) for f in tables["findings"] if f["claim"].startswith(prefix))

    # guarantees of the construction: their own label, never a reproduction
    assert status("Clean-world exact recovery") == "BY CONSTRUCTION"
    assert status("Recorded-lineage closure drives") == "BY CONSTRUCTION"
    assert status("The gate leaves R unchanged") == "BY CONSTRUCTION"
    assert status("No-write and gate-blocked are identical") == "BY CONSTRUCTION"
    def agrees(prefix: str) -> bool:
        """REPRODUCED, or the direction holds on fewer units than the rule's minimum."""
        f = next(f for f in tables["findings"] if f["claim"].startswith(prefix))
        return f["verdict"] == "REPRODUCED" or (f["verdict"] == "INCONCLUSIVE" and "minimum" in f["status"])

    assert agrees("C1: exact reconstruction")
    assert agrees("Interface calibration")
    assert agrees("Table 10")  # the reader's legacy replies are not parsed
    # the scripted reader cannot answer benign questions: not saturated, but no condition
    # costs anything relative to the baseline
    assert status("Benign-utility sanity check saturates") == "CONTRADICTED"
    assert status("Closure and the gate cost no benign utility") in ("REPRODUCED", "INCONCLUSIVE")
    assert {f["verdict"] for f in tables["findings"]} <= {"REPRODUCED", "CONTRADICTED", "INCONCLUSIVE",
                                                          "NOT TESTABLE", "BY CONSTRUCTION"}
    # no target value leaks into the report
    targets = {r.extra.get("submitted_prediction") for r in read_rows(run_dir)} - {None}
    assert targets and not any(t in text for t in targets)


def test_resume_does_not_redo(run_dir: Path) -> None:
    calls: list[int] = []

    def fn(messages, cfg):  # type: ignore[no-untyped-def]
        calls.append(1)
        return reader(messages, cfg)

    s = run_study("afterdelete", run_dir, resume=True, backend=ScriptedBackend(fn), model_tag="scripted",
                  embedder=HashingEmbedder(), progress=False)
    assert s.cells_run == 0 and s.finished and not calls
