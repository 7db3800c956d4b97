"""Module B (and Table 10) generate each unit's three branch activations once: the branches of a
unit share one group, so a group never regenerates the other branches' probes (it did: one group
per branch, each generating all three, 3× the model calls of the paper's protocol)."""

from __future__ import annotations

from pathlib import Path

from test_afterdelete import reader

from traceless.models import ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend
from traceless.studies import read_rows, run_study
from traceless.studies.afterdelete import AfterDelete, AfterDeleteConfig


def _counting() -> tuple[ScriptedBackend, list[str]]:
    calls: list[str] = []

    def fn(messages: list[ChatMessage], cfg: GenerationConfig) -> str:
        calls.append(messages[-1].content)
        return reader(messages, cfg)

    return ScriptedBackend(fn, name="reader"), calls


def test_branches_of_a_unit_share_one_group() -> None:
    cfg = AfterDeleteConfig(n=2, n_modules=2, splits=["iid"], blocks=["writediag", "legacyact"], batch=8)
    cells = list(AfterDelete().cells(cfg))
    groups: dict[str, set[str]] = {}
    for c in cells:
        groups.setdefault(c.group, set()).add(c.params["branch"])
    assert len(groups) == 2 and all(b == {"no_write", "write_allowed", "gate_blocked"} for b in groups.values())


def test_module_b_asks_each_branch_activation_once(tmp_path: Path) -> None:
    backend, calls = _counting()
    out = tmp_path / "b"
    run_study("afterdelete", out, {"n": 2, "n_modules": 2, "splits": ["iid"], "blocks": ["writediag"],
                                   "writediag_auditor": "direct"},
              backend=backend, model_tag="m", embedder=HashingEmbedder(), progress=False)
    rows = read_rows(out)
    units = {(r.config["cell"]["profile"], r.config["cell"]["world"]) for r in rows}
    assert len(rows) == 3 * len(units) == 12
    # one DIRECT audit query per unit and one uncached activation per (unit, branch): nothing regenerated
    assert len(calls) == len(units) + 3 * len(units), len(calls)
    for r in rows:  # the identity check compares the very generations the cells hold
        if r.config["cell"]["branch"] == "gate_blocked":
            assert r.metrics["nowrite_gate_same_state"] and r.metrics["nowrite_gate_same_reply"]
