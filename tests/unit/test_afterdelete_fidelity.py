"""Issue #12 (paper 001): module B can now detect nondeterministic replies, Table 10 re-probes
the frozen module-B states with only the activation contract changed, modules A/B run on
their own panels, the interface calibration freezes a contract chosen on dev profiles, and
the prompted-LLM auditor's selector is a recorded config field."""

from __future__ import annotations

import itertools
from pathlib import Path

from test_afterdelete import reader

from traceless.models import ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend
from traceless.studies import read_rows, run_study
from traceless.studies.afterdelete import AfterDelete, AfterDeleteConfig, generate_profiles
from traceless.studies.afterdelete._profiles import SPLIT_SEEDS
from traceless.studies.afterdelete._study import MODULE_PANEL_OFFSET


def _run(out: Path, backend: ScriptedBackend, **cfg: object) -> list:  # type: ignore[type-arg]
    base: dict[str, object] = {"n": 3, "n_modules": 4, "splits": ["iid"], "n_train": 4}
    base.update(cfg)
    run_study("afterdelete", out, base, backend=backend, model_tag="m", embedder=HashingEmbedder(), progress=False)
    return read_rows(out)


def _by(rows, **kv):  # type: ignore[no-untyped-def]
    return [r for r in rows if all(r.config["cell"].get(k) == v for k, v in kv.items())]


def jittery() -> ScriptedBackend:
    """`reader`, but every call appends a different amount of trailing whitespace: the same
    prompt never gets the same reply twice (an HTTP endpoint with batch-dependent kernels)."""
    n = itertools.count()

    def fn(messages: list[ChatMessage], cfg: GenerationConfig) -> str:
        return reader(messages, cfg) + " " * next(n)

    return ScriptedBackend(fn, name="jittery")


def test_module_b_counts_nondeterministic_pairs(tmp_path: Path) -> None:
    rows = _run(tmp_path / "j", jittery(), blocks=["writediag"])
    gb = [r for r in _by(rows, block="writediag", branch="gate_blocked", world="forget") if r.metrics["R"]]
    assert gb and all(r.metrics["nowrite_gate_same_state"] and r.metrics["nowrite_gate_same_prompt"] for r in gb)
    assert all(r.metrics["nowrite_gate_nondeterministic"] for r in gb)  # the cache no longer hides it
    assert all(r.metrics["branches_generated_separately"] for r in gb)
    det = _run(tmp_path / "d", ScriptedBackend(reader, name="reader"), blocks=["writediag"])
    gb2 = [r for r in _by(det, block="writediag", branch="gate_blocked", world="forget") if r.metrics["R"]]
    assert gb2 and not any(r.metrics["nowrite_gate_nondeterministic"] for r in gb2)
    assert all(r.metrics["nowrite_gate_same_reply"] for r in gb2)

    from traceless.report._afterdelete import afterdelete_numbers

    nums = afterdelete_numbers(rows, "m", {})
    (t9,) = nums.tables["table9_writediag"]
    assert t9["nondeterministic_pairs"] == len(gb) and t9["identical_units"] == 0
    f = next(f for f in nums.findings if f.claim.startswith("No-write and gate-blocked are identical"))
    assert f.status == "CONTRADICTED"
    f2 = next(f for f in afterdelete_numbers(det, "m", {}).findings
              if f.claim.startswith("No-write and gate-blocked are identical"))
    assert f2.verdict == "BY CONSTRUCTION" and f2.guarantee


def test_modules_a_and_b_use_their_own_panels() -> None:
    cfg = AfterDeleteConfig(n=3, n_modules=4, splits=["iid"], blocks=["primary", "contracts", "writediag"])
    cells = list(AfterDelete().cells(cfg))
    assert {c.params["panel"] for c in cells if c.params["block"] in ("contracts", "writediag")} == {"modules"}
    assert len([c for c in cells if c.params["block"] == "writediag"]) == 4 * 2 * 3  # n_modules × worlds × branches
    main = generate_profiles("iid", 4)
    mod = generate_profiles("iid", 4, seed=SPLIT_SEEDS["iid"] + MODULE_PANEL_OFFSET)
    assert not {p.target for p in main} & {p.target for p in mod}


def test_table10_reuses_module_b_states_with_only_the_activation_contract_changed(tmp_path: Path) -> None:
    rows = _run(tmp_path / "t10", ScriptedBackend(reader, name="reader"), blocks=["writediag", "legacyact"])
    b = {(r.config["cell"]["profile"], r.config["cell"]["world"], r.config["cell"]["branch"]): r
         for r in _by(rows, block="writediag")}
    t = _by(rows, block="legacyact")
    assert len(t) == len(b)
    for r in t:
        c = r.config["cell"]
        twin = b[(c["profile"], c["world"], c["branch"])]
        assert r.metrics["state_digest"] == twin.metrics["state_digest"]  # the same frozen state
        assert r.metrics["activation_contract"] == "legacy" and twin.metrics["activation_contract"] == "aligned"
        assert r.extra["queries"] == twin.extra["queries"]
    # the reader answers the legacy nested request; the official parser reads only `value`
    fw = [r for r in t if r.config["cell"]["world"] == "forget" and r.metrics["R"]]
    assert fw and not any(r.metrics["A"] for r in fw) and all(r.metrics["activation_anywhere"] for r in fw)

    from traceless.report._afterdelete import afterdelete_numbers

    t10 = afterdelete_numbers(rows, "m", {}).tables["table10_legacy_activation"]
    assert t10 and t10[0]["matched_states"] == t10[0]["R1"]


def test_calibration_freezes_the_dev_choice(tmp_path: Path) -> None:
    """`reader` answers whichever shape is asked; with the legacy nested shape the official
    parser scores nothing, so dev R is 0 for legacy and the held-out panel runs aligned."""
    rows = _run(tmp_path / "cal", ScriptedBackend(reader, name="reader"), blocks=["calibration"], n_calibration=3)
    dev = _by(rows, block="calibration", stage="dev", world="forget")
    assert {r.config["cell"]["audit_contract"] for r in dev} == {"aligned", "legacy"}
    held = _by(rows, block="calibration", stage="heldout")
    assert held and {r.metrics["selected_contract"] for r in held} == {"aligned"}
    assert held[0].extra["calibration_dev_R"] == {"aligned": 3, "legacy": 0}
    assert {r.config["cell"]["panel"] for r in held} == {"calibration"}
    conf = _by(rows, block="calibration", stage="confirm", world="forget")
    assert {r.config["cell"]["panel"] for r in conf} == {"confirmation"}
    by = {c: [r for r in conf if r.config["cell"]["audit_contract"] == c] for c in ("aligned", "legacy")}
    assert sum(r.metrics["R"] for r in by["legacy"]) == 0 and any(r.metrics["anywhere"] for r in by["legacy"])
    assert sum(r.metrics["R"] for r in by["aligned"]) > 0

    from traceless.report._afterdelete import afterdelete_numbers

    f = next(f for f in afterdelete_numbers(rows, "m", {}).findings if f.claim.startswith("One-factor"))
    # the direction holds; the toy panel has fewer profiles than the verdict rule's minimum
    assert f.verdict == "REPRODUCED" or (f.verdict == "INCONCLUSIVE" and "minimum" in f.status)


def test_prompted_llm_selector_is_a_recorded_config_field(tmp_path: Path) -> None:
    own = _run(tmp_path / "own", ScriptedBackend(reader, name="reader"), blocks=["auditors"],
               auditors=["prompted_llm"])
    r = _by(own, block="auditors", world="forget")[0]
    assert r.extra["selector"]["is_model_under_test"] and r.extra["selector"]["spec"] is None
    assert r.extra["queries"][0] == "direct"  # the reader, as selector, picks DIRECT first
    other = _run(tmp_path / "sel", ScriptedBackend(reader, name="reader"), blocks=["auditors"],
                 auditors=["prompted_llm"], selector="scripted:paraphrase")
    r2 = _by(other, block="auditors", world="forget")[0]
    assert r2.extra["selector"]["spec"] == "scripted:paraphrase" and not r2.extra["selector"]["is_model_under_test"]
    assert r2.extra["queries"][0] == "paraphrase"
    assert not any("selector" in x.extra for x in _by(other, auditor="direct"))
