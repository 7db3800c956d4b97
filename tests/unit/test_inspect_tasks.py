"""The inspect_ai tasks with the real inspect_ai (offline): ``inspect_ai.eval`` of
``traceless/canary_audit`` and ``traceless/afterdelete`` by their registered names, the
``.eval`` log read back with ``read_eval_log`` and its scores checked against values the
test derives from its own scripted replies; bad ``-T`` parameters."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("TRACELESS_REQUIRE_INSPECT"):  # CI sets it: there a missing extra fails, not skips
    pytest.importorskip("inspect_ai", reason="pip install 'traceless[inspect]'; CI sets TRACELESS_REQUIRE_INSPECT=1")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage, get_model  # noqa: E402

import _inspect_ep  # noqa: E402
from traceless.audit import PROBE_LEVELS, SystemAuditConfig, plant_canaries, probes  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _entry_point(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    extra = _inspect_ep.ensure(tmp_path_factory.mktemp("ep"))
    if extra is not None:
        sys.path.insert(0, str(extra))
        importlib.invalidate_caches()
    from inspect_ai._util.entrypoints import clear_entry_points_state

    clear_entry_points_state()
    yield
    if extra is not None:
        sys.path.remove(str(extra))


def _scripted(reply: Any) -> Any:
    """mockllm whose reply is ``reply(messages)``; usage is set so mockllm counts no tokens
    (its default token count needs tiktoken's o200k_base file, a download)."""

    def out(messages: list[ChatMessage], tools: Any, tool_choice: Any, config: GenerateConfig) -> ModelOutput:
        o = ModelOutput.from_content(model="mockllm", content=reply(messages))
        o.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return o

    return get_model("mockllm/model", custom_outputs=out)


def _metrics(log: Any) -> dict[str, float]:
    assert log.status == "success", log.error
    (score,) = log.results.scores
    return {name: m.value for name, m in score.metrics.items()}


def test_canary_audit_scores_match_the_scripted_leaks(tmp_path: Path) -> None:
    # three users; the model leaks user 0's canary on every DIRECT probe (memorised: before
    # and after deletion) and echoes its whole context on JAILBREAK probes (so it leaks a
    # canary exactly when memory still holds it); INDIRECT never leaks.
    users = plant_canaries(SystemAuditConfig(profiles=3, seed=0))
    text = {p.level: p.text for p in probes(PROBE_LEVELS, wordings=1)}

    def reply(messages: list[ChatMessage]) -> str:
        query = messages[-1].text
        if query == text["direct"]:
            return f"It is {users[0].canary}."
        if query == text["jailbreak"]:
            return messages[0].text
        return "I cannot share that."

    logs = inspect_eval("traceless/canary_audit", model=_scripted(reply), log_dir=str(tmp_path), display="none",
                        task_args={"profiles": 3, "S": 0, "k": 50, "mode": "full_purge", "embedder": "hashing"})
    log = read_eval_log(logs[0].location)  # the .eval file on disk, read back
    assert Path(logs[0].location).suffix == ".eval"
    got = _metrics(log)
    # k=50 holds every raw turn of a user, so before deletion the echo carries the canary;
    # full_purge removes it from every tier, so after it no echo can.
    want = {"AER_direct_before": 1 / 3, "AER_indirect_before": 0.0, "AER_jailbreak_before": 1.0,
            "AER_max_before": 1.0, "AER_direct_after": 1 / 3, "AER_indirect_after": 0.0,
            "AER_jailbreak_after": 0.0, "AER_max_after": 1 / 3}
    assert {k: v for k, v in got.items() if not k.endswith("_stderr")} == pytest.approx(want)
    # inspect's stderr() over the 3 users' per-level values (direct: 1, 0, 0 → sd √(1/3), /√3)
    se = {k.removesuffix("_stderr"): v for k, v in got.items() if k.endswith("_stderr")}
    assert set(se) == set(want) - {"AER_max_before", "AER_max_after"}
    assert se == pytest.approx({"AER_direct_before": 1 / 3, "AER_indirect_before": 0.0, "AER_jailbreak_before": 0.0,
                                "AER_direct_after": 1 / 3, "AER_indirect_after": 0.0, "AER_jailbreak_after": 0.0})
    assert len(log.samples or []) == 3
    per_user = {s.id: s.scores["canary_extraction"].value for s in log.samples or []}
    assert per_user[users[0].owner]["direct_before"] == 1.0
    assert per_user[users[1].owner]["direct_before"] == 0.0
    # the canaries stay out of scores and explanations (they are in the model events)
    for s in log.samples or []:
        sc = s.scores["canary_extraction"]
        assert not any(u.canary in f"{sc.value} {sc.answer} {sc.explanation}" for u in users)


def _echo_on_jailbreak(messages: list[ChatMessage]) -> str:
    jailbreak = {p.text for p in probes(("jailbreak",), wordings=1)}
    return messages[0].text if messages[-1].text in jailbreak else "I cannot share that."


def test_canary_audit_on_a_sessions_file(tmp_path: Path) -> None:
    import json

    data = tmp_path / "sessions.jsonl"
    lines = [{"user_id": u, "session_id": f"s{i}", "date": "2026/01/0{i + 1}",
              "turns": [{"role": "user", "content": f"{u} keeps {pet} number {i}."},
                        {"role": "assistant", "content": "Noted."}]}
             for u, pet in (("ana", "a cat"), ("bo", "a dog")) for i in range(2)]
    data.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    logs = inspect_eval("traceless/canary_audit", model=_scripted(_echo_on_jailbreak), log_dir=str(tmp_path),
                        display="none", task_args={"data": str(data), "S": 0, "k": 50, "embedder": "hashing"})
    log = read_eval_log(logs[0].location)
    assert sorted(str(s.id) for s in log.samples or []) == ["ana", "bo"]  # every user of the file
    got = _metrics(log)
    # the whole memory is in context before deletion (echo leaks), none of the canary after full_purge
    assert (got["AER_jailbreak_before"], got["AER_jailbreak_after"], got["AER_direct_before"]) == (1.0, 0.0, 0.0)


def test_canary_audit_on_the_langgraph_memory_system(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite")
    # delete_thread leaves the store's copy of the turn: the echo still finds the canary
    args = {"memory": "langgraph", "k": 50, "profiles": 2, "embedder": "hashing", "mode": "delete_thread"}
    logs = inspect_eval("traceless/canary_audit", model=_scripted(_echo_on_jailbreak), log_dir=str(tmp_path),
                        display="none", task_args=args)
    got = _metrics(read_eval_log(logs[0].location))
    assert (got["AER_jailbreak_before"], got["AER_jailbreak_after"]) == (1.0, 1.0)
    args["mode"] = "store.delete+delete_thread"
    logs = inspect_eval("traceless/canary_audit", model=_scripted(_echo_on_jailbreak), log_dir=str(tmp_path),
                        display="none", task_args=args)
    got = _metrics(read_eval_log(logs[0].location))
    assert (got["AER_jailbreak_before"], got["AER_jailbreak_after"]) == (1.0, 0.0)


def test_canaries_stay_out_of_a_log_written_without_samples(tmp_path: Path) -> None:
    import zipfile

    users = plant_canaries(SystemAuditConfig(profiles=2, seed=0))
    args = {"profiles": 2, "S": 0, "k": 50, "embedder": "hashing"}

    def text_of(location: str) -> str:
        with zipfile.ZipFile(location) as z:
            return "".join(z.read(n).decode("utf-8", "replace") for n in z.namelist())

    # by default the model events (prompts holding the memory) are in the log ...
    full = inspect_eval("traceless/canary_audit", model=_scripted(_echo_on_jailbreak), log_dir=str(tmp_path / "a"),
                        display="none", task_args=args)[0]
    assert any(u.canary in text_of(full.location) for u in users)
    # ... --no-log-samples keeps only the aggregate results and the plan, which never name a canary
    bare = inspect_eval("traceless/canary_audit", model=_scripted(_echo_on_jailbreak), log_dir=str(tmp_path / "b"),
                        display="none", task_args=args, log_samples=False)[0]
    assert _metrics(read_eval_log(bare.location))["AER_jailbreak_before"] == 1.0
    assert not any(u.canary in text_of(bare.location) for u in users)


def test_canary_audit_default_mode_and_summaries_through_the_inspect_model(tmp_path: Path) -> None:
    # S=1: the store's key-fact summarizer is the inspect model too (one call per session)
    calls: list[str] = []

    def reply(messages: list[ChatMessage]) -> str:
        calls.append(messages[-1].text)
        return "- the user likes tea"

    logs = inspect_eval("traceless/canary_audit", model=_scripted(reply), log_dir=str(tmp_path), display="none",
                        task_args={"profiles": 1, "embedder": "hashing", "S": 1})  # S=1: not the default
    log = read_eval_log(logs[0].location)
    assert _metrics(log)["AER_max_before"] == 0.0
    assert log.eval.task_args["mode"] is None and log.eval.metadata["mode"] == "full_purge"
    n_probes = 2 * len(PROBE_LEVELS)
    assert len(calls) > n_probes  # summarization calls went to the same model


def test_afterdelete_delta_rec_matches_the_scripted_replies(tmp_path: Path) -> None:
    import json
    import secrets

    from traceless.studies.afterdelete import CONDITIONS, build_world, generate_profiles

    profiles = generate_profiles("iid", 4)
    targets = [p.target for p in profiles]

    # a perfect reader of its context: submits the target (the official JSON contract)
    # whenever the memory shown holds it, else abstains
    def reply(messages: list[ChatMessage]) -> str:
        shown = "\n".join(m.text for m in messages)
        hit = [t for t in targets if t in shown]
        return json.dumps({"value": hit[0] if hit else ""})

    logs = inspect_eval("traceless/afterdelete", model=_scripted(reply), log_dir=str(tmp_path), display="none",
                        task_args={"n": 4})
    got = _metrics(read_eval_log(logs[0].location))
    # expected, independently: R = 1 exactly where the world's post-deletion memory holds the target
    key = secrets.token_bytes(32)
    held = {w: [p.target in build_world(p, w, CONDITIONS.get("hier_exact"), gate_key=key).visible_text()
                for p in profiles] for w in ("clean", "forget")}
    rec = {w: sum(v) / len(v) for w, v in held.items()}
    assert rec["forget"] > rec["clean"]  # exact deletion leaves residue on this panel: a non-trivial gap
    assert got["Rec_clean"] == pytest.approx(rec["clean"])
    assert got["Rec_forget"] == pytest.approx(rec["forget"])
    assert got["delta_Rec"] == pytest.approx(rec["forget"] - rec["clean"])
    assert got["delta_Rec_low"] <= got["delta_Rec"] <= got["delta_Rec_high"]


def test_afterdelete_task_reproduces_the_study_primary_block(tmp_path: Path) -> None:
    # one reply rule for both runs that depends on the whole prompt: any difference in how
    # the task builds worlds, prompts or auditor turns from the study changes some R
    import hashlib
    import json

    from traceless.models import Generation, ModelBackend
    from traceless.studies import read_rows, run_study
    from traceless.studies.afterdelete import generate_profiles

    targets = [p.target for p in generate_profiles("iid", 6)]

    def rule(texts: list[str]) -> str:
        shown = "\n".join(texts)
        hit = [t for t in targets if t in shown]
        keep = int(hashlib.sha256(shown.encode()).hexdigest(), 16) % 3 != 0
        return json.dumps({"value": hit[0] if hit and keep else ""})

    class Rule(ModelBackend):
        name = "rule"

        def generate(self, messages: Any, config: Any = None) -> Generation:
            return Generation(text=rule([m.content for m in messages]), prompt_tokens=1, completion_tokens=1)

    run_study("afterdelete", tmp_path / "study", {"blocks": ["primary"], "n": 6, "splits": ["iid"]},
              backend=Rule(), model_tag="rule", progress=False)
    study = {(r.config["cell"]["profile"], r.config["cell"]["world"]): int(r.metrics["R"])
             for r in read_rows(tmp_path / "study")}
    logs = inspect_eval("traceless/afterdelete", model=_scripted(lambda ms: rule([m.text for m in ms])),
                        log_dir=str(tmp_path / "logs"), display="none", task_args={"n": 6})
    log = read_eval_log(logs[0].location)
    assert not any(t in log.model_dump_json(exclude={"samples"}) for t in targets)  # header: no target
    task = {(int(s.metadata["index"]), w): s.scores["reconstruction"].value[f"R_{w}"]
            for s in log.samples or [] for w in ("clean", "forget")}
    assert task == study
    assert 0 < sum(study.values()) < len(study)  # the rule both recovers and misses
    got = _metrics(log)  # inspect's stderr() of each world's R over the samples, next to the means
    for w in ("clean", "forget"):
        r = [task[(i, w_)] for (i, w_) in sorted(task) if w_ == w]
        mean = sum(r) / len(r)
        want = (sum((x - mean) ** 2 for x in r) / (len(r) - 1)) ** 0.5 / len(r) ** 0.5
        assert abs(got[f"R_{w}_stderr"] - want) < 1e-12


@pytest.mark.parametrize(("task", "args", "needle"), [
    ("traceless/canary_audit", {"kk": 3}, "unknown parameter 'kk'"),
    ("traceless/canary_audit", {"k": "three"}, "-T k='three'"),
    ("traceless/canary_audit", {"mode": "shred"}, "valid values: "),
    ("traceless/canary_audit", {"memory": "nosuch"}, "known memory systems: "),
    ("traceless/canary_audit", {"data": "/nonexistent/sessions.jsonl"}, "does not exist"),
    ("traceless/canary_audit", {"embedder": "bert"}, "known embedders: "),
    ("traceless/afterdelete", {"split": "test"}, "valid values: train, dev, iid, ood"),
    ("traceless/afterdelete", {"contract": "x"}, "valid values: "),
])
def test_bad_task_parameters_name_the_valid_values(task: str, args: dict[str, Any], needle: str) -> None:
    from inspect_ai._util.error import PrerequisiteError

    from traceless.errors import ConfigError

    with pytest.raises(PrerequisiteError) as e:
        inspect_eval(task, model="mockllm/model", task_args=args, display="none", log_dir="/nonexistent-never-written")
    assert isinstance(e.value, ConfigError)
    assert needle in str(e.value.message)
    if "unknown parameter" in needle or "-T k=" in needle:
        assert "Valid -T parameters: memory (default 'traceless')" in str(e.value.message)


def test_tasks_are_found_by_name_from_a_checkout_with_a_stale_egg_info(tmp_path: Path) -> None:
    # `PYTHONPATH=src` over a checkout where `pip install -e .` once left src/traceless.egg-info:
    # that metadata (no PEP 610 editable record) is found first and inspect sees no package
    import subprocess

    egg = tmp_path / "traceless.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: traceless\nVersion: 0.1.0\n")
    (egg / "entry_points.txt").write_text("".join(["[inspect_ai]\n", *(f"{k} = {v}\n" for k, v in
                                                                       _inspect_ep.declared().items())]))
    src = Path(__file__).resolve().parents[2] / "src"
    code = ("from inspect_ai._util.registry import registry_lookup\n"
            "from inspect_ai._util.package import get_installed_package_name\n"
            "t = registry_lookup('task', 'traceless/canary_audit')\n"
            "import traceless._inspect as m\n"
            "print(get_installed_package_name(m.canary_audit), t is not None, "
            "registry_lookup('task', 'traceless/afterdelete') is not None)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(src)])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["None", "True", "True"]  # no package detected, tasks found anyway


@pytest.mark.parametrize("mode", ["noop", "full_purge"])
def test_canary_audit_reports_the_residue_scan_of_each_phase(tmp_path: Path, mode: str) -> None:
    """The task runs the audit engine's phase function, so each sample's score carries the
    residue scan of both phases (copies of the user's canary per store, files holding it):
    ``noop`` leaves every copy, ``full_purge`` none, in no store and no file."""
    users = plant_canaries(SystemAuditConfig(profiles=2, seed=0))
    logs = inspect_eval("traceless/canary_audit", model=_scripted(_echo_on_jailbreak), log_dir=str(tmp_path),
                        display="none", task_args={"profiles": 2, "S": 0, "k": 50, "embedder": "hashing",
                                                   "mode": mode})
    log = read_eval_log(logs[0].location)
    assert log.status == "success", log.error
    for s in log.samples or []:
        sc = s.scores["canary_extraction"]
        residue = (sc.metadata or {})["residue"]
        before, after = residue["before"], residue["after"]
        assert before["copies"]["raw"] == 1 and before["files"]  # the planted turn, in the store's file
        if mode == "noop":
            assert after == before
        else:
            assert not any(after["copies"].values()) and after["files"] == {}
        assert f"copies left in the stores after it: {sum(after['copies'].values())}" in sc.explanation
        assert not any(u.canary in json.dumps(residue) for u in users)  # counts and file names only
