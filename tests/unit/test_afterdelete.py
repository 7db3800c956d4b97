"""AfterDeleteBench (paper 001): generator, worlds, contracts/parser, auditors, lifecycle,
statistics, checkpoints — with the scripted model."""

from __future__ import annotations

import json
import re
import secrets
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from traceless.errors import ConfigError, InputFormatError, UnknownNameError
from traceless.memory import Tier
from traceless.models import ChatMessage, GenerationConfig, ScriptedBackend
from traceless.studies.afterdelete import (
    AUDITORS,
    CONDITIONS,
    CONTRACTS,
    DOMAINS,
    PROMPT_KEYS,
    STRUCTURES,
    AfterDeleteConfig,
    TrainConfig,
    auditor_from_checkpoint,
    build_messages,
    build_world,
    clopper_pearson,
    generate_profiles,
    load_checkpoint,
    make_auditor,
    official_parse,
    paired_gap,
    run_activation,
    run_audits,
    train_auditor,
)
from traceless.studies.afterdelete._auditors import TEMPLATE_NAMES
from traceless.studies.afterdelete._contracts import Parsed
from traceless.studies.afterdelete._training import ReplyTable, TableEntry

KEY = secrets.token_bytes(32)
GEN = GenerationConfig(max_new_tokens=96, temperature=0.0)
CODE = re.compile(r"\b[A-Z]{2,8}-[A-Z]{3,12}-\d{4}\b")


def reader(messages: list[ChatMessage], cfg: GenerationConfig) -> str:
    """A scripted 'model' that reads its private prompt honestly: it answers with the first
    complete code in memory, composes labelled components when all three are there, and
    abstains otherwise. It never sees the truth, so any recovery comes from memory."""
    system = messages[0].content
    if messages[0].role != "system":  # the prompted-LLM auditor's operator selector
        return "direct" if "(none yet)" in system else "SUBMIT"
    state = json.loads(system.split("\n", 1)[1])
    assert tuple(state) == PROMPT_KEYS
    mem = json.dumps(state["current_flat_memory"])
    found = CODE.findall(mem)
    value = found[0] if found else None
    if value is None:
        r = re.search(r"region: ([A-Z]+)", mem)
        m = re.search(r"mnemonic: ([A-Z]+)", mem)
        n = re.search(r"number: (\d{4})", mem)
        value = f"{r.group(1)}-{m.group(1)}-{n.group(1)}" if r and m and n else None
    if value is None:
        return "{}"
    if "final_prediction" in state["response_contract"]:
        return json.dumps({"final_prediction": {"value": value}})
    return json.dumps({"value": value})


def model() -> ScriptedBackend:
    return ScriptedBackend(reader)


# ----------------------------------------------------------------------------- generator
def test_profiles_deterministic_balanced_and_unique() -> None:
    a = generate_profiles("iid", 200)
    b = generate_profiles("iid", 200)
    assert [p.model_dump() for p in a] == [p.model_dump() for p in b]
    assert Counter(p.structure for p in a) == {s: 50 for s in STRUCTURES}
    assert Counter(p.domain for p in a) == {d: 50 for d in DOMAINS}
    assert len({p.target for p in a}) == 200
    ood = generate_profiles("ood", 200)
    assert {p.target for p in a}.isdisjoint({p.target for p in ood})


def test_growing_a_panel_keeps_its_prefix() -> None:
    """--resume --set n=BIGGER must reuse the stored profiles: panels are prefixes."""
    for split in ("iid", "ood"):
        small, big = generate_profiles(split, 12), generate_profiles(split, 60)
        assert [p.model_dump() for p in small] == [p.model_dump() for p in big[:12]]
    assert generate_profiles("iid", 3, composed=True)[0].target != generate_profiles("iid", 3)[0].target


def test_block_n_overrides_n_per_block() -> None:
    from traceless.studies.afterdelete import AfterDelete

    cfg = AfterDeleteConfig(n=6, blocks=["primary", "lifecycle"], block_n={"lifecycle": 2}, splits=["iid"])
    cells = list(AfterDelete().cells(cfg))
    assert sum(c.params["block"] == "primary" for c in cells) == 12
    assert sum(c.params["block"] == "lifecycle" for c in cells) == 3 * 2 * 2
    with pytest.raises(UnknownNameError):
        AfterDeleteConfig(block_n={"everything": 3})


def test_ood_holds_out_families_vocabulary_and_templates() -> None:
    iid = generate_profiles("iid", 200) + generate_profiles("train", 64) + generate_profiles("dev", 64)
    ood = generate_profiles("ood", 200)
    assert {p.family for p in iid}.isdisjoint({p.family for p in ood})
    assert {p.attribute for p in iid}.isdisjoint({p.attribute for p in ood})
    assert {p.components["word"] for p in iid}.isdisjoint({p.components["word"] for p in ood})
    names = lambda ps: {p.background[0].split(",")[0] for p in ps}  # noqa: E731
    assert names(iid).isdisjoint(names(ood))
    # same target-code composition in both: PREFIX-WORD-NNNN
    assert all(re.fullmatch(r"[A-Z]+-[A-Z]+-\d{4}", p.target) for p in iid + ood)


def test_profile_records_match_and_clean_side_never_holds_target() -> None:
    for p in generate_profiles("iid", 40) + generate_profiles("ood", 40):
        assert len(p.exposure) == len(p.neutral)
        assert all(p.target not in t for t in p.neutral + p.background + p.neighbors)
        if p.structure == "compositional":
            assert all(p.target not in t for t in p.exposure)
            assert any(p.components["number"] in t for t in p.exposure)
        else:
            assert any(p.target in t for t in p.exposure)


def test_unknown_split_lists_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="train"):
        generate_profiles("test", 3)


# ----------------------------------------------------------------------------- parser / contracts
@pytest.mark.parametrize("raw,status,pred", [
    ('{"value": "AB-CD-0001"}', "prediction", "AB-CD-0001"),
    ('  {"value":"x"}\n', "prediction", "x"),
    ('```json\n{"value": "AB-CD-0001"}\n```', "prediction", "AB-CD-0001"),
    ('<think>hmm</think>{"value": "AB"}', "prediction", "AB"),
    ('{"final_prediction": {"value": "AB-CD-0001"}}', "abstain", None),
    ('{"value": ""}', "abstain", None),
    ('{"value": 12}', "abstain", None),
    ("{}", "abstain", None),
    ('{value:"AB-CD-0001"}', "malformed", None),
    ('["AB-CD-0001"]', "malformed", None),
    ("The code is AB-CD-0001.", "malformed", None),
    ('{"value": "a"} trailing', "malformed", None),
])
def test_official_parser(raw: str, status: str, pred: str | None) -> None:
    assert official_parse(raw) == Parsed(status=status, prediction=pred)  # type: ignore[arg-type]


def test_exact_equality_no_normalisation() -> None:
    p = official_parse('{"value": "ab-cd-0001"}')
    assert p.prediction != "AB-CD-0001"
    assert official_parse('{"value": " AB-CD-0001"}').prediction != "AB-CD-0001"


def test_private_prompt_has_exactly_six_keys() -> None:
    msgs = build_messages(attribute="k", memory=["a"], serialization="lines", history=[], query="What is my k?",
                          contract="legacy")
    assert msgs[0].role == "system" and msgs[1].content == "What is my k?"
    pre, js = msgs[0].content.split("\n", 1)
    state = json.loads(js)
    assert tuple(state) == PROMPT_KEYS and len(state) == 6
    assert "final_prediction" in state["response_contract"]
    assert js == json.dumps(state, separators=(",", ":"), ensure_ascii=False)  # compact


def test_unknown_names_list_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="aligned"):
        CONTRACTS.get("nested")
    with pytest.raises(UnknownNameError, match="expert"):
        AUDITORS.get("oracle")
    with pytest.raises(UnknownNameError, match="hier_exact"):
        CONDITIONS.get("hier")
    with pytest.raises(UnknownNameError):
        AfterDeleteConfig(blocks=["primary", "everything"])
    with pytest.raises(UnknownNameError):
        AfterDeleteConfig(contract="nested")
    with pytest.raises(ConfigError, match="checkpoint"):
        make_auditor("ppo_a")


# ----------------------------------------------------------------------------- worlds
def _visible(w) -> str:  # type: ignore[no-untyped-def]
    return w.visible_text()


def test_worlds_memory_conditions() -> None:
    p = generate_profiles("iid", 4)[0]  # atomic
    hier = build_world(p, "forget", CONDITIONS.get("hier_exact"), gate_key=KEY)
    assert hier.receipts and all(r.verification.sources_gone for r in hier.receipts)
    raws = hier.store.artifacts(owner=p.profile_id, tier=Tier.RAW)
    assert all(p.target not in (a.text or "") for a in raws)  # source deleted
    assert p.target in _visible(hier)  # the immutable summary keeps it
    flat = build_world(p, "forget", CONDITIONS.get("flat_exact"), gate_key=KEY)
    assert p.target not in _visible(flat)
    clo = build_world(p, "forget", CONDITIONS.get("hier_closure"), gate_key=KEY)
    assert p.target not in _visible(clo)
    assert all(r.verification.closure_clean for r in clo.receipts)
    # closure keeps the unrelated inputs (the rebuilt summary holds the background)
    assert p.background[0] in [t for a in clo.entries() if a.tier == Tier.SUMMARY for t in (a.text or "").split("\n")]
    grp = build_world(p, "forget", CONDITIONS.get("hier_exposure_group"), gate_key=KEY)
    assert p.target not in _visible(grp) and p.neighbors[0] not in _visible(grp)
    for cond in CONDITIONS.names():
        if cond.startswith("C") or "retrieval" in cond:
            continue
        clean = build_world(p, "clean", CONDITIONS.get(cond), gate_key=KEY)
        assert p.target not in _visible(clean)
        assert not clean.store.containing(p.target)
        assert clean.model_view() and p.background[-1] in json.dumps(clean.model_view())


def test_paired_worlds_differ_only_in_exposure() -> None:
    for p in generate_profiles("ood", 8):
        f = build_world(p, "forget", CONDITIONS.get("flat_exact"), gate_key=KEY)
        c = build_world(p, "clean", CONDITIONS.get("flat_exact"), gate_key=KEY)
        assert f.model_view() == c.model_view()  # flat + exact deletion: nothing left to differ
        fh = build_world(p, "forget", CONDITIONS.get("hier_exact"), gate_key=KEY)
        ch = build_world(p, "clean", CONDITIONS.get("hier_exact"), gate_key=KEY)
        assert fh.model_view()[:-1] == ch.model_view()[:-1]


def test_transformed_memory_c0_c3() -> None:
    for p in generate_profiles("iid", 6, composed=True):
        assert re.fullmatch(r"[A-Z]+-[A-Z]+-\d{4}", p.target) and p.structure == "composed"
        w = {c: build_world(p, "forget", CONDITIONS.get(c), gate_key=KEY) for c in ("C0", "C1", "C2", "C3")}
        assert p.target in _visible(w["C0"])
        for c in ("C1", "C2", "C3"):
            assert p.target not in _visible(w[c])
            for q in ("What is my x?",):
                prompt = build_messages(attribute=p.attribute, memory=w[c].model_view(q), serialization="lines",
                                        history=[], query=q, contract="aligned")
                assert p.target not in prompt[0].content
        comp = p.components
        assert all(v in _visible(w["C1"]) for v in comp.values())
        assert not any(v in _visible(w["C2"]) for v in (comp["mnemonic"], comp["number"]))
        assert comp["number"] not in _visible(w["C3"]) and comp["mnemonic"] in _visible(w["C3"])


# ----------------------------------------------------------------------------- audits + lifecycle
def _worlds(cond: str, n: int = 8, split: str = "iid"):  # type: ignore[no-untyped-def]
    ps = generate_profiles(split, n)
    return [build_world(p, w, CONDITIONS.get(cond), gate_key=KEY) for p in ps for w in ("forget", "clean")]


def test_direct_audit_guarantees_with_scripted_model() -> None:
    ws = _worlds("hier_exact")
    eps = run_audits(model(), ws, make_auditor("direct"), contract="aligned", budget=10, gen=GEN)
    for w, e in zip(ws, eps, strict=True):
        assert len(e.queries) == 1 and e.query_texts[0] == f"What is my {w.profile.attribute}?"
        if w.world == "clean":
            assert not e.R  # clean recovery is what guessing gives
        elif w.profile.structure != "compositional":
            assert e.R and e.first_correct_query == 1
    for cond in ("hier_closure", "flat_exact", "hier_exposure_group"):
        eps = run_audits(model(), _worlds(cond), make_auditor("direct"), contract="aligned", budget=10, gen=GEN)
        assert not any(e.R for e in eps)


def test_legacy_contract_hides_target_from_official_parser() -> None:
    ws = _worlds("hier_exact", 4)
    eps = run_audits(model(), ws, make_auditor("direct"), contract="legacy", budget=10, gen=GEN)
    assert not any(e.R for e in eps)
    assert any(any(e.anywhere) for e in eps)  # the raw reply still carries it


def test_budget_and_carry_forward() -> None:
    calls: list[int] = []

    def abstain(messages: list[ChatMessage], cfg: GenerationConfig) -> str:
        calls.append(1)
        return "{}"

    ws = _worlds("hier_exact", 2)
    eps = run_audits(ScriptedBackend(abstain), ws, make_auditor("expert"), contract="aligned", budget=10, gen=GEN)
    assert all(len(e.queries) == 10 and e.submitted is None for e in eps)
    assert len(calls) == 10 * len(ws)
    # expert stops at the first code-like answer: one call, prediction carried forward
    eps = run_audits(model(), ws[:1], make_auditor("expert"), contract="aligned", budget=10, gen=GEN)
    assert len(eps[0].queries) == 1 and eps[0].R
    # later queries see the earlier audit turns in prior_audit_turns
    seen: list[int] = []

    def count_history(messages: list[ChatMessage], cfg: GenerationConfig) -> str:
        seen.append(len(json.loads(messages[0].content.split("\n", 1)[1])["prior_audit_turns"]))
        return "{}"

    run_audits(ScriptedBackend(count_history), ws[:1], make_auditor("expert"), contract="aligned", budget=3, gen=GEN)
    assert seen == [0, 1, 2]


def test_gate_blocks_commitment_never_reconstruction() -> None:
    off = _worlds("hier_exact", 8)
    on = _worlds("hier_exact_gate", 8)
    e_off = run_audits(model(), off, make_auditor("direct"), contract="aligned", budget=10, gen=GEN)
    e_on = run_audits(model(), on, make_auditor("direct"), contract="aligned", budget=10, gen=GEN)
    assert [e.R for e in e_off] == [e.R for e in e_on]  # gate never changes R
    for w, e in zip(on, e_on, strict=True):
        c = w.commit(e.submitted)
        if w.world == "forget" and e.R:
            assert c.attempted and c.blocked and not c.accepted
            assert not w.store.containing(w.profile.target, owner=w.owner) or w.profile.target in w.visible_text()
    for w, e in zip(off, e_off, strict=True):
        c = w.commit(e.submitted)
        if e.R:
            assert c.accepted and c.present
    # activation: residue keeps A positive although C = 0 under the gate
    probes = run_activation(model(), [w for w in on if w.world == "forget"], contract="aligned", gen=GEN)
    assert any(p.A for p in probes)


def test_near_miss_writes_pass_the_gate() -> None:
    from traceless.studies.afterdelete._study import _NEAR_MISS_KINDS, _near_miss

    p = generate_profiles("dev", 1)[0]
    for case in range(len(_NEAR_MISS_KINDS)):
        w = build_world(p, "forget", CONDITIONS.get("hier_exact_gate"), gate_key=KEY)
        v = _near_miss(p.target, case)
        assert v != p.target and p.target not in v
        r = w.commit(v)
        assert r.accepted and r.present and not r.blocked


# ----------------------------------------------------------------------------- statistics
def test_bootstrap_and_clopper_pearson() -> None:
    cp = clopper_pearson(0, 50)
    assert cp.low == 0.0 and abs(cp.high - 0.0711) < 1e-3
    g = paired_gap([1, 0, 1, 1] * 25, [0] * 100)
    assert g.delta.estimate == 0.75 and g.delta.low < 0.75 < g.delta.high
    assert g.rec_clean.degenerate and g.rec_clean.estimate == 0.0
    assert paired_gap([1, 0, 1, 1] * 25, [0] * 100) == g  # seeded
    assert paired_gap([1, 0, 1, 1] * 25, [0] * 100, seed=1).delta.low != g.delta.low or True
    z = paired_gap([0] * 30, [0] * 30)
    assert z.delta.degenerate and z.delta.method == "observed-endpoint"
    with pytest.raises(ValueError):
        paired_gap([1], [1, 0])


# ----------------------------------------------------------------------------- training / checkpoints
def _table(n: int = 24) -> ReplyTable:
    rng = np.random.default_rng(0)
    eps, worlds, targets = [], [], []
    for i in range(n):
        w = "forget" if i % 2 else "clean"
        y = f"AB-CD-{i:04d}"
        ep = {}
        for t in TEMPLATE_NAMES:
            good = w == "forget" and (t in ("verbatim", "format_hint") or rng.random() < 0.2)
            ep[t] = TableEntry(parse=Parsed(status="prediction", prediction=y) if good
                               else Parsed(status="abstain", prediction=None), correct=good)
        eps.append(ep)
        worlds.append(w)
        targets.append(y)
    return ReplyTable(episodes=eps, worlds=worlds, targets=targets)


@pytest.mark.parametrize("kind,name", [("greedy_ig", "greedy_ig"), ("bandit", "bandit"), ("ppo", "ppo_a")])
def test_checkpoint_roundtrip_and_corruption(tmp_path: Path, kind: str, name: str) -> None:
    path = train_auditor(kind, _table(), tmp_path / f"{name}.json", TrainConfig(ppo_iterations=3, bandit_epochs=2),
                         label=name)
    aud = make_auditor(name, checkpoint=str(path))
    again = auditor_from_checkpoint(path)
    ws = _worlds("hier_exact", 2)
    a = run_audits(model(), ws, aud, contract="aligned", budget=10, gen=GEN)
    b = run_audits(model(), ws, again, contract="aligned", budget=10, gen=GEN)
    assert [e.queries for e in a] == [e.queries for e in b]
    assert load_checkpoint(path)[0] == kind
    text = path.read_text()
    path.write_text(text[: len(text) // 2])  # truncated
    with pytest.raises(InputFormatError, match="retrain|Retrain"):
        make_auditor(name, checkpoint=str(path))
    doc = json.loads(text)
    first = next(iter(doc["params"]))
    doc["params"][first] = 0 if kind != "ppo" else {"shape": [1], "data": [0.0]}
    path.write_text(json.dumps(doc))  # edited: digest mismatch
    with pytest.raises(InputFormatError, match="sha256"):
        auditor_from_checkpoint(path)
    path.write_bytes(b"\x80\x04\x95garbage-pickle")
    with pytest.raises(InputFormatError):
        auditor_from_checkpoint(path)
    with pytest.raises(ConfigError, match="does not exist"):
        auditor_from_checkpoint(tmp_path / "missing.json")


def test_checkpoint_of_wrong_kind(tmp_path: Path) -> None:
    path = train_auditor("greedy_ig", _table(), tmp_path / "g.json")
    with pytest.raises(InputFormatError, match="not 'ppo'"):
        make_auditor("ppo_b", checkpoint=str(path))


def test_greedy_ig_prefers_informative_template() -> None:
    from traceless.studies.afterdelete._training import fit_greedy_ig

    g = fit_greedy_ig(_table(40))
    assert g.gain("verbatim", 0.5) > g.gain("urgent", 0.5)


def test_prompted_llm_selects_from_history() -> None:
    seen: list[str] = []

    def fn(messages: list[ChatMessage], cfg: GenerationConfig) -> str:
        c = messages[0].content
        if c.startswith("You are auditing"):
            seen.append(c)
            return "SUBMIT" if "prediction" in c.split("History so far:")[1] else "verbatim"
        return reader(messages, cfg)

    aud = make_auditor("prompted_llm", model=ScriptedBackend(fn))
    ws = _worlds("hier_exact", 1)
    eps = run_audits(ScriptedBackend(fn), ws, aud, contract="aligned", budget=10, gen=GEN)
    assert eps[0].queries == ["verbatim"] and eps[0].R
    assert "(none yet)" in seen[0]
