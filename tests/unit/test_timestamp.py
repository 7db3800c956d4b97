"""RFC 3161 time-stamps on receipts (issue 38.4), against a real TSA on loopback (``openssl ts
-reply`` behind an HTTP server the test starts): ``forget --memory ... --tsa URL`` keeps the
token in the receipt without touching its signature; ``forget verify --tsa-cert CA`` checks it
and prints the time; another root, a token moved from another receipt, or an unreachable
TSA fail, each in one line; ``forget --deployment --tsa`` stamps every receipt of the bundle
and its signed summary, and with ``--log`` appends the summary to the receipt log after its
receipts; the native ``forget --db`` takes ``--tsa`` with the same semantics."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
from pathlib import Path

import pytest

from traceless.forget import load_receipt, verify_bundle, verify_signature, write_receipt
from traceless.memory import Session, Turn
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import SystemRuntime, load_system_config, open_system

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _tsa  # noqa: E402
from _cli import cli  # noqa: E402

pytestmark = [pytest.mark.usefixtures("_home"),
              pytest.mark.skipif(shutil.which("openssl") is None, reason="the test TSA needs the openssl binary")]
IBAN = "DE89 3704 0044 0532 0130 00"


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rt = SystemRuntime(ScriptedBackend(lambda m, c: "noted"), HashingEmbedder(), "scripted")
    s = open_system("openai-agents", tmp_path / "live", load_system_config("openai-agents", {}), rt)
    try:
        s.write([Session(user_id=u, session_id=f"{u}-s1", turns=[Turn(role="user", content=f"{u} IBAN {IBAN}" if
                                                                      u == "cust-1" else f"{u} hello"),
                                                                 Turn(role="assistant", content="noted")])
                 for u in ("cust-1", "cust-2", "cust-3")])
    finally:
        s.close()
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"db_file": str(tmp_path / "live" / "sessions.db")}))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return cfg


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tsa")
    return d, _tsa.make_pki(d)


def _forget(cfg: Path, user: str, *more: str) -> int:
    return cli("forget", "--memory", "openai-agents", "--memory-config", str(cfg), "--user", user, *more)


def test_a_stamped_receipt_verifies_with_the_tsa_root_and_says_when(
        live: Path, pki: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, ca = pki
    with _tsa.tsa_server(d) as url:
        assert _forget(live, "cust-1", "--literal", IBAN, "--tsa", url, "--receipt", "r.json") == 0
        assert _forget(live, "cust-2", "--tsa", url, "--receipt", "other.json") == 0
    r = load_receipt("r.json")
    assert r.timestamp and verify_signature(r)  # the token does not touch the signature
    capsys.readouterr()
    assert cli("forget", "verify", "r.json", "--tsa-cert", str(ca), "--json") == 0
    when = dt.datetime.fromisoformat(json.loads(capsys.readouterr().out)["timestamped_at"])
    assert abs((dt.datetime.now(dt.UTC) - when).total_seconds()) < 300
    # another root: the token does not chain to it
    other = _tsa.make_pki(tmp_path / "other-pki", "other")
    assert cli("forget", "verify", "r.json", "--tsa-cert", str(other)) == 9
    # a token moved from another receipt: its imprint is another signature
    moved = r.model_copy(update={"timestamp": load_receipt("other.json").timestamp})
    write_receipt(moved, "moved.json")
    capsys.readouterr()
    assert cli("forget", "verify", "moved.json", "--tsa-cert", str(ca)) == 9
    assert "time-stamp does not verify" in capsys.readouterr().err
    assert cli("forget", "verify", "r.json") == 0  # without --tsa-cert it verifies as before


def test_a_bad_or_unreachable_tsa(live: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (live.parent / "live" / "sessions.db").read_bytes()
    assert _forget(live, "cust-1", "--tsa", "ftp://tsa.example") == 2  # refused before anything
    assert "http(s) URL" in capsys.readouterr().err
    assert (live.parent / "live" / "sessions.db").read_bytes() == before
    assert _forget(live, "cust-1", "--tsa", "http://127.0.0.1:9/tsr", "--receipt", "r.json") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no time-stamp" in err and "erasure itself is done" in err
    r = load_receipt("r.json")  # the erasure's signed receipt, without a token
    assert verify_signature(r) and not r.timestamp


def test_a_deployment_request_stamps_every_receipt(live: Path, pki: tuple[Path, Path], tmp_path: Path) -> None:
    d, ca = pki
    (tmp_path / "d.toml").write_text(f'[[instances]]\nname = "sdk"\nsystem = "openai-agents"\nconfig = "{live}"\n')
    with _tsa.tsa_server(d) as url:
        assert cli("forget", "--deployment", str(tmp_path / "d.toml"), "--user", "cust-3", "--request-id", "T-4",
                   "--tsa", url) == 0
    assert verify_bundle("request-T-4").ok  # the digest is of the stamped file
    (f,) = Path("request-T-4").glob("receipt-*.json")
    assert cli("forget", "verify", str(f), "--tsa-cert", str(ca)) == 0


def _native_store(path: Path) -> Path:
    from traceless import Memory

    with Memory(path, embedder="hashing") as mem:
        mem.add(f"My IBAN is {IBAN}, I swim on Mondays.", user="bob")
        mem.add("I like tea.", user="eve")
    return path


def test_a_native_forget_is_stamped_like_a_systems_erasure(pki: tuple[Path, Path], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    d, ca = pki
    monkeypatch.chdir(tmp_path)
    db = _native_store(tmp_path / "m.db")
    base = ["forget", "--db", str(db), "--mode", "full_purge", "--owner", "bob", "--literal", IBAN]
    with _tsa.tsa_server(d) as url:
        assert cli(*base, "--tsa", url, "--receipt", "r.json") == 0
    r = load_receipt("r.json")
    assert r.timestamp and verify_signature(r) and r.mode == "full_purge"
    capsys.readouterr()
    assert cli("forget", "verify", "r.json", "--tsa-cert", str(ca), "--json") == 0
    when = dt.datetime.fromisoformat(json.loads(capsys.readouterr().out)["timestamped_at"])
    assert abs((dt.datetime.now(dt.UTC) - when).total_seconds()) < 300
    other = _tsa.make_pki(tmp_path / "other-pki", "other")
    assert cli("forget", "verify", "r.json", "--tsa-cert", str(other)) == 9


def test_a_native_forget_with_a_bad_or_unreachable_tsa(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    db = _native_store(tmp_path / "m.db")
    before = db.read_bytes()
    base = ["forget", "--db", str(db), "--mode", "full_purge", "--owner", "bob", "--literal", IBAN]
    assert cli(*base, "--tsa", "ftp://tsa.example") == 2  # refused before anything
    assert "http(s) URL" in capsys.readouterr().err
    assert db.read_bytes() == before
    assert cli(*base, "--tsa", "http://127.0.0.1:9/tsr", "--receipt", "r.json") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no time-stamp" in err and "forget itself is done" in err
    r = load_receipt("r.json")  # the forget's signed receipt, without a token
    assert verify_signature(r) and not r.timestamp and r.verification.passed


def test_a_deployment_bundle_summary_is_stamped_and_logged(live: Path, pki: tuple[Path, Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.forget import load_bundle, verify_logged

    d, ca = pki
    (tmp_path / "d.toml").write_text(f'[[instances]]\nname = "sdk"\nsystem = "openai-agents"\nconfig = "{live}"\n')
    log = tmp_path / "log"
    with _tsa.tsa_server(d) as url:
        assert cli("forget", "--deployment", str(tmp_path / "d.toml"), "--user", "cust-3", "--request-id", "T-5",
                   "--tsa", url, "--log", str(log)) == 0
    bundle, _ = load_bundle("request-T-5")
    assert bundle.timestamp and verify_bundle("request-T-5").ok  # the stamp is not under the signature
    kinds = [json.loads(x)["kind"] for x in (log / "entries.jsonl").read_text().splitlines()]
    assert kinds == ["receipt", "bundle"]
    assert verify_logged(log, bundle).index == 1
    capsys.readouterr()
    assert cli("forget", "verify", "request-T-5", "--tsa-cert", str(ca), "--log", str(log)) == 0
    out = capsys.readouterr().out
    assert "time-stamp OK" in out and "the summary is entry 1 of 2" in out
    assert cli("log", "verify", "--log", str(log), "--receipt", "request-T-5") == 0
    assert "bundle T-5 is entry 1 of 2" in capsys.readouterr().out
    # another root; a summary re-signed with other content is not the one in the log
    other = _tsa.make_pki(tmp_path / "other-pki", "other")
    assert cli("forget", "verify", "request-T-5", "--tsa-cert", str(other)) == 9
    from traceless.forget import sign_bundle

    resigned = sign_bundle(bundle.model_copy(update={"deployment": "elsewhere"}))
    with pytest.raises(Exception, match="other content than this file"):
        verify_logged(log, resigned)
