"""The behavioural deletion certificate (`forget --certify`): the audit engine's probes after
the forget, signed into the receipt; `forget verify` checks it (scripted models)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from traceless import Memory, verify
from traceless.errors import ConfigError, ReceiptError, TracelessError
from traceless.forget import ForgetTarget, Receipt, load_receipt, verify_receipt, verify_signature
from traceless.models import ChatMessage, GenerationConfig, ScriptedBackend

SECRET = "QX4-AMBER-1234"
TOKEN = re.compile(r"[A-Z]{2}\d-[A-Z]+-\d{4}")


def _parrot(messages: list[ChatMessage], config: GenerationConfig) -> str:
    """Summaries keep the token; the agent repeats any token its memory shows it."""
    if "Messages:" in messages[-1].content:
        found = TOKEN.findall(messages[-1].content)
        return "- swims on Mondays\n" + (f"- locker code {found[0]}" if found else "")
    found = TOKEN.findall(messages[0].content)
    return f"Your locker code is {found[0]}." if found else "I do not know."


def _memory(path: Path) -> Memory:
    mem = Memory(path, embedder="hashing", model=ScriptedBackend(_parrot), levels=(1,))
    mem.add(f"My locker code is {SECRET}, I swim on Mondays.", user="bob")
    mem.add("I keep bees in the garden.", user="bob")
    return mem


def test_full_purge_certificate_passes_and_is_signed(tmp_path: Path) -> None:
    with _memory(tmp_path / "m.db") as mem:
        r = mem.forget(SECRET, user="bob", mode="full_purge", certify=True, model=ScriptedBackend(_parrot))
        c = r.certificate
        assert c is not None and verify_signature(r)
        assert {p.view for p in c.probes} == {"agent", "raw", "summary"} and len(c.probes) == 9
        assert c.aer == {v: {"direct": 0.0, "indirect": 0.0, "jailbreak": 0.0} for v in ("agent", "raw", "summary")}
        assert c.store_copies and not any(c.store_copies.values()) and c.failures() == []
        assert r.verification.checks["certificate_no_extraction"] and r.verification.passed
        assert all(p.reply_digest.startswith("r:") and p.context_items > 0 for p in c.probes)
        assert SECRET not in r.model_dump_json()  # replies are kept as keyed digests only
        assert verify(r, mem) is r
        stored = Receipt.model_validate_json(mem.store.receipt(r.receipt_id))
        assert stored.certificate == c and verify_signature(stored)  # the db's copy carries it too


def test_noop_certificate_fails_with_reasons(tmp_path: Path) -> None:
    with _memory(tmp_path / "m.db") as mem:
        r = mem.forget(SECRET, user="bob", mode="noop", certify=True, model=ScriptedBackend(_parrot))
    c = r.certificate
    assert c is not None and verify_signature(r)  # the signature covers a failing certificate too
    assert c.aer["agent"]["direct"] == 1.0 and c.store_copies["raw"] == 1 and c.store_copies["summary"] == 1
    assert not r.verification.passed
    assert not r.verification.checks["certificate_no_extraction"]
    assert not r.verification.checks["certificate_no_store_copies"]
    assert any("still produced the literal under direct probes" in w for w in r.warnings)
    res, _ = verify_receipt(r)
    assert res.signature_ok and res.certified and not res.ok
    assert "store 'raw' still holds 1 copy of the literal" in res.certificate_failures
    with pytest.raises(ReceiptError, match="certificate fails: the agent still produced"):
        verify(r)


def test_a_model_that_knows_the_secret_fails_the_certificate(tmp_path: Path) -> None:
    """Every store is clean after full_purge, but the model itself produces the literal
    (e.g. it was fine-tuned on it): only the behavioural part catches that."""
    with _memory(tmp_path / "m.db") as mem:
        r = mem.forget(SECRET, user="bob", mode="full_purge", certify=True,
                       model=ScriptedBackend(default=f"It is {SECRET}."))
    c = r.certificate
    assert c is not None and not any(c.store_copies.values())
    assert c.aer["agent"] == {"direct": 1.0, "indirect": 1.0, "jailbreak": 1.0}
    res, _ = verify_receipt(r)
    assert not res.ok and not r.verification.passed


def test_tampered_certificate_breaks_the_signature(tmp_path: Path) -> None:
    with _memory(tmp_path / "m.db") as mem:
        r = mem.forget(SECRET, user="bob", mode="noop", certify=True, model=ScriptedBackend(_parrot))
    assert r.certificate is not None
    clean = r.certificate.model_copy(update={"aer": {"agent": {"direct": 0.0}}, "store_copies": {"raw": 0}})
    forged = r.model_copy(update={"certificate": clean})
    assert not verify_signature(forged)
    res, _ = verify_receipt(forged)
    assert not res.signature_ok and not res.ok


def test_receipts_without_a_certificate_verify_as_before(tmp_path: Path) -> None:
    """A receipt written before certificates existed has no 'certificate' key at all."""
    with _memory(tmp_path / "m.db") as mem:
        r = mem.forget(SECRET, user="bob", mode="full_purge")
    assert r.certificate is None and verify_signature(r)
    old = json.loads(r.model_dump_json())
    del old["certificate"]
    p = tmp_path / "old.json"
    p.write_text(json.dumps(old))
    res, _ = verify_receipt(load_receipt(p))
    assert res.ok and not res.certified


def test_certify_needs_a_literal_and_forgets_nothing_otherwise(tmp_path: Path) -> None:
    from traceless import forget

    with _memory(tmp_path / "m.db") as mem:
        n = len(mem.store.artifacts())
        with pytest.raises(ConfigError, match="certify needs a literal target"):
            forget(mem.store, ForgetTarget(kind="user", value="bob", owner="bob"), "full_purge", certify=True,
                   model=ScriptedBackend(_parrot))
        assert len(mem.store.artifacts()) == n
        # the agent's model is loaded before the forget: a model that is not there changes nothing
        with pytest.raises(TracelessError, match="no-such-model"):
            forget(mem.store, ForgetTarget.literal(SECRET, "bob"), "full_purge", certify=True, model="no-such-model")
        assert len(mem.store.artifacts()) == n and mem.store.containing(SECRET)


def _cli(args: list[str]) -> int:
    from traceless.cli import main

    with pytest.raises(SystemExit) as e:
        main(args)
        raise SystemExit(0)
    return int(e.value.code or 0)


def test_cli_certify_and_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    _memory(db).close()
    base = ["forget", "--db", str(db), "--literal", SECRET, "--owner", "bob", "--certify"]
    # a model that still says the secret: the certificate fails, exit 11, verify fails too
    leaky = tmp_path / "leaky.json"
    assert _cli([*base, "--mode", "noop", "--model", f"scripted:Sure: {SECRET}", "--receipt", str(leaky)]) == 11
    assert "certificate:" in capsys.readouterr().out
    assert _cli(["forget", "verify", str(leaky)]) == 11
    assert "certificate FAILED: the agent still produced the literal" in capsys.readouterr().err
    assert _cli(["forget", "verify", str(leaky), "--json"]) == 11
    doc = json.loads(capsys.readouterr().out)
    assert doc["certified"] and doc["certificate_failures"] and not doc["ok"]
    # full_purge and a model that does not know it: passes
    good = tmp_path / "good.json"
    assert _cli([*base, "--mode", "full_purge", "--model", "scripted:I cannot say.", "--receipt", str(good)]) == 0
    assert _cli(["forget", "verify", str(good), "--db", str(db)]) == 0
    assert "certificate OK: 9 probes" in capsys.readouterr().out
    assert SECRET not in good.read_text()
    # --certify on a non-literal target: refused before anything is forgotten
    assert _cli(["forget", "--db", str(db), "--mode", "full_purge", "--user", "bob", "--certify"]) == 2
    assert "--certify needs --literal" in capsys.readouterr().err
