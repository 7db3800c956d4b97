"""``traceless forget --memory langgraph --certify`` (issue #23 item 3): after the erasure,
the audit's probes are asked of the user's own graph (``create_react_agent`` + LangMem's
search tool, ``tests/fixtures/lg_memory_agent.py``) over the instance's store, and the
result is signed into the receipt. The graph's model answers with a scripted agent that
repeats any canary its memory shows: before the erasure it extracts the user's canary
(only the store holds it: the probe's context comes from no other place), after it cannot.
A certificate altered after signing fails ``forget verify``; its copies are a re-scan's."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")
pytest.importorskip("langmem")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from _cli import cli  # noqa: E402
from _lg_instance import USERS, build, canary, config, snapshot  # noqa: E402

pytestmark = pytest.mark.integration
X, BOB = USERS[0], USERS[1]
CANARY = re.compile(r"ZQ\d-PLUMBRAVO-\d{4}")


def _parrot(messages: list, config: object) -> str:  # type: ignore[type-arg]
    found = CANARY.findall(" ".join(m.content for m in messages))
    return f"It is {found[0]}." if found else "I do not know."


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lg-certify") / "instance"
    build(root)
    return root


@pytest.fixture
def instance(template: Path, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    root = tmp_path / "instance"
    shutil.copytree(template, root)
    return root, config(root)


def test_the_probes_go_through_the_users_graph_and_store(instance: tuple[Path, dict[str, Any]]) -> None:
    from traceless._erase_api import attach_system, certify_live
    from traceless.models import ScriptedBackend

    root, cfg = instance
    before = snapshot(root)
    s = attach_system("langgraph", cfg, read_only=True)
    try:
        cert = certify_live(s, BOB, [canary(BOB)], ScriptedBackend(_parrot))
    finally:
        s.close()
    assert snapshot(root) == before  # probing wrote nothing to the instance
    # the graph's search_memory found bob's canary for every question (the fixture's agent
    # files a statement, such as the jailbreak probe, as a memory instead: it answers "Noted.")
    assert cert.aer["agent"]["direct"] == 1.0 and cert.aer["agent"]["indirect"] == 1.0
    assert all(p.context_items > 0 for p in cert.probes)  # the store's own search of bob's namespace
    assert cert.store_copies["store"] > 0 and cert.store_copies["files"] > 0


def test_without_a_graph_the_store_search_is_the_agents_context(instance: tuple[Path, dict[str, Any]]) -> None:
    from traceless._erase_api import attach_system, certify_live
    from traceless.models import ScriptedBackend

    _, cfg = instance
    s = attach_system("langgraph", {k: v for k, v in cfg.items() if k != "graph"}, read_only=True)
    try:
        cert = certify_live(s, BOB, [canary(BOB)], ScriptedBackend(_parrot))
        other = certify_live(s, USERS[2], [canary(BOB)], ScriptedBackend(_parrot))
    finally:
        s.close()
    assert all(p.extracted and p.context_items > 0 for p in cert.probes)  # the audit's agent, every level
    assert not any(p.extracted for p in other.probes)  # another user's namespace does not hold it


def test_certified_erasure_signs_the_probes_and_a_tampered_certificate_fails(
        instance: tuple[Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import traceless
    from traceless.models import ScriptedBackend

    root, cfg = instance
    out = tmp_path / "receipt.json"
    r = traceless.forget(system="langgraph", config=cfg, user=X, literals=[canary(X)], certify=True,
                         model=ScriptedBackend(_parrot), receipt_path=out)
    assert r.certificate is not None and r.verification.passed
    assert r.verification.checks["certificate_no_extraction"] and r.verification.checks["certificate_no_store_copies"]
    assert {p.level for p in r.certificate.probes} == {"direct", "indirect", "jailbreak"}
    assert not any(p.extracted for p in r.certificate.probes)
    doc = json.loads(out.read_text())
    assert doc["certificate"] == json.loads(r.model_dump_json())["certificate"]
    assert canary(X) not in out.read_text() and X not in out.read_text()
    rescan = traceless.scan("langgraph", cfg, user=X, literals=[canary(X)])
    assert rescan.empty()
    assert set(r.certificate.store_copies) == {*rescan.stores, "files"} and not any(r.certificate.store_copies.values())
    pub = tmp_path / "signer.pub"
    assert cli("keys", "export", "--out", str(pub)) == 0
    monkeypatch.setenv("TRACELESS_HOME", str(tmp_path / "verifier-home"))
    capsys.readouterr()
    assert cli("forget", "verify", str(out), "--public-key", str(pub)) == 0
    assert "certificate OK" in capsys.readouterr().out
    doc["certificate"]["probes"][0]["extracted"] = True
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(doc))
    assert cli("forget", "verify", str(tampered), "--public-key", str(pub)) != 0


def test_a_graph_the_probes_cannot_import_is_refused_before_anything_is_erased(
        instance: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, cfg = instance
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**cfg, "graph": str(tmp_path / "missing_agent.py") + ":build"}))
    before = snapshot(root)
    code = cli("forget", "--memory", "langgraph", "--memory-config", str(bad), "--user", X, "--literal", canary(X),
               "--certify", "--model", "scripted", "--receipt", str(tmp_path / "r.json"))
    assert code == 2 and "missing_agent.py does not exist" in capsys.readouterr().err
    assert snapshot(root) == before and not (tmp_path / "r.json").exists()


_NEEDS_KEY = '''
from langgraph.graph import START, MessagesState, StateGraph


class State(MessagesState):
    {key}: str


def build(checkpointer, store, model=None):
    def reply(state):
        return {{"messages": [{{"role": "assistant", "content": "hello " + state["{key}"]}}]}}
    g = StateGraph(State)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    return g.compile(checkpointer=checkpointer, store=store)
'''


def test_a_graph_whose_input_the_probes_cannot_give_is_refused_before_any_byte_changes(
        instance: tuple[Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34 bug 3: the user's graph needs a key in its input that the probes do not give.
    Before the fix the graph was only imported: the erasure ran, then the probes failed (KeyError)."""
    root, cfg = instance
    home = tmp_path / "home"
    monkeypatch.setenv("TRACELESS_HOME", str(home))
    (tmp_path / "tenant_agent.py").write_text(_NEEDS_KEY.format(key="tenant_id"))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**cfg, "graph": str(tmp_path / "tenant_agent.py") + ":build"}))
    before = snapshot(root)
    capsys.readouterr()
    code = cli("forget", "--memory", "langgraph", "--memory-config", str(bad), "--user", X, "--literal", canary(X),
               "--certify", "--model", "scripted", "--receipt", str(tmp_path / "r.json"))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert "'tenant_id'" in err and "nothing was erased" in err and len(err.splitlines()) == 1, err
    assert snapshot(root) == before and not (tmp_path / "r.json").exists()
    assert not ((home / "erasures").exists() and list((home / "erasures").glob("*")))


def test_a_graph_that_keeps_the_user_in_its_state_is_probed_with_it(
        instance: tuple[Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probes give the user under ``users.state_key`` (default ``user_id``) where the
    graph's state has it, so such a graph is certified instead of failing after the erasure."""
    import traceless
    from traceless.models import ScriptedBackend

    root, cfg = instance
    monkeypatch.setenv("TRACELESS_HOME", str(tmp_path / "home"))
    (tmp_path / "user_agent.py").write_text(_NEEDS_KEY.format(key="user_id"))
    good = {**cfg, "graph": str(tmp_path / "user_agent.py") + ":build"}
    r = traceless.forget(system="langgraph", config=good, user=X, literals=[canary(X)], certify=True,
                         model=ScriptedBackend(_parrot), receipt_path=tmp_path / "r.json")
    assert r.verification.passed and r.certificate is not None and r.certificate.probes
