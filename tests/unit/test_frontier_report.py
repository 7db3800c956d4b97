"""The frontier report: tables, CSV, figure and findings from a scripted run; several
models in one dir; no canary in any report file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from test_frontier import cfg, leaky  # noqa: E402  (same folder)

from traceless.errors import StudyError, UnknownNameError
from traceless.models import ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend
from traceless.report import render_report
from traceless.report._frontier import findings, frontier_numbers, guarantees
from traceless.studies import ResultRow, read_manifest, read_rows, run_study


def prudent(messages: list[ChatMessage], c: GenerationConfig) -> str:
    """Never repeats a canary; answers from memory like `leaky`."""
    reply = leaky(messages, c)
    return "I cannot share stored secrets." if "token is" in reply else reply


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rep") / "run"
    c = cfg(k=[1, 3, 25])
    for name, fn in (("leaky", leaky), ("prudent", prudent)):
        run_study("frontier", out, c, resume=True, backend=ScriptedBackend(fn, name=name), model_tag=name,
                  embedder=HashingEmbedder(), progress=False)
    return out


def test_report_files_and_tables(two_models: Path) -> None:
    p = render_report(two_models)
    d = p.parent
    assert p.name == "report.md" and d == two_models / "report"
    for f in ("table2.md", "table2.csv", "figure1.png", "numbers.json"):
        assert (d / f).stat().st_size > 0, f
    text = p.read_text()
    assert "leaky S=0" in text and "prudent S=2" in text
    assert "## Findings" in text and "### leaky (N=3)" in text and "### prudent (N=3)" in text
    with (d / "table2.csv").open() as f:
        rows = list(csv.DictReader(f))
    by = {(r["model"], r["S"], r["metric"]): float(r["value"]) for r in rows}
    # leaky repeats any canary it sees: AER_max = 1 at S=0 (the direct probe retrieves the canary
    # turn at every k in this fixture); prudent never leaks
    assert by[("leaky", "0", "AER ↓ (AER_max, avg over k)")] == 1.0
    assert by[("prudent", "0", "AER ↓ (AER_max, avg over k)")] == 0.0
    assert by[("prudent", "1", "FRS_worst noop")] == 0.0
    assert by[("leaky", "0", "FRS_worst raw_only")] == 0.0
    assert by[("leaky", "1", "FRS_worst raw_only")] == 1.0  # the S=1 key facts keep the canary
    nums = json.loads((d / "numbers.json").read_text())
    assert set(nums) == {"leaky", "prudent"}
    # no canary value anywhere in the report
    canaries = {r.extra["canary"] for r in read_rows(two_models)}
    for f in d.iterdir():
        if f.suffix in (".md", ".csv", ".json"):
            body = f.read_text()
            assert not any(cv in body for cv in canaries), f


def test_numbers_hand_checked(two_models: Path) -> None:
    man = read_manifest(two_models)
    rows = read_rows(two_models, "leaky")
    x = frontier_numbers(rows, man.config, "leaky", man.runs["leaky"].identity, 0, 200)
    assert x.n == 3 and x.n_partial == 0
    # PR at k: mean over instances of the PR rule on the stored rows
    for s in x.S:
        for k in x.k:
            vals = [r.metrics["correct"] for r in rows if f"/pr/S={s}/k={k}/" in r.key]
            assert vals
            assert x.pr_k[s][k] == pytest.approx(np.mean(vals))
    # AER(S,k) = max over levels of the instance mean
    for k in x.k:
        per_level = {lv: np.mean([r.metrics["extracted"] for r in rows if f"/aer/S=0/k={k}/{lv}:" in r.key])
                     for lv in x.levels}
        assert x.aer_k[0][k] == pytest.approx(max(per_level.values()))
    assert x.delta_s[2].value == pytest.approx(x.aer[0].value - x.aer[2].value)
    lines, built = findings(x), guarantees(x)
    assert any("full_purge drives FRS_worst to zero" in ln and ln.startswith("**BY CONSTRUCTION") for ln in built)
    # 3 instances are below the rule's minimum of 6: the direction agrees, the verdict waits
    assert any("S=1: raw_only is indistinguishable" in ln and ln.startswith("**INCONCLUSIVE (n=3 < 6 minimum")
               for ln in lines)
    assert any("S=2: raw_only is indistinguishable" in ln and ln.startswith("**NOT TESTABLE") for ln in lines)
    # the mechanical guarantee, instance by instance: leaky's S=1 key facts keep the canary in
    # every instance and raw_only leaves all of them; its S=2 sentences never kept it
    assert x.held["noop"]["summary@S=1"] == 3 and x.kept_raw_only == {1: 3, 2: 0}
    assert x.held["full_purge"] == {"raw": 0, "summary@S=1": 0, "summary@S=2": 0}
    assert any(ln.startswith("**BY CONSTRUCTION") and "S=1 (mechanical guarantee" in ln and "in 3 of those 3" in ln
               for ln in built)
    assert any(ln.startswith("**NOT TESTABLE (no summary kept the canary)** — S=2 (mechanical guarantee")
               for ln in lines)


def test_partial_instances_are_excluded(tmp_path: Path) -> None:
    out = tmp_path / "part"
    run_study("frontier", out, cfg(), backend=ScriptedBackend(leaky, name="leaky"), model_tag="leaky",
              embedder=HashingEmbedder(), progress=False, max_cells=200)
    man = read_manifest(out)
    x = frontier_numbers(read_rows(out), man.config, "leaky", {}, 0, 50)
    assert x.n == 1 and x.n_partial == 1
    assert "1 complete instances (1 partial, excluded)" in render_report(out).read_text()


def test_report_errors(tmp_path: Path) -> None:
    with pytest.raises(StudyError, match="not a study results dir"):
        render_report(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({
        "study": "nope", "study_version": "1", "config": {}, "created": 0, "code_version": "x"}))
    with pytest.raises(UnknownNameError, match="unknown report 'nope'"):
        render_report(tmp_path)


def test_pr_is_rescored_with_the_current_rule() -> None:
    from traceless.report._frontier import _pr_correct

    def row(reply: str, cosine: float, stored: bool) -> ResultRow:
        return ResultRow(model_tag="m", key="k", group="g", config={}, seed=0, model={}, code_version="x",
                         prompt=None, reply=reply, timing={}, metrics={"correct": stored, "cosine": cosine},
                         extra={"expected": "4"}, created=0.0)

    assert _pr_correct(row("I own four bikes.", 0.2, False), 0.5)  # number words: rescored correct
    assert not _pr_correct(row("I own one bike.", 0.2, False), 0.5)
    assert _pr_correct(row("no idea", 0.51, True), 0.5)
    assert not _pr_correct(row("no idea", 0.50, True), 0.5)


def launder(messages: list[ChatMessage], c: GenerationConfig) -> str:
    """Like `leaky`, but its key facts drop any line holding a token: S=1 launders the canary."""
    user = messages[-1].content
    if user.startswith("Below are messages a user sent") and "key personal facts" in user:
        return "\n".join(ln for ln in leaky(messages, c).splitlines() if "token" not in ln) or "- nothing"
    return leaky(messages, c)


def test_primary_frs_is_the_agent_view_not_the_tier_views(tmp_path: Path) -> None:
    """Issue #12.2: with a summarizer that launders the canary, the tier-restricted FRS_worst
    of noop at S=1 is 1 (the raw view still leaks), while the paper's FRS (the agent reads its
    S=1 view) is 0, equal to the frontier AER at S=1 as in the paper's Table 2."""
    out = tmp_path / "lau"
    run_study("frontier", out, cfg(k=[1, 25]), backend=ScriptedBackend(launder, name="launder"),
              model_tag="launder", embedder=HashingEmbedder(), progress=False)
    man = read_manifest(out)
    x = frontier_numbers(read_rows(out), man.config, "launder", {}, 0, 50)
    assert x.n == 3 and x.has_primary_frs
    assert x.frs_worst_view["noop"][1].value == 1.0
    assert x.frs_worst["noop"][1].value == 0.0
    for s in x.S:  # noop changes nothing: post-deletion AER with the S view = the frontier AER
        assert x.frs_worst["noop"][s].value == pytest.approx(x.aer[s].value)
    # attribution: at S=0 every extraction came from a raw chunk
    assert x.frs_origin["noop"][0]["raw"].value == 1.0 and x.frs_origin["noop"][0]["summary"].value == 0.0
    assert x.frs("noop", 1) is x.frs_worst["noop"][1]
    text = render_report(out).read_text()
    assert "Forgetting residue by origin tier (primary)" in text and "tier view (secondary)" in text


def test_origin_attribution_counts_the_carrying_chunks_tier(two_models: Path) -> None:
    """leaky's S=1 key facts keep the canary: noop's residue at S=1 is attributed to the
    summary tier; after raw_only the raw tier carries nothing at S=0."""
    man = read_manifest(two_models)
    x = frontier_numbers(read_rows(two_models, "leaky"), man.config, "leaky", {}, 0, 50)
    assert x.frs_origin["noop"][1]["summary"].value == 1.0 and x.frs_origin["noop"][1]["raw"].value == 0.0
    assert x.frs_worst["raw_only"][0].value == 0.0 and x.frs_worst["raw_only"][1].value == 1.0
    assert all(x.frs_origin[m][s]["unattributed"].value == 0.0 for m in x.modes for s in x.S)


def test_issue_example_finding_is_inconclusive() -> None:
    """Δ_S = 0.50 [0.00, 1.00] on two conversations: INCONCLUSIVE, not NOT REPRODUCED."""
    from traceless.metrics import CI
    from traceless.report._frontier import FrontierNumbers

    def ci(v: float, lo: float, hi: float) -> CI:
        return CI(value=v, low=lo, high=hi, n=2)

    x = FrontierNumbers("m", {}, 2, 0, [0, 1], [6], ["direct"], [])
    x.aer = {0: ci(0.5, 0.0, 1.0), 1: ci(0.0, 0.0, 0.0)}
    x.pr = {0: ci(0.5, 0.0, 1.0), 1: ci(0.5, 0.0, 1.0)}
    x.delta_s = {1: ci(0.5, 0.0, 1.0)}
    x.pr_drop = {1: ci(0.0, -0.5, 0.5)}
    x.in_context_k = {0: {6: 1.0}, 1: {6: 0.0}}
    x.pr_k, x.aer_k = {0: {6: 0.5}, 1: {6: 0.5}}, {0: {6: 0.5}, 1: {6: 0.0}}
    x.pua = {0: ci(0.25, 0.0, 0.5), 1: ci(0.5, 0.0, 1.0)}
    (line,) = [ln for ln in findings(x) if "S=1 reduces AER" in ln]
    assert line.startswith("**INCONCLUSIVE (n=2 < 6 minimum; n ≈ ") and "Δ_S(S=1) = 0.50 [0.00, 1.00]" in line


def test_version1_dirs_still_report_with_tier_views(two_models: Path) -> None:
    """A dir written before the primary FRS existed (no agent@S cells, no frs_agent_k in its
    config) is still reported: Table 2 uses the tier views, labelled, and the §3.3 claims on
    the paper's FRS are NOT TESTABLE."""
    man = read_manifest(two_models)
    cfg = {k: v for k, v in man.config.items() if k != "frs_agent_k"}
    rows = [r for r in read_rows(two_models, "leaky") if "/agent@S=" not in r.key]
    x = frontier_numbers(rows, cfg, "leaky", {}, 0, 50)
    assert x.n == 3 and not x.has_primary_frs and not x.frs_worst
    assert x.frs("raw_only", 1) is x.frs_worst_view["raw_only"][1]
    assert any("the dir predates the primary FRS" in ln for ln in findings(x))
    # the purge guarantee is still checked, on the tier views' context counts
    assert any("full_purge drives FRS_worst to zero" in ln and ln.startswith("**BY CONSTRUCTION")
               for ln in guarantees(x))
    from traceless.report._frontier import _table2

    _, md, _ = _table2([x])
    assert any(r[0] == "FRS_worst noop (tier views)" for r in md)
