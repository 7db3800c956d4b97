"""The frontier study's probe cells in the audit's one row schema (``AuditRow.from_cell``):
the cells of a fresh run and the rows of the committed bundle (written before the frontier
ran on the audit engine) map field by field."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from test_frontier import cfg, run

from traceless.audit import AuditRow
from traceless.studies import read_manifest, read_rows

BUNDLE = Path(__file__).resolve().parents[2] / "docs" / "results" / "frontier-qwen"


def test_fresh_frontier_cells_read_as_audit_rows(tmp_path: Path) -> None:
    run(tmp_path / "fr", cfg(n=1, S=[0, 1], modes=["raw_only", "full_purge"]))
    rows = read_rows(tmp_path / "fr")
    mapped = {r.key: AuditRow.from_cell(r) for r in rows}
    assert all(a is None for k, a in mapped.items() if "/pr/" in k)  # a PR question is not a probe
    probes = {k: a for k, a in mapped.items() if a is not None}
    assert len(probes) == sum("/pr/" not in r.key for r in rows)
    a = probes["inst=tiny_pet/frs/raw_only/summary@S=1/k=6/indirect:0"]
    assert (a.system, a.profile, a.phase, a.view, a.level, a.wording) == (
        "traceless", "tiny_pet", "raw_only", "summary", "indirect", 0)
    assert a.config["cell"]["S"] == 1 and a.config["cell"]["k"] == 6 and a.run_id == "frontier-leaky"
    b = probes["inst=tiny_pet/aer/S=0/k=25/direct:0"]
    assert (b.phase, b.view, b.extracted) == ("before", "agent", True)
    src = next(r for r in rows if r.key == "inst=tiny_pet/aer/S=0/k=25/direct:0")
    assert b.prompt == src.prompt and b.reply == src.reply and b.context_ids == src.extra["context_ids"]
    assert b.prompt_tokens == src.timing["prompt_tokens"] > 0
    assert Counter(p.phase for p in probes.values()) == {"before": 2 * 2 * 3, "raw_only": 18, "full_purge": 18}
    assert {p.view for p in probes.values() if p.phase != "before"} == {"agent", "raw", "summary"}


def test_committed_bundle_rows_read_as_audit_rows() -> None:
    man = read_manifest(BUNDLE)
    rows = read_rows(BUNDLE)
    probes = [a for a in map(AuditRow.from_cell, rows) if a is not None]
    cfg_ = man.config
    n_probes = len(cfg_["probe_levels"]) * cfg_["wordings"]
    per_inst = (len(cfg_["S"]) * len(cfg_["k"]) * n_probes  # before: aer cells
                + len(cfg_["modes"]) * n_probes * (len(cfg_["S"]) * len(cfg_["k"])  # primary FRS
                                                   + len(cfg_["frs_k"]) * len(cfg_["S"])))  # raw + summary@S≥1
    assert len(probes) == cfg_["n"] * per_inst
    assert {p.phase for p in probes} == {"before", *cfg_["modes"]}
    assert all(p.prompt is None and p.reply is None for p in probes)  # the bundle keeps no text
    assert 0 < sum(p.extracted for p in probes) < len(probes)
