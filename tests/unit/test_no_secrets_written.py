"""Issue 40 item 7: no secret of the user in anything traceless writes. The redaction
function by key name and by value shape, and a real mem0 audit (the mem0 package, its
bundled MiniLM embedder, a scripted agent) whose config carries a distinctive secret in
every field where users put keys and passwords: no file of the audit dir, its report
(markdown and HTML) or its ``study export`` bundle holds any of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceless._secrets import REDACTED, redact_secrets, redact_text


def test_secret_named_keys_are_redacted_whole() -> None:
    cfg = {"api_key": "k1", "apiKey": "k2", "password": "p", "x-auth-token": "t", "Authorization": "Bearer z",
           "client_secret": "s", "credentials": ["u", "p"], "aws_access_key_id": "AK", "refresh_token": "r"}
    out = redact_secrets(cfg)
    assert set(out.values()) == {REDACTED}


def test_innocent_keys_and_unset_secrets_are_kept() -> None:
    cfg = {"author": "ann", "max_tokens": 5, "tokenizer": "bpe", "model": "gpt", "path": "/tmp/q",
           "api_key": None, "password": "", "collection_name": "mem0", "embedding_dims": 384}
    assert redact_secrets(cfg) == cfg


def test_secret_shaped_values_are_redacted_under_any_key() -> None:
    out = redact_secrets({"connection_string": "postgresql://ann:PGPASS99@db.example:5432/m",
                          "api_base": "https://user:BASICPW@proxy.example/v1", "note": "use sk-proj-ABCDEFGH1234",
                          "hdr": "Bearer eyJhbGciOiJIUzI1", "dsn_text": "host=db password=LIBPQPW user=a",
                          "url": "https://h.example/v1?api_key=QUERYKEY1&x=1", "nested": [{"conn": "redis://:RPW@h"}]})
    text = repr(out)
    for s in ("PGPASS99", "BASICPW", "sk-proj-ABCDEFGH1234", "eyJhbGciOiJIUzI1", "LIBPQPW", "QUERYKEY1", "RPW"):
        assert s not in text
    assert out["connection_string"] == f"postgresql://ann:{REDACTED}@db.example:5432/m"
    assert "x=1" in out["url"]


def test_redact_text_keeps_plain_text_and_the_input_unchanged() -> None:
    assert redact_text("a plain sentence about tokens and passwords") == "a plain sentence about tokens and passwords"
    live = {"llm": {"config": {"api_key": "LIVEKEY"}}}
    redact_secrets(live)
    assert live["llm"]["config"]["api_key"] == "LIVEKEY"  # the live config is what opens the system


SECRETS = {
    "llm_key": "sk-LLMKEYtl40zzq", "emb_key": "EMBKEYtl40zzq", "vs_password": "VSPWtl40zzq",
    "conn_pw": "CONNPWtl40zzq", "basic_pw": "BASICtl40zzq", "token": "TOKENtl40zzq", "bearer": "BEARERtl40zzq",
}


def _mem0_config() -> dict[str, object]:
    from traceless.models import minilm_path

    s = SECRETS
    return {
        "infer": False,
        "llm": {"provider": "openai", "config": {
            "model": "unused", "api_key": s["llm_key"],
            "openai_base_url": f"http://user:{s['basic_pw']}@127.0.0.1:9/v1"}},
        "embedder": {"provider": "huggingface", "config": {
            "model": str(minilm_path()), "embedding_dims": 384, "api_key": s["emb_key"],
            "huggingface_base_url": None}},
        "vector_store": {"provider": "qdrant", "config": {"collection_name": "mem0", "path": "unused",
                                                          "api_key": s["token"], "on_disk": True}},
        "custom_instructions": f"Authorization: Bearer {s['bearer']} postgresql://a:{s['conn_pw']}@h/db "
                               f"password={s['vs_password']}",
    }


@pytest.mark.slow
def test_a_mem0_audit_report_and_export_hold_no_secret(tmp_path: Path) -> None:
    pytest.importorskip("mem0")
    from test_system_audit import _parrot

    from traceless.audit import SystemAuditConfig, run_system_audit
    from traceless.models import CachingBackend, HashingEmbedder, ScriptedBackend
    from traceless.report import render_html_report, render_report
    from traceless.run import export_bundle
    from traceless.systems import SystemRuntime

    out = tmp_path / "audit"
    cfg = SystemAuditConfig(system="mem0", system_config=_mem0_config(), model="scripted", profiles=1,
                            operations=("delete",), max_new_tokens=8)
    run_system_audit(cfg, SystemRuntime(CachingBackend(ScriptedBackend(_parrot)), HashingEmbedder(), "scripted"), out)
    render_report(out)
    render_html_report(out)
    export_bundle(out, tmp_path / "bundle")
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "manifest.json" for p in files) and any(p.suffix == ".html" for p in files)
    hits = [(p.relative_to(tmp_path), name) for p in files for name, s in SECRETS.items()
            if s.encode() in p.read_bytes()]
    assert hits == []
