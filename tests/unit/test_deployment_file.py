"""The deployment file and ``--deployment``'s bad input (issue 36.2): each mistake is one line
that says the fix, exit 2 (5 for a file that does not parse), before any instance is opened; a two-instance request on the
cheapest live systems (an OpenAI Agents ``SQLiteSession`` file and traceless's store) writes
one bundle whose receipts are bound by the signed summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from traceless.memory import Session, Turn
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import SystemRuntime, load_system_config, open_system

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import cli  # noqa: E402

pytestmark = pytest.mark.usefixtures("_home")
IBAN = "DE89 3704 0044 0532 0130 00"


def _rt() -> SystemRuntime:
    return SystemRuntime(ScriptedBackend(lambda m, c: "noted"), HashingEmbedder(), "scripted")


def _sessions(*users: str) -> list[Session]:
    return [Session(user_id=u, session_id=f"{u}-s1", turns=[Turn(role="user", content=f"{u}: my IBAN is {IBAN}"
                                                                 if u == "cust-1" else f"{u}: hello"),
                                                            Turn(role="assistant", content="noted")]) for u in users]


@pytest.fixture
def dep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for system, sub in (("openai-agents", "sdk"), ("traceless", "store")):
        s = open_system(system, tmp_path / sub, load_system_config(system, {"S": 1} if system == "traceless" else {}),
                        _rt())
        try:
            s.write(_sessions("cust-1", "cust-2"))
        finally:
            s.close()
    (tmp_path / "sdk.json").write_text(json.dumps({"db_file": str(tmp_path / "sdk" / "sessions.db")}))
    (tmp_path / "store.json").write_text(json.dumps({"db": str(tmp_path / "store" / "memory.db")}))
    d = tmp_path / "d.toml"
    d.write_text('[[instances]]\nname = "sdk"\nsystem = "openai-agents"\nconfig = "sdk.json"\n\n'
                 '[[instances]]\nname = "store"\nsystem = "traceless"\nconfig = "store.json"\n')
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return d


@pytest.mark.parametrize(("text", "says"), [
    ('[[instances]]\nname = "a"\nsystem = "openai-agents"\nconfig = "nope.json"\n', "does not exist"),
    ('[[instances]]\nname = "a"\nsystem = "no-such"\nconfig = "sdk.json"\n', "no-such"),
    ('[[instances]]\nname = "a"\nsystem = "openai-agents"\nconfig = "sdk.json"\ncolour = 1\n', "unknown key"),
    ('[[instances]]\nname = "a/b"\nsystem = "openai-agents"\nconfig = "sdk.json"\n', "letters, digits"),
    ('[[instances]]\nname = "a"\nsystem = "openai-agents"\nconfig = "sdk.json"\n' * 2, "two instances are named"),
    ("instances = []\n", "no instances"),
    ("[[instances]\n", "not valid TOML"),
])
def test_a_bad_deployment_file_is_one_line_before_anything(dep: Path, text: str, says: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    bad = dep.with_name("bad.toml")
    bad.write_text(text)
    before = (dep.parent / "sdk" / "sessions.db").read_bytes()
    capsys.readouterr()
    code = 5 if "TOML" in says else 2  # InputFormatError: the file's syntax; ConfigError: what it says
    assert cli("forget", "--deployment", str(bad), "--user", "cust-1", "--request-id", "T-1") == code
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err
    assert (dep.parent / "sdk" / "sessions.db").read_bytes() == before and not list(Path().iterdir())


@pytest.mark.parametrize(("args", "says"), [
    (["--user", "cust-1"], "needs --request-id"),
    (["--user", "cust-1", "--request-id", "T-1", "--dry-run"], "per instance"),
    (["--user", "cust-1", "--request-id", "cust-1"], "holds the user id"),
    (["--request-id", "T-1"], "name whom to find"),
])
def test_bad_request_options_are_refused(dep: Path, args: list[str], says: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli("forget", "--deployment", str(dep), *args) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err


def test_several_users_without_a_deployment_are_refused(dep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = dep.parent / "sdk.json"
    assert cli("forget", "--memory", "openai-agents", "--memory-config", str(cfg), "--user", "a", "--user", "b") == 2
    assert "--deployment" in capsys.readouterr().err


def test_a_request_across_two_instances_is_one_bound_bundle(dep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.forget import load_receipt, verify_bundle

    assert cli("forget", "--deployment", str(dep), "--user", "cust-1", "--literal", IBAN, "--request-id", "T-7") == 0
    res = verify_bundle("request-T-7")
    assert res.ok and [c.status for c in res.receipts] == ["ok", "ok"]
    for c in res.receipts:
        r = load_receipt(Path("request-T-7") / c.receipt_file)
        assert r.request_id == "T-7" and r.verification.passed
    capsys.readouterr()
    assert cli("scan", "--deployment", str(dep), "--user", "cust-1", "--literal", IBAN) == 7  # gone from both
    assert cli("scan", "--deployment", str(dep), "--user", "cust-2") == 0  # the other user is still there
    capsys.readouterr()
    assert cli("scan", "--deployment", str(dep), "--literal", "cust-2: hello") == 0
    assert "store: literals held by cust-2\n" in capsys.readouterr().out  # each owner named once per instance
    # a receipt of another request put in its place fails the bundle
    assert cli("forget", "--deployment", str(dep), "--user", "cust-2", "--request-id", "T-8") == 0
    other = sorted(Path("request-T-8").glob("receipt-sdk-*.json"))[0]
    mine = sorted(Path("request-T-7").glob("receipt-sdk-*.json"))[0]
    mine.write_bytes(other.read_bytes())
    assert [c.status for c in verify_bundle("request-T-7").receipts][0] == "altered"
    assert cli("forget", "verify", "request-T-7") == 11


def test_the_bundle_is_one_page_for_the_dpo_in_headless_chromium(dep: Path, tmp_path: Path) -> None:
    """Issue 36.6: ``report request-T-1 --html``, offline, checked in Chromium: every instance,
    outcome and receipt file on the page, no console error, a screenshot that is not blank;
    the page of an altered bundle says FAILED (the check can fail)."""
    import html
    import os
    import re
    import shutil

    from test_report_html import CHROMIUM, _browser_check

    if CHROMIUM is None and not os.environ.get("TRACELESS_REQUIRE_BROWSER"):
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    assert CHROMIUM is not None, "TRACELESS_REQUIRE_BROWSER is set but chromium is not installed"
    assert cli("forget", "--deployment", str(dep), "--user", "cust-1", "--literal", IBAN, "--request-id", "T-1") == 0
    assert cli("report", "request-T-1", "--html") == 0
    page = (Path("request-T-1") / "request.html").resolve()
    dom, errors, pixels = _browser_check(page, tmp_path)
    assert errors == []
    text = html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"</?(code|strong|em)\b[^>]*>", "", dom)))
    assert "Erasure request T-1" in text and "Verdict: erased" in text and "against the key it names: OK" in text
    for name in ("receipt-sdk-0.json", "receipt-store-0.json"):
        assert re.search(rf"{re.escape(name)}\s+\S.*?\s+ok", text, re.S), name
    assert "cust-1" not in text and IBAN not in text  # pseudonyms only
    assert pixels.std() > 10 and (pixels < 128).mean() > 0.005  # text on the screen, not a blank page
    bad = tmp_path / "bad"
    shutil.copytree("request-T-1", bad)
    (bad / "receipt-sdk-0.json").unlink()
    assert cli("report", str(bad), "--html") == 0
    dom, _, _ = _browser_check(bad / "request.html", tmp_path)
    assert "FAILED" in dom and "missing" in dom


def test_progress_is_a_bar_with_eta_on_a_terminal_and_nothing_in_a_pipe(dep: Path) -> None:
    """Issue 36.7: stderr a terminal → rich's bar (instances counted, elapsed, ETA); stderr a
    pipe → no bar; stdout stays one JSON document either way."""
    import os
    import subprocess

    exe = str(Path(sys.executable).with_name("traceless"))
    args = [exe, "scan", "--deployment", str(dep), "--user", "cust-1", "--json"]
    env = {**os.environ, "COLUMNS": "160", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    env.pop("TERM_PROGRAM", None)
    master, slave = os.openpty()
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=slave, env=env, timeout=120)
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
    tty_err = b"".join(chunks).decode("utf-8", "replace")
    assert p.returncode == 0 and json.loads(p.stdout)["scans"]
    assert "ETA" in tty_err and "instances" in tty_err and "2/2" in tty_err, tty_err[-800:]
    assert "cust-1" not in tty_err  # names of instances only
    q = subprocess.run(args, capture_output=True, env=env, timeout=120)
    assert q.returncode == 0 and json.loads(q.stdout)["scans"] and "ETA" not in q.stderr.decode()


def test_scan_with_several_ids_of_one_person_scans_each(dep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 36.1: ``--user`` repeated on one instance (``--memory``): one scan per id."""
    cfg = dep.parent / "sdk.json"
    capsys.readouterr()
    assert cli("scan", "--memory", "openai-agents", "--memory-config", str(cfg), "--user", "cust-1", "--user",
               "cust-2", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["report"]["user"] for s in doc["scans"]] == ["cust-1", "cust-2"]
    assert all(any(h["owner_match"] for h in s["report"]["hits"]) for s in doc["scans"])
    assert cli("scan", "--deployment", str(dep), "--memory", "openai-agents", "--user", "cust-1") == 2
