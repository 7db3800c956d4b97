"""The replay study end to end on the toy KV backend (fast): every suite we can load, every
operator, resume, and the report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from traceless.errors import InputFormatError, StudyError
from traceless.models import ChatMessage, GenerationConfig
from traceless.runtime import ToyKVBackend
from traceless.studies import derive_seed, read_rows, run_study
from traceless.studies.replay import SUITES, ReplayConfig, agentdojo_status, leaked, place_target, probes_for


def toy_reply(msgs: list[ChatMessage], cfg: GenerationConfig, rng: np.random.Generator) -> str:
    """A leaky toy agent: it repeats whatever token/brand it saw when asked, picks remembered brands."""
    seen = " ".join(m.content for m in msgs[:-1])
    last = msgs[-1].content if msgs else ""
    words = [w.strip(".,") for w in seen.split()]
    secret = next((w for w in words if w.count("-") == 2 and w[:2].isupper()), None)
    brand = next((w for w in ("Aerolux", "SkyJet", "NovaAir", "BlueCrest", "Quintara", "Drivo", "Kafeo") if w in seen), None)
    extra = f" x{int(rng.integers(0, 50))}" if cfg.temperature > 0 else ""
    if "letter only" in last:
        opts = [ln for ln in last.splitlines() if ") " in ln]
        hit = next((o[0] for o in opts if brand and brand in o), "A")
        return hit
    if any(k in last.lower() for k in ("token", "forget", "summarize", "debug", "exact words", "always use")):
        return f"It was {secret or brand or 'nothing'}{extra}"
    return f"Sure {last.split()[0] if last.split() else ''}{extra}"


def lme_fixture(path: Path, n: int = 3) -> Path:
    recs = []
    for i in range(n):
        sessions = [[{"role": "user", "content": f"I moved to town {i} and bought a red bike.", "has_answer": True},
                     {"role": "assistant", "content": "Nice!"},
                     {"role": "user", "content": "I also like hiking on weekends.", "has_answer": False}],
                    [{"role": "user", "content": "Tomorrow I visit my sister.", "has_answer": False},
                     {"role": "user", "content": "Any tips for packing light?", "has_answer": False}]]
        recs.append({"question_id": f"q{i}", "question": "What colour is my bike?", "answer": "red",
                     "haystack_sessions": sessions, "haystack_session_ids": ["a", "b"]})
    path.write_text(json.dumps(recs))
    return path


def long_lme_fixture(path: Path, n: int = 3, turns: int = 18) -> Path:
    """LongMemEval-shaped instances with enough user turns for 16-step episodes."""
    recs = []
    for i in range(n):
        sess = [[{"role": "user", "content": f"Note {j} from me in town {i}: I went hiking and cooked pasta.",
                  "has_answer": j == 2} for j in range(k, k + turns // 2)] for k in (0, turns // 2)]
        recs.append({"question_id": f"long{i}", "question": "What did I cook?", "answer": "pasta",
                     "haystack_sessions": sess, "haystack_session_ids": ["a", "b"]})
    path.write_text(json.dumps(recs))
    return path


@pytest.fixture
def cfg(tmp_path: Path) -> ReplayConfig:
    suites = ["longmemeval", "toolsandbox"] + (["agentdojo"] if agentdojo_status() is None else [])
    return ReplayConfig(suites=suites, episodes=2, steps=4, samples=2, longmemeval=str(lme_fixture(tmp_path / "lme.json")),
                        depths=[0, 1])


def test_study_runs_every_operator_and_resumes(tmp_path: Path, cfg: ReplayConfig) -> None:
    be = ToyKVBackend(toy_reply)
    out = tmp_path / "run"
    s = run_study("replay", out, cfg, backend=be, model_tag="toy", progress=False, max_cells=5)
    assert s.cells_run == 5 and not s.finished
    s = run_study("replay", out, None, resume=True, backend=be, model_tag="toy", progress=False)
    assert s.finished and s.cells_skipped == 5
    rows = read_rows(out)
    main = [r for r in rows if r.key.startswith("main/")]
    assert {r.extra["operator"] for r in main} == set(cfg.operators)
    by = {(r.extra["episode"], r.extra["operator"]): r.metrics for r in main}
    for (ep, op), m in by.items():
        if op in ("B7", "B9", "B5p"):
            assert m["equal_ref_tokens"] and m["any_leak"] is False and m["cad"] == 0.0, (ep, op)
        if op in ("B7", "B9"):
            assert m["bound_met"] and m["recomputed_tokens"] < by[(ep, "B5")]["recomputed_tokens"]
        if op in ("B0", "B1"):
            assert m["any_leak"], (ep, op)
        if op == "B2":
            assert m["leak_introspection"], ep
    assert all(by[(ep, "B7")]["recomputed_tokens"] < by[(ep, "B5p")]["recomputed_tokens"]
               for ep, op in by if op == "B7" and by[(ep, "B7")]["bound"] < 4)
    for r in main:  # B4 removed the replies of τ…T: each counts as a missing action (distance 1)
        if r.extra["operator"] == "B4":
            removed = r.extra["steps"] - r.extra["tau"] + 1
            assert r.metrics["cad"] >= removed / (removed + 2), r.key
    sweep = sorted((r for r in rows if r.key.startswith("sweep/toolsandbox")), key=lambda r: r.metrics["tau"])
    assert [r.metrics["B7_transitions"] for r in sweep] == [4, 3, 2, 1]
    assert all(r.metrics["B7_equal_B5"] for r in sweep)
    toks = [r.metrics["B7_tokens"] for r in sweep]
    assert toks == sorted(toks, reverse=True)
    stoch = [r for r in rows if r.key.startswith("stoch/")]
    assert stoch and all(r.metrics["equal_tokens"] for r in stoch)
    # rows never name the secret outside the raw replies (data), e.g. not in receipts
    for r in main:
        assert "hmac:" in r.extra["receipt"]["target"]["ref"]


def test_report_renders_tables_figure_findings(tmp_path: Path, cfg: ReplayConfig) -> None:
    from traceless.report._replay import render_replay

    out = tmp_path / "run"
    run_study("replay", out, cfg, backend=ToyKVBackend(toy_reply), model_tag="toy", progress=False)
    rep = render_replay(out)
    text = rep.read_text()
    for h in ("Table 1", "Table 2", "Table 3", "Table 4", "Findings"):
        assert h in text
    assert "smallest attainable p with n=" in text
    assert (rep.parent / "replay_recompute_vs_tau.png").stat().st_size > 1000
    rows = read_rows(out)
    secrets = {r.extra.get("episode") for r in rows}
    assert secrets


def test_place_target_and_probes() -> None:
    eps = SUITES.get("toolsandbox")(1, 4, np.random.default_rng(0))
    ep = place_target(eps[0], 3)
    assert ep.tau == 3 and sum(ep.request.span in o.text for o in ep.observations) == 1
    ps = probes_for(ep.request, ep.task_probe)
    assert [p.name for p in ps] == ["direct", "paraphrase", "jailbreak", "introspection", "completion", "task"]
    assert all(ep.request.secret not in p.text for p in ps)
    assert leaked("Aerolux", "we use aerolux") and not leaked("Aerolux", "no")


def test_longmemeval_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question_id": "x"}]))
    with pytest.raises(InputFormatError, match="record 0 has no field 'question'"):
        SUITES.get("longmemeval")(1, 4, np.random.default_rng(0), path=str(bad))
    with pytest.raises(InputFormatError, match="none.json: no such file"):
        SUITES.get("longmemeval")(1, 4, np.random.default_rng(0), path=str(tmp_path / "none.json"))


def test_study_refuses_a_backend_without_kv(tmp_path: Path) -> None:
    from traceless.models import ScriptedBackend

    with pytest.raises(StudyError, match="KV-cache access"):
        run_study("replay", tmp_path / "r", ReplayConfig(suites=["toolsandbox"], episodes=1, sweep=False, depths=[]),
                  backend=ScriptedBackend(default="ok"), model_tag="s", progress=False)


def test_cad_scores_executed_actions_with_removed_ones_missing() -> None:
    from traceless.runtime import AgentRuntime, ForgetRequest, Observation, forget_state
    from traceless.studies.replay import cad, executed_actions

    obs = [Observation(obs_id=f"o{i}", text=f"step {i}" + (" my code is ZZ-TOP-1." if i == 2 else ""),
                       remember=i == 2) for i in range(1, 5)]
    rt = AgentRuntime(ToyKVBackend(lambda m, c, r: "do " + m[-1].content.split()[-1]))
    st = rt.run("e", "sys", obs)
    req = ForgetRequest(span="my code is ZZ-TOP-1.", secret="ZZ-TOP-1", description="my code")
    b4 = forget_state(rt, st, req, "B4")
    b5 = forget_state(rt, st, req, "B5")
    assert executed_actions(b4.state, 2, 4, None) == [None, None, None]
    assert b4.state.trajectory.steps[-1].reply  # the recording still has the replies B4 removed
    ref = executed_actions(b5.state, 2, 4, None)
    assert ref == ["do 2", "do 3", "do 4"]
    assert cad(executed_actions(b4.state, 2, 4, None), ref) == 1.0
    assert cad(ref, ref) == 0.0 and cad(["do 2"], ref) == 2 / 3


def memory_only_agent(msgs: list[ChatMessage], cfg: GenerationConfig, rng: np.random.Generator) -> str:
    """An agent that knows only what memory recalls bring into its context."""
    recalled = " ".join(m.content for m in msgs if m.content.startswith("[memory]"))
    last = msgs[-1].content if msgs else ""
    words = [w.strip(".,|") for w in recalled.split()]
    secret = next((w for w in words if w.count("-") == 2 and w[:2].isupper()), None)
    brand = next((w for w in ("Aerolux", "SkyJet", "NovaAir", "BlueCrest", "Quintara", "Drivo", "Kafeo")
                  if w in recalled), None)
    if "letter only" in last:
        return next((o[0] for o in last.splitlines() if ") " in o and brand and brand in o), "A")
    return f"It was {secret or brand or 'nothing'}"


def test_b1_is_a_real_test_when_memory_propagates(tmp_path: Path) -> None:
    """Memory recalled into later sessions: deleting the record (B1) stops the leak exactly when no
    earlier recall has already copied it into the context (target in the last session)."""
    cfg = ReplayConfig(suites=["toolsandbox"], episodes=4, steps=6, samples=1, operators=["B5", "B0", "B1"],
                       stochastic_episodes=0, sweep=False, depths=[])
    run_study("replay", tmp_path / "r", cfg, backend=ToyKVBackend(memory_only_agent), model_tag="toy", progress=False)
    rows = read_rows(tmp_path / "r")
    by = {(r.extra["episode"], r.extra["operator"]): r for r in rows}
    eps = SUITES.get("toolsandbox")(4, 6, np.random.default_rng(derive_seed(0, "episodes", "toolsandbox")))
    last_session = 0
    for ep in eps:
        tau_session = ep.observations[ep.tau - 1].session
        b0, b1 = by[(ep.episode_id, "B0")].metrics, by[(ep.episode_id, "B1")].metrics
        assert b0["any_leak"], ep.episode_id
        assert b1["any_leak"] is (tau_session < ep.observations[-1].session), ep.episode_id
        last_session += tau_session == ep.observations[-1].session
    assert 0 < last_session < len(eps)  # both cases occur


def test_long_slice_reports_ratio_oracle_and_attainable_p(tmp_path: Path) -> None:
    from traceless.report._replay import render_replay, wilcoxon_min_p

    suites = ["longmemeval", "toolsandbox"] + (["agentdojo"] if agentdojo_status() is None else [])
    cfg = ReplayConfig(suites=suites, main=False, long_episodes=3, samples=2, sweep=False, depths=[],
                       stochastic_episodes=0, oracle_fractions=[0.0, 1.0],
                       longmemeval=str(long_lme_fixture(tmp_path / "lme.json")))
    run_study("replay", tmp_path / "r", cfg, backend=ToyKVBackend(toy_reply), model_tag="toy", progress=False)
    rows = read_rows(tmp_path / "r")
    assert {r.key.split("/")[0] for r in rows} == {"long"} and len(rows) == 3 * len(suites)
    for r in rows:
        m = r.metrics
        assert m["steps"] >= 16 and 4 * m["tau"] > 3 * m["steps"], r.key  # late target
        assert m["bound_met"] and m["B7_equal_B5"] and m["B7_tokens"] < m["B5_tokens"]
        assert m["B7_backend_decodes"] == m["decode_bound"] < m["B5_backend_decodes"]
        zero, full = m["oracle"]["points"]
        assert zero["tokens"] == m["B7_tokens"] and zero["equal_B5"] and full["equal_B5"]
        assert full["certified"] == m["oracle"]["independent"] and full["transitions"] == zero["transitions"]
        assert full["decode_tokens"] <= zero["decode_tokens"]
        assert set(m["indep"]) == {"null", "B7", "B6"}
    assert any(r.metrics["oracle"]["independent"] for r in rows)
    text = render_replay(tmp_path / "r").read_text()
    assert "Long episodes with late targets" in text and "paper: 9.3×" in text and "attribution oracle" in text
    # LongMemEval gets its own row, over its own episodes; the ratio is set by our T and τ (issue 37)
    lme = next(ln for ln in text.splitlines() if ln.startswith("- On LongMemEval alone"))
    assert "(n=3) over episodes" in lme and "**SET BY DESIGN (" in lme and "out of reach by design" in lme  # T=16
    n = len(rows)
    assert f"smallest attainable p with n={n}: {wilcoxon_min_p(n):.3f}" in text
    assert wilcoxon_min_p(3) == pytest.approx(0.25) and wilcoxon_min_p(6) < 0.05 <= wilcoxon_min_p(5)  # type: ignore[operator]
