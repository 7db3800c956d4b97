"""One erasure request across a deployment (issue 36's Done-when): real mem0 (qdrant local,
MiniLM, ``infer=False``), a real LangGraph app (the user's graph over ``SqliteSaver`` +
``SqliteStore``) and traceless's own store, three persons with other ids in each system:

* ``scan --deployment --literal EMAIL`` names the owner in every instance (mem0's
  ``user_id``, LangGraph's namespace and thread templates read back, the store's user) and
  changes no byte of any instance; a person found only by an email in one record is named
  there and nowhere else;
* ``forget --deployment --request-id T-1`` erases the person from all three, one bundle
  ``request-T-1/`` verified with the public key alone on a machine without keys; an altered,
  removed or added receipt, or an altered summary, fails it; the other persons keep their
  records (each system's own API lists them unchanged);
* with mem0's instance held open by its application the request changes nothing anywhere
  (every file of every instance byte- and mtime-identical), no bundle;
* two requests in one folder keep two bundles; a re-used request id is refused;
* ``export`` writes exactly what each system's own API lists for the person, nothing of
  anyone else; ``scan --since BUNDLE`` exits 13 after the app adds a memory for the person
  again, 0 before; ``traceless.verify(receipt, public_key=...)`` and
  ``traceless.verify_bundle`` from Python.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")
pytest.importorskip("langmem")
if importlib.util.find_spec("mem0") is None:
    pytest.skip("needs traceless[mem0]", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

import _lg_instance as lg  # noqa: E402
import _mem0_instance as mi  # noqa: E402
from _cli import cli  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("_home")]

# the three persons: the request's id -> the id each system keeps them under
PERSONS = {"ann": {"prefs": "alice", "threads": "cust-4411", "store": "ann"},
           "ben": {"prefs": "bob", "threads": "cust-5522", "store": "ben"},
           "cleo": {"prefs": "carol", "threads": "cust-6633", "store": "cleo"}}
EMAIL = {"ann": "ann.berg@example.org", "ben": "ben.okafor@example.org", "cleo": "cleo.vance@example.org"}
INSTANCES = ("threads", "prefs", "store")  # mem0 second: an instance erased before it would be a half-way change


def _build_store(root: Path) -> Path:
    from traceless.memory import Session, Turn
    from traceless.models import HashingEmbedder, ScriptedBackend
    from traceless.systems import SystemRuntime, load_system_config, open_system

    rt = SystemRuntime(ScriptedBackend(lambda m, c: "The user shared contact details."), HashingEmbedder(), "scripted")
    s = open_system("traceless", root, load_system_config("traceless", {"S": 1}), rt)
    try:  # cleo's email is nowhere here: she is found by it in one mem0 record only
        s.write([Session(user_id=p, session_id="s1", turns=[
            Turn(role="user", content=f"write to me at {EMAIL[p]}" if p != "cleo" else "call me in the morning"),
            Turn(role="assistant", content="Noted.")]) for p in PERSONS])
    finally:
        s.close()
    return root / "memory.db"


def _build_mem0_extra(cfg: Path, home: Path) -> None:
    mem = mi.mem0_memory(json.loads(cfg.read_text()), home)
    try:
        for p in ("ann", "ben", "cleo"):
            mem.add([{"role": "user", "content": f"my email is {EMAIL[p]}"}], user_id=PERSONS[p]["prefs"], infer=False)
    finally:
        mi.close(mem, "qdrant")


def _build_lg_extra(root: Path) -> None:
    import sqlite3

    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(str(root / "memories.db"), isolation_level=None, check_same_thread=False)
    try:
        store = SqliteStore(conn)
        for p in ("ann", "ben"):
            store.put(("memories", PERSONS[p]["threads"]), "contact", {"content": f"email: {EMAIL[p]}"})
    finally:
        conn.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("deployment")
    mem0_cfg = mi.build(base / "prefs", "qdrant", base / "mem0-home")
    _build_mem0_extra(mem0_cfg, base / "mem0-home")
    lg.build(base / "threads")
    _build_lg_extra(base / "threads")
    (base / "threads.json").write_text(json.dumps(lg.config(base / "threads")))
    (base / "store.json").write_text(json.dumps({"db": str(_build_store(base / "store"))}))
    return base


def _deployment_file(base: Path) -> Path:
    d = base / "deployment.toml"
    lines = ['name = "support-bot"']
    for name, system in zip(INSTANCES, ("langgraph", "mem0", "traceless"), strict=True):
        users = ", ".join(f'"{p}" = "{ids[name]}"' for p, ids in PERSONS.items())
        lines += ["", "[[instances]]", f'name = "{name}"', f'system = "{system}"', f'config = "{name}.json"',
                  f"users = {{ {users} }}"]
    d.write_text("\n".join(lines) + "\n")
    return d


@pytest.fixture
def deployment(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    base = tmp_path / "dep"
    shutil.copytree(template, base, ignore=shutil.ignore_patterns("mem0-home"))
    for name in ("prefs.json", "threads.json", "store.json"):
        (base / name).write_text((base / name).read_text().replace(str(template), str(base)))
    (base / "work").mkdir()
    monkeypatch.chdir(base / "work")
    yield _deployment_file(base)


def _fingerprint(base: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(base)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for name in INSTANCES for p in sorted((base / name).rglob("*")) if p.is_file()}


def _scan_json(dep: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    rc = cli("scan", "--deployment", str(dep), *args, "--json")
    out = capsys.readouterr().out
    return rc, json.loads(out) if out.strip() else {}


def _owners(doc: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {name: set() for name in INSTANCES}
    for s in doc["scans"]:
        out[s["instance"]] |= {h["owner"] for h in s["report"]["hits"] if h["literal_count"]}
    return out


def _forget(dep: Path, person: str, ticket: str) -> int:
    return cli("forget", "--deployment", str(dep), "--user", person, "--literal", EMAIL[person],
               "--request-id", ticket)


def test_scan_by_email_names_the_owner_in_every_instance_and_writes_nothing(
        deployment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = deployment.parent
    before = _fingerprint(base)
    rc, doc = _scan_json(deployment, capsys, "--literal", EMAIL["ann"])
    assert rc == 0
    assert _owners(doc) == {"threads": {"cust-4411"}, "prefs": {"alice"}, "store": {"ann"}}
    rc, doc = _scan_json(deployment, capsys, "--literal", EMAIL["cleo"])
    assert rc == 0 and _owners(doc) == {"threads": set(), "prefs": {"carol"}, "store": set()}
    assert all(h["value"] is None for s in doc["scans"] for h in s["report"]["hits"])  # values only with --reveal
    assert _fingerprint(base) == before  # not one byte, not one mtime in any instance


def _listing(base: Path) -> dict[str, Any]:
    """Every person's records as each system's own API lists them."""
    import sqlite3

    from langgraph.store.sqlite import SqliteStore

    from traceless.memory import MemoryStore

    mem = mi.mem0_memory(json.loads((base / "prefs.json").read_text()), base / "mem0-home")
    try:
        m0 = {p: sorted((r["id"], r["memory"]) for r in mem.get_all(filters={"user_id": ids["prefs"]},
                                                                     top_k=100)["results"])
              for p, ids in PERSONS.items()}
    finally:
        mi.close(mem, "qdrant")
    conn = sqlite3.connect(str(base / "threads" / "memories.db"), check_same_thread=False)
    try:
        store = SqliteStore(conn)
        lgs = {p: sorted((i.key, json.dumps(i.value, sort_keys=True))
                         for i in store.search(("memories", ids["threads"]), limit=100)) for p, ids in PERSONS.items()}
    finally:
        conn.close()
    with MemoryStore(str(base / "store" / "memory.db"), access="read") as st:
        own = {p: sorted(a.text or "" for a in st.artifacts(owner=ids["store"], tier="raw"))
               for p, ids in PERSONS.items()}
    return {"mem0": m0, "langgraph": lgs, "store": own}


def test_one_request_erases_the_person_everywhere_in_one_bundle_that_verifies_with_the_key_alone(
        deployment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    base = deployment.parent
    before = _listing(base)
    assert all(before[s]["ann"] for s in before)  # ann is in every system first
    assert _forget(deployment, "ann", "T-1") == 0
    bundle = Path("request-T-1")
    summary = json.loads((bundle / "bundle.json").read_text())
    assert summary["verdict"] == "erased" and summary["instances"] == list(INSTANCES)
    assert [e["instance"] for e in summary["entries"]] == list(INSTANCES)
    assert all(e["outcome"] == "erased" for e in summary["entries"])
    after = _listing(base)
    for system in after:  # the person gone from every system's own listing, everyone else's unchanged
        assert after[system]["ann"] == []
        assert {p: v for p, v in after[system].items() if p != "ann"} == {
            p: v for p, v in before[system].items() if p != "ann"}
    rc, _ = _scan_json(deployment, capsys, "--user", "ann", "--literal", EMAIL["ann"])
    assert rc == 7  # nothing of ann or her email in any instance or file
    text = "".join(p.read_text() for p in bundle.iterdir())
    assert all(v not in text for v in (*PERSONS["ann"].values(), EMAIL["ann"]))  # pseudonyms only
    # verification with the public key alone, on a machine that has no key of its own
    pub = tmp_path / "signer.pub"
    assert cli("keys", "export", "--out", str(pub)) == 0
    monkeypatch.setenv("TRACELESS_HOME", str(tmp_path / "verifier-home"))
    assert cli("forget", "verify", str(bundle), "--public-key", str(pub)) == 0
    assert not (tmp_path / "verifier-home").exists()
    _tamper_each_way(bundle, tmp_path, pub)


def _tamper_each_way(bundle: Path, tmp_path: Path, pub: Path) -> None:
    """An altered receipt, a removed one, an added one and an altered summary each fail it."""
    receipts = sorted(bundle.glob("receipt-*.json"))
    assert len(receipts) == 3

    def fails(change: Any) -> None:
        copy = tmp_path / f"copy-{len(list(tmp_path.glob('copy-*')))}"
        shutil.copytree(bundle, copy)
        change(copy)
        assert cli("forget", "verify", str(copy), "--public-key", str(pub)) != 0

    fails(lambda c: (c / receipts[1].name).write_text((c / receipts[1].name).read_text().replace(
        '"passed": true', '"passed": false', 1)))
    fails(lambda c: (c / receipts[0].name).unlink())
    fails(lambda c: shutil.copy(c / receipts[2].name, c / "receipt-extra-0.json"))
    fails(lambda c: (c / "bundle.json").write_text((c / "bundle.json").read_text().replace(
        '"T-1"', '"T-9"', 1)))


def test_an_instance_held_open_by_its_app_stops_the_request_with_nothing_changed_anywhere(
        deployment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = deployment.parent
    app = mi.mem0_memory(json.loads((base / "prefs.json").read_text()), base / "app-home")
    try:
        before = _fingerprint(base)
        capsys.readouterr()
        assert _forget(deployment, "ann", "T-3") != 0
        err = capsys.readouterr().err
        assert _fingerprint(base) == before  # LangGraph (listed before mem0) untouched too
        assert "instance 'prefs' (mem0)" in err and "in use" in err and "nothing was changed in any instance" in err
        assert len(err.strip().splitlines()) == 1
        assert not list(Path().iterdir())  # no bundle, no partial folder
    finally:
        mi.close(app, "qdrant")


def test_two_requests_keep_two_bundles_and_a_reused_id_is_refused(
        deployment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _forget(deployment, "ann", "T-1") == 0
    assert _forget(deployment, "ben", "T-2") == 0
    assert sorted(p.name for p in Path().iterdir()) == ["request-T-1", "request-T-2"]
    capsys.readouterr()
    assert _forget(deployment, "cleo", "T-1") == 2
    assert "was answered already" in capsys.readouterr().err
    for t in ("T-1", "T-2"):
        assert cli("forget", "verify", f"request-{t}") == 0


def test_export_is_exactly_what_each_api_lists_for_the_person(deployment: Path, tmp_path: Path) -> None:
    base = deployment.parent
    before = _fingerprint(base)
    listing = _listing(base)
    assert cli("export", "--deployment", str(deployment), "--user", "ann", "--out", str(tmp_path / "ex")) == 0
    assert _fingerprint(base) == before  # read-only
    files = {p.name: json.loads(p.read_text()) for p in (tmp_path / "ex").glob("*.json") if p.name != "export.json"}
    by = {(d["instance"], d["store"]): d for d in files.values()}
    vec = by[("prefs", "vector_store")]["records"]
    assert sorted((r["record_id"], r["fields"]["data"]) for r in vec) == listing["mem0"]["ann"]
    items = by[("threads", "store")]["records"]
    assert sorted(json.loads(r["record_id"])[1] for r in items) == [k for k, _ in listing["langgraph"]["ann"]]
    raw = by[("store", "raw")]["records"]
    assert sorted(v for r in raw for v in r["fields"].values()) == listing["store"]["ann"]
    text = json.dumps(files)
    for p in ("ben", "cleo"):  # nothing of anyone else
        assert EMAIL[p] not in text and all(mi.canary(PERSONS[p]["prefs"], i) not in text for i in range(3))
        assert lg.canary(PERSONS[p]["threads"]) not in text
    assert EMAIL["ann"] in text and mi.canary("alice", 0) in text


def test_scan_since_the_bundle_is_clean_until_the_app_adds_the_person_again(
        deployment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import traceless
    from traceless.keys import load_public_key

    base = deployment.parent
    assert _forget(deployment, "ann", "T-5") == 0
    since = ["--user", "ann", "--literal", EMAIL["ann"], "--since", "request-T-5"]
    assert cli("scan", "--deployment", str(deployment), *since) == 0
    bundle = Path("request-T-5")
    pub = tmp_path / "signer.pub"
    assert cli("keys", "export", "--out", str(pub)) == 0
    assert traceless.verify_bundle(bundle, public_key=load_public_key(str(pub))).ok  # from Python, as the CLI
    for r in bundle.glob("receipt-*.json"):
        assert traceless.verify(r, public_key=pub).request_id == "T-5"
    mem = mi.mem0_memory(json.loads((base / "prefs.json").read_text()), base / "app-home")
    try:  # the app writes a memory for the person again
        mem.add([{"role": "user", "content": f"new address {EMAIL['ann']}"}], user_id="alice", infer=False)
    finally:
        mi.close(mem, "qdrant")
    capsys.readouterr()
    assert cli("scan", "--deployment", str(deployment), *since) == 13
    out = capsys.readouterr()
    assert "CAME BACK" in out.err and "receipt-prefs-0.json: CAME BACK" in out.out
    assert "receipt-threads-0.json: clean" in out.out
