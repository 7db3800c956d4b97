"""The audit engine over the MemorySystem interface (native adapter, scripted model)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from traceless.audit import PAPER_LADDER, AuditRow, SystemAuditConfig, run_system_audit
from traceless.errors import ConfigError, ResumeError, StudyError
from traceless.models import CachingBackend, ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend
from traceless.run import write_manifest
from traceless.studies import read_manifest, read_rows
from traceless.systems import SystemRuntime

CANARY = re.compile(r"[A-Z]{2}\d-[A-Z]+-\d{4}")
MODES = (*PAPER_LADDER, "exact", "lineage_closure")


def _parrot(messages: list[ChatMessage], config: GenerationConfig) -> str:
    """Summaries keep the token; the agent repeats a token in its memory unless the token's
    digit is odd (so rates are fractions and the comparison is not all ones or zeros)."""
    last = messages[-1].content
    if "Messages:" in last:
        found = CANARY.findall(last)
        return "- lives in a city\n" + (f"- has token {found[0]}" if found else "")
    found = CANARY.findall(messages[0].content)
    leak = [c for c in found if int(c[2]) % 2 == 0]
    return f"Here you go: {leak[0]}" if leak else "I do not know."


def _runtime() -> SystemRuntime:
    return SystemRuntime(CachingBackend(ScriptedBackend(_parrot)), HashingEmbedder(), "scripted")


GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "audit_native_golden.json").read_text())


@pytest.mark.parametrize("S", [0, 1, 2])
def test_native_system_reproduces_traceless_audit(tmp_path: Path, S: int) -> None:
    """The one engine on the native adapter gives the table and the rows (prompts, replies)
    the old plain `traceless audit` pipeline gave (recorded in the fixture)."""
    new = run_system_audit(
        SystemAuditConfig(system="traceless", system_config={"S": S, "modes": list(MODES)}, model="scripted",
                          profiles=3), _runtime(), tmp_path / "new")
    old = GOLDEN[str(S)]
    assert new.table == old["table"]
    assert any(0 < v < 1 for row in new.table.values() for v in row.values())  # not all-or-nothing
    key = ("profile", "phase", "view", "level", "wording", "prompt", "reply", "extracted")
    rows = [[json.loads(x)[k] for k in key] for x in (tmp_path / "new" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == old["rows"]
    assert hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest() == old["rows_sha256"]


def test_residue_per_store_and_files(tmp_path: Path) -> None:
    res = run_system_audit(
        SystemAuditConfig(system="traceless", system_config={"S": 1, "modes": ["noop", "raw_only", "full_purge"]},
                          profiles=2), _runtime(), tmp_path / "a", )
    assert res.copies["before"]["raw"] == 2 and res.copies["before"]["summary"] == 2
    assert res.copies["raw_only"]["raw"] == 0 and res.copies["raw_only"]["summary"] == 2
    assert all(n == 0 for n in res.copies["full_purge"].values())
    assert res.files["noop"] == {"memory.db": res.files["noop"]["memory.db"]} and res.files["noop"]["memory.db"] > 0
    assert res.files["full_purge"] == {}  # forget VACUUMs: no byte of the canary is left
    assert not (tmp_path / "a" / "work").exists()  # memory (plaintext canaries) deleted by default
    # redacted everywhere in the results, the SQLite store's bytes (free pages, WAL) included
    data = b"".join(p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert b"[CANARY]" in data and not re.search(CANARY.pattern.encode(), data)


def test_keep_memory_keeps_the_work_dir(tmp_path: Path) -> None:
    run_system_audit(SystemAuditConfig(system_config={"S": 0, "modes": ["noop"]}, profiles=1, keep_memory=True),
                     _runtime(), tmp_path / "a")
    assert (tmp_path / "a" / "work" / "base" / "memory.db").exists()


def test_bad_operation_and_config_key_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no deletion 'nope'"):
        run_system_audit(SystemAuditConfig(operations=("nope",)), _runtime(), tmp_path / "a")
    with pytest.raises(ConfigError, match="unknown key 'Ss'"):
        run_system_audit(SystemAuditConfig(system_config={"Ss": 1}), _runtime(), tmp_path / "b")
    with pytest.raises(ConfigError, match="known memory systems: .*langgraph.*mem0.*traceless"):
        run_system_audit(SystemAuditConfig(system="letta"), _runtime(), tmp_path / "c")


def test_failure_mid_audit_names_the_step_and_resumes(tmp_path: Path) -> None:
    calls = {"n": 0}

    def flaky(messages: list[ChatMessage], config: GenerationConfig) -> str:
        calls["n"] += 1
        if "Messages:" not in messages[-1].content and calls.get("fail") and calls["n"] > calls["fail"]:
            raise RuntimeError("model server went away")
        return _parrot(messages, config)

    cfg = SystemAuditConfig(system_config={"S": 1, "modes": ["noop", "raw_only"]}, profiles=2)
    out = tmp_path / "a"
    first = run_system_audit(cfg, SystemRuntime(ScriptedBackend(flaky), HashingEmbedder()), tmp_path / "ref")
    calls.update(n=0, fail=10)  # the write (4 summaries) and 'before' (6 probes) succeed, then it fails
    with pytest.raises(StudyError, match="failed at step 'noop'.*rerun the same command to resume"):
        run_system_audit(cfg, SystemRuntime(ScriptedBackend(flaky), HashingEmbedder()), out)
    # 'before' is in the store, rows and residue; of the failed phase, nothing (one transaction)
    keys = {r.key for r in read_rows(out)}
    assert "residue/before" in keys and not any("noop" in k for k in keys)
    calls.update(n=0, fail=0)
    again = run_system_audit(cfg, SystemRuntime(ScriptedBackend(flaky), HashingEmbedder()), out)
    # the write and "before" are not redone, and the generation cache in work/ answers what
    # they asked again: at most 2 phases x 2 users x 3 views x 3 probes, fewer by the repeats
    assert 0 < calls["n"] < 2 * 2 * 3 * 3
    assert again.table == first.table
    with pytest.raises(ResumeError, match="another audit"):
        run_system_audit(cfg.model_copy(update={"seed": 1}), _runtime(), out)


def test_missing_package_names_the_extra(tmp_path: Path) -> None:
    from traceless.systems import (
        MEMORY_SYSTEMS,
        MissingPackageError,
        NativeSystem,
        memory_system,
        open_system,
    )
    from traceless.systems import system_status as status

    @memory_system("needs-missing")
    class Needy(NativeSystem):
        extra = "needy"
        requires = ("traceless_no_such_package_xyz",)

    try:
        row = {s.name: s for s in status()}["needs-missing"]
        assert not row.installed and row.install == "pip install 'traceless[needy]'"
        with pytest.raises(MissingPackageError, match=r"traceless_no_such_package_xyz.*pip install 'traceless\[needy\]'"):
            open_system("needs-missing", tmp_path, None, _runtime())
        assert not list(tmp_path.iterdir())  # nothing written
    finally:
        MEMORY_SYSTEMS._entries.pop("needs-missing")


def test_cli_lists_systems_and_refuses_unknown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from traceless.cli import main

    main(["memory", "systems"])
    out = capsys.readouterr().out
    assert all(n in out for n in ("traceless", "mem0", "langgraph", "delete_thread", "delete_all", "agno",
                                  "clear_user_memories", "openai-agents", "clear_session", "llamaindex",
                                  "delete_ref_doc"))
    with pytest.raises(SystemExit) as e:
        main(["audit", "--memory", "letta", "--out", str(tmp_path / "x")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "unknown memory system 'letta'" in err and "installed: agno, langgraph, llamaindex, mem0, openai-agents, traceless" in err
    assert not (tmp_path / "x").exists()


def test_cli_audit_memory_traceless_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from traceless.cli import main
    from traceless.report import render_report

    main(["audit", "--memory", "traceless", "--model", "scripted:I cannot say.", "--embedder", "hashing",
          "--modes", "noop,full_purge", "--profiles", "2", "--out", str(tmp_path / "a")])
    out = capsys.readouterr().out
    assert "files holding a canary after noop: memory.db" in out
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert s["copies"]["noop"]["raw"] == 2 and s["copies"]["full_purge"]["raw"] == 0
    md = render_report(tmp_path / "a").read_text()
    assert "| noop |" in md and "`memory.db`" in md and (tmp_path / "a" / "report" / "heatmap.png").exists()


def test_plain_audit_is_the_engine_and_deletes_its_plaintext_memory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.cli import main

    out = tmp_path / "a"
    main(["audit", "--model", "scripted:I cannot say.", "--embedder", "hashing", "--modes", "noop,full_purge",
          "--profiles", "2", "--out", str(out)])
    assert json.loads((out / "manifest.json").read_text())["study"] == "memory-audit"
    s = json.loads((out / "summary.json").read_text())
    assert s["system"] == "traceless" and list(s["table"]) == ["before", "noop", "full_purge"]
    assert s["copies"]["noop"]["raw"] == 2 and s["copies"]["full_purge"]["raw"] == 0
    assert not (out / "work").exists()
    assert not any(CANARY.search(p.read_bytes().decode("utf-8", "replace")) for p in out.rglob("*") if p.is_file())
    from traceless.report import render_report

    assert "| full_purge |" in render_report(out).read_text()  # `traceless report DIR` renders it
    run_system_audit(SystemAuditConfig(system_config={"S": 1, "modes": ["noop"]}, profiles=1, keep_memory=True),
                     _runtime(), tmp_path / "b")
    assert (tmp_path / "b" / "work" / "base" / "memory.db").exists()


def test_modes_none_probes_only_before(tmp_path: Path) -> None:
    res = run_system_audit(SystemAuditConfig(system_config={"S": 1}, profiles=1, operations=()), _runtime(),
                           tmp_path / "a")
    assert list(res.table) == ["before"]


def test_cli_audit_json_is_one_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.audit import SystemAuditResult
    from traceless.cli import main

    main(["audit", "--model", "scripted:I cannot say.", "--embedder", "hashing", "--modes", "noop,full_purge",
          "--profiles", "1", "--out", str(tmp_path / "a"), "--json"])
    cap = capsys.readouterr()
    doc = SystemAuditResult.model_validate_json(cap.out)  # stdout holds the document and nothing else
    assert doc.system == "traceless" and list(doc.table) == ["before", "noop", "full_purge"]
    assert doc.copies["noop"]["raw"] == 1 and "probe rows in" in cap.err


def test_unknown_system_says_what_is_installed_and_how_to_install_the_rest() -> None:
    from traceless.systems import MEMORY_SYSTEMS, NativeSystem, memory_system, system_class

    @memory_system("needs-missing")
    class Needy(NativeSystem):
        extra = "needy"
        requires = ("traceless_no_such_package_xyz",)

    try:
        with pytest.raises(ConfigError, match=r"unknown memory system 'letta'.*installed: .*traceless.*; "
                                              r"not installed: .*needs-missing \(pip install 'traceless\[needy\]'\)"):
            system_class("letta")
    finally:
        MEMORY_SYSTEMS._entries.pop("needs-missing")


@pytest.mark.parametrize("name, text", [("bad.json", '{"S": 1, "kk": 3}'), ("bad.toml", "S = 1\nkk = 3\n")])
def test_cli_config_file_unknown_key_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              name: str, text: str) -> None:
    from traceless.cli import main

    (tmp_path / name).write_text(text)
    with pytest.raises(SystemExit) as e:
        main(["audit", "--memory-config", str(tmp_path / name), "--model", "scripted", "--embedder", "hashing",
              "--out", str(tmp_path / "a")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"{name} for memory system 'traceless': unknown key 'kk'" in err and "Keys it accepts: S, k, modes" in err
    assert not (tmp_path / "a").exists()  # refused before anything was written


def test_failure_while_writing_names_the_step_and_resumes(tmp_path: Path) -> None:
    state = {"fail": True}

    def flaky(messages: list[ChatMessage], config: GenerationConfig) -> str:
        if "Messages:" in messages[-1].content and state["fail"]:
            raise RuntimeError("summarizer unreachable")
        return _parrot(messages, config)

    cfg = SystemAuditConfig(system_config={"S": 1, "modes": ["noop"]}, profiles=1)
    out = tmp_path / "a"
    with pytest.raises(StudyError, match="failed at step 'write' .*summarizer unreachable.*rerun the same command"):
        run_system_audit(cfg, SystemRuntime(ScriptedBackend(flaky), HashingEmbedder()), out)
    assert (out / "manifest.json").exists() and not (out / "steps" / "write.done").exists()
    state["fail"] = False
    res = run_system_audit(cfg, SystemRuntime(ScriptedBackend(flaky), HashingEmbedder()), out)
    assert list(res.table) == ["before", "noop"] and res.copies["noop"]["summary"] == 1


def test_cli_modes_pick_another_systems_deletions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.cli import main
    from traceless.systems import MEMORY_SYSTEMS, NativeSystem, memory_system

    @memory_system("other-store")
    class Other(NativeSystem):
        """Another system (here the native store under another name): --modes are its deletion names."""

    try:
        main(["audit", "--memory", "other-store", "--model", "scripted:no", "--embedder", "hashing",
              "--modes", "noop,full_purge", "--profiles", "1", "--out", str(tmp_path / "a"), "--json"])
        assert list(json.loads(capsys.readouterr().out)["table"]) == ["before", "noop", "full_purge"]
        for modes, msg in (("ladder", "--modes ladder names traceless's forget modes"),
                           ("noop,shred", "other-store has no deletion 'shred'")):
            with pytest.raises(SystemExit) as e:
                main(["audit", "--memory", "other-store", "--model", "scripted", "--modes", modes,
                      "--out", str(tmp_path / "b")])
            assert e.value.code == 2 and msg in capsys.readouterr().err
        assert not (tmp_path / "b").exists()
    finally:
        MEMORY_SYSTEMS._entries.pop("other-store")


def test_a_rerun_pays_for_no_generation_twice(tmp_path: Path) -> None:
    asked: list[list[str]] = [[]]
    fail = {"after": 10**9}

    def model(messages: list[ChatMessage], config: GenerationConfig) -> str:
        if sum(map(len, asked)) >= fail["after"]:
            raise RuntimeError("model server went away")
        asked[-1].append(json.dumps([m.model_dump() for m in messages]))
        return _parrot(messages, config)

    cfg = SystemAuditConfig(system_config={"S": 1, "modes": ["noop", "raw_only"]}, profiles=2)
    ref = run_system_audit(cfg, SystemRuntime(ScriptedBackend(model), HashingEmbedder()), tmp_path / "ref")
    asked[:] = [[]]
    fail["after"] = 10  # the write (4 summaries) and "before" (6 probes) are answered, then it stops
    with pytest.raises(StudyError, match="failed at step 'noop'"):
        run_system_audit(cfg, SystemRuntime(ScriptedBackend(model), HashingEmbedder()), tmp_path / "o")
    fail["after"], asked[:] = 10**9, [*asked, []]
    again = run_system_audit(cfg, SystemRuntime(ScriptedBackend(model), HashingEmbedder()), tmp_path / "o")
    assert again.table == ref.table
    first, rerun = asked
    assert len(first) == 10 and rerun
    assert not set(first) & set(rerun)  # "noop" asks what "before" asked: answered from the cache
    assert len(rerun) == len(set(rerun))
    assert not (tmp_path / "o" / "work").exists()  # the cache (plaintext replies) went with the memory


def test_audit_rows_are_runner_cells_in_the_frontier_schema(tmp_path: Path) -> None:
    """One row schema and one store: the audit's rows are the study runner's ``ResultRow``s in
    ``results.sqlite`` (what ``read_rows`` reads for the frontier), its probe cells map to
    ``AuditRow``s like the frontier's do, and results.jsonl is exactly that mapping."""
    cfg = SystemAuditConfig(system_config={"S": 1, "modes": ["noop", "full_purge"]}, profiles=2)
    out = tmp_path / "a"
    res = run_system_audit(cfg, _runtime(), out)
    cells = read_rows(out)
    probes = [a for a in map(AuditRow.from_cell, cells) if a is not None]
    residue = {r.group: r for r in cells if r.config["cell"]["kind"] == "residue"}
    assert len(probes) == res.rows == len(cells) - len(residue) and set(residue) == {"before", "noop", "full_purge"}
    assert {(a.run_id, a.system) for a in probes} == {("audit-traceless", "traceless")}
    assert all(r.model_tag == cfg.model and r.config["study"] == cfg.model_dump(mode="json") for r in cells)
    # before deletion: aer cells on the agent view; after: frs cells per view, as in the frontier
    kinds = {(r.config["cell"]["kind"], r.group) for r in cells if r.key not in {f"residue/{p}" for p in residue}}
    assert kinds == {("aer", "before"), ("frs", "noop"), ("frs", "full_purge")}
    assert {a.view for a in probes if a.phase == "noop"} == {"agent", "raw", "summary"}
    exported = [AuditRow.model_validate_json(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(exported, key=lambda a: a.model_dump_json()) == sorted(probes, key=lambda a: a.model_dump_json())
    assert res.copies == {p: r.metrics["copies"] for p, r in residue.items()}
    assert res.copies["noop"]["summary"] == 2 and not any(res.copies["full_purge"].values())
    run = read_manifest(out).runs[cfg.model]
    assert run.finished and run.cells_done == len(cells) and run.identity["name"] == "scripted"


def test_a_dir_of_an_older_audit_layout_is_not_resumed(tmp_path: Path) -> None:
    cfg = SystemAuditConfig(system_config={"S": 1, "modes": ["noop"]}, profiles=1)
    out = tmp_path / "a"
    run_system_audit(cfg, _runtime(), out)
    man = read_manifest(out)
    write_manifest(out, man.model_copy(update={"study_version": "2"}))
    with pytest.raises(ResumeError, match="another version of the audit.*fresh --out"):
        run_system_audit(cfg, _runtime(), out)


def test_report_renders_the_dir_and_its_export_bundle_alike(tmp_path: Path) -> None:
    """`traceless report` computes the table from the rows (``audit_table``), so an export
    bundle (no conversation text) renders the same report as the results dir, with the
    numbers the audit returned; an unfinished audit is refused."""
    from traceless.report import render_report
    from traceless.studies import export_bundle

    cfg = SystemAuditConfig(system_config={"S": 1, "modes": ["noop", "raw_only"]}, profiles=2)
    res = run_system_audit(cfg, _runtime(), tmp_path / "a")
    md = render_report(tmp_path / "a").read_text()
    export_bundle(tmp_path / "a", tmp_path / "b")
    assert render_report(tmp_path / "b").read_text() == md
    raw = res.table["raw_only"]
    cells = next(x for x in md.splitlines() if x.startswith("| raw_only |")).strip("| ").split(" | ")
    rates = ("AER_direct", "AER_indirect", "AER_jailbreak", "AER_max", "FRS_raw", "FRS_summary", "FRS_worst")
    stores = list(res.copies["raw_only"])
    by = res.bystanders["raw_only"]
    assert by["intact"] and by["copies_before"] == by["copies_after"] > 0
    assert cells == ["raw_only", *(f"{raw[c]:.2f}" for c in rates), *(str(res.copies["raw_only"][s]) for s in stores),
                     f"yes ({by['copies_after']}/{by['copies_before']})"]
    assert raw["FRS_worst"] > 0 and raw["FRS_raw"] == 0.0  # the summary keeps what raw_only removed
    assert not re.search(CANARY.pattern.encode(), (tmp_path / "b" / "results.parquet").read_bytes())
    man = read_manifest(tmp_path / "a")
    man.runs[cfg.model] = man.runs[cfg.model].model_copy(update={"finished": False})
    write_manifest(tmp_path / "a", man)
    with pytest.raises(StudyError, match="did not finish.*rerun the same command"):
        render_report(tmp_path / "a")
