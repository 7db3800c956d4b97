"""Erasure requests end to end on a live OpenAI Agents ``SQLiteSession`` file (the cheapest
system with a live erasure; issue 36 items 3 and 5):

* ``forget --memory ... --request-id T`` signs the ticket into the receipt, names the receipt
  file by it, and appends one line to ``<state dir>/requests.jsonl`` that names the user only by
  the receipt's pseudonym (no raw user id, no literal in the log: grepped);
* two requests in one directory keep two receipts and two log lines;
* ``scan --since RECEIPT`` re-checks: exit 0 while the person is gone, 13 once a session of
  theirs is written again (the re-written session is the one the receipt removed:
  ``resurrected``), 2 for another user or another system;
* the native ``forget --db`` takes ``--request-id`` too; receipts without the field verify as before.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from traceless.forget import Receipt, load_receipt, read_requests, request_log_path, verify_signature
from traceless.memory import Session, Turn
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import SystemRuntime, load_system_config, open_system

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import cli  # noqa: E402

pytestmark = pytest.mark.usefixtures("_home")

SYSTEM = "openai-agents"
PEOPLE = {"cust-4411": "IBAN DE89 3704 0044 0532 0130 00", "cust-9020": "ann.berg@example.org"}


def _sessions(user: str) -> list[Session]:
    return [Session(user_id=user, session_id=f"{user}-s1", turns=[
        Turn(role="user", content=f"my account is {PEOPLE[user]}, remember it"),
        Turn(role="assistant", content="noted")])]


def _write(base: Path, users: list[str]) -> None:
    system = open_system(SYSTEM, base, load_system_config(SYSTEM, {}),
                         SystemRuntime(ScriptedBackend(lambda m, c: "no"), HashingEmbedder(), "scripted"))
    try:
        system.write([s for u in users for s in _sessions(u)])
    finally:
        system.close()


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Both persons in one live sessions file; its config; the cwd an empty work folder."""
    _write(tmp_path / "live", list(PEOPLE))
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"db_file": str(tmp_path / "live" / "sessions.db")}), encoding="utf-8")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return cfg


def _forget(cfg: Path, user: str, ticket: str) -> int:
    return cli("forget", "--memory", SYSTEM, "--memory-config", str(cfg), "--user", user,
               "--literal", PEOPLE[user], "--request-id", ticket)


def _since(cfg: Path, user: str, receipt: Path, *more: str) -> int:
    return cli("scan", "--memory", SYSTEM, "--memory-config", str(cfg), "--user", user,
               "--literal", PEOPLE[user], "--since", str(receipt), *more)


def test_two_requests_keep_two_receipts_and_two_log_lines_without_personal_data(live: Path, _home: Path) -> None:
    assert _forget(live, "cust-4411", "T-1") == 0
    assert _forget(live, "cust-9020", "T-2") == 0
    receipts = {p.name.split("-erase-")[0]: load_receipt(p) for p in sorted(Path().glob("receipt-*.json"))}
    assert set(receipts) == {"receipt-T-1", "receipt-T-2"}  # named by the ticket, neither overwritten
    assert [r.request_id for r in receipts.values()] == ["T-1", "T-2"]
    assert all(verify_signature(r) and r.verification.passed for r in receipts.values())
    text = request_log_path(_home).read_text(encoding="utf-8")
    for user, literal in PEOPLE.items():  # the grep: the log names nobody
        assert user not in text and literal not in text
    lines = read_requests(_home)
    assert len(lines) == len(text.splitlines()) == 2
    for line, r in zip(lines, receipts.values(), strict=True):
        assert (line.event, line.system, line.request_id, line.verdict) == ("forget", SYSTEM, r.request_id, "erased")
        assert line.user == r.target.owner and line.user.startswith("u:")  # the receipt's own pseudonym
        (logged,) = line.receipts
        assert logged.receipt_id == r.receipt_id and load_receipt(logged.path or "") == r
    assert oct(os.stat(request_log_path(_home)).st_mode & 0o777) == "0o600"


def test_a_request_id_holding_the_user_id_or_no_ticket_is_refused(live: Path, _home: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert _forget(live, "cust-4411", "cust-4411") == 2
    assert _forget(live, "cust-4411", "T/1") == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2  # one line each
    assert not list(Path().glob("receipt-*")) and read_requests(_home) == []  # refused before anything


def test_scan_since_is_clean_until_the_person_comes_back(live: Path, tmp_path: Path, _home: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.systems import RecheckResult

    assert _forget(live, "cust-4411", "T-7") == 0
    (receipt,) = Path().glob("receipt-T-7-*.json")
    capsys.readouterr()
    assert _since(live, "cust-4411", receipt) == 0
    assert "clean: nothing of the person is there again" in capsys.readouterr().out
    _write(tmp_path / "live", ["cust-4411"])  # the app writes the erased session again
    assert _since(live, "cust-4411", receipt, "--json") == 13
    res = RecheckResult.model_validate_json(capsys.readouterr().out)
    assert res.came_back and res.request_id == "T-7" and res.user_records and res.literal_records and res.files
    assert "agent_sessions/cust-4411" in res.resurrected  # the very session the receipt removed
    assert [(e.event, e.request_id, e.verdict) for e in read_requests(_home)] == [
        ("forget", "T-7", "erased"), ("recheck", "T-7", "clean"), ("recheck", "T-7", "came_back")]
    assert "cust-4411" not in request_log_path(_home).read_text(encoding="utf-8")


def test_scan_since_refuses_another_user_or_system(live: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _forget(live, "cust-4411", "T-8") == 0
    (receipt,) = Path().glob("receipt-T-8-*.json")
    capsys.readouterr()
    assert _since(live, "cust-9020", receipt) == 2
    assert "not the user this receipt erased" in capsys.readouterr().err
    assert cli("scan", "--memory", "agno", "--memory-config", str(live), "--user", "cust-4411",
               "--since", str(receipt)) == 2
    assert "not of --memory agno" in capsys.readouterr().err
    body = json.loads(receipt.read_text(encoding="utf-8"))
    body["request_id"] = "T-9"  # altered: the signature covers the ticket id
    receipt.write_text(json.dumps(body), encoding="utf-8")
    assert _since(live, "cust-4411", receipt) == 9


def test_native_forget_takes_a_request_id(tmp_path: Path, _home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = tmp_path / "s.jsonl"
    sessions.write_text("".join(s.model_dump_json() + "\n" for s in _sessions("cust-4411")), encoding="utf-8")
    db = tmp_path / "m.db"
    assert cli("memory", "add", str(sessions), "--db", str(db), "--embedder", "hashing") == 0
    monkeypatch.chdir(tmp_path)
    assert cli("forget", "--db", str(db), "--mode", "full_purge", "--user", "cust-4411", "--request-id", "T-3") == 0
    (path,) = tmp_path.glob("receipt-T-3-rcpt-*.json")
    r = load_receipt(path)
    assert r.request_id == "T-3" and verify_signature(r)
    (line,) = read_requests(_home)
    assert (line.system, line.request_id, line.user, line.verdict) == ("traceless", "T-3", r.target.owner, "erased")
    assert "cust-4411" not in request_log_path(_home).read_text(encoding="utf-8")


def test_receipts_without_a_request_id_verify_as_before(tmp_path: Path, live: Path) -> None:
    assert cli("forget", "--memory", SYSTEM, "--memory-config", str(live), "--user", "cust-4411") == 0
    (path,) = Path().glob("receipt-erase-*.json")  # no ticket: receipt-<receipt id>.json as before
    body = json.loads(path.read_text(encoding="utf-8"))
    assert body.pop("request_id") == ""
    old = Receipt.model_validate(body)  # a receipt written before the field existed
    assert verify_signature(old) and b"request_id" not in old.payload()
    assert not verify_signature(old.model_copy(update={"request_id": "T-1"}))
