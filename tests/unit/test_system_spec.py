"""``--memory NAME`` is resolved once, at the edge (issue 34): ``resolve_system`` looks the name
up and validates the config once, and the ``SystemSpec`` it returns is passed down, so
``scan`` and ``forget --memory`` look the system up once and validate its config once (the
CLI looked the name up twice per command, a mem0 audit 22 times with 5 validations)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cli import cli  # noqa: E402

from traceless.errors import ConfigError  # noqa: E402
from traceless.memory import Session, Turn  # noqa: E402
from traceless.models import HashingEmbedder, ScriptedBackend  # noqa: E402
from traceless.systems import MEMORY_SYSTEMS, SystemRuntime, open_system, resolve_system  # noqa: E402

pytestmark = pytest.mark.usefixtures("_home")
IBAN = "DE89 3704 0044 0532 0130 00"


def _store(tmp_path: Path) -> Path:
    """A traceless store of two users, and the config of it as the live instance."""
    rt = SystemRuntime(ScriptedBackend(lambda m, c: "The user keeps an IBAN."), HashingEmbedder(), "scripted")
    work = tmp_path / "app"
    s = open_system(resolve_system("traceless", {"S": 1}), work, None, rt)
    try:
        s.write([Session(user_id=u, session_id="s1", turns=[Turn(role="user", content=f"my IBAN is {v}")])
                 for u, v in (("alice", IBAN), ("bob", "GB29 NWBK 6016 1331 9268 19"))])
    finally:
        s.close()
    cfg = tmp_path / "traceless.json"
    cfg.write_text(json.dumps({"db": str(work / "memory.db")}))
    return cfg


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Every registry lookup of a memory system and every validation of its config."""
    seen: Counter[str] = Counter()
    get = MEMORY_SYSTEMS.get
    cls = MEMORY_SYSTEMS.get("traceless").config_class
    validate = cls.model_validate

    def counted_get(name: str) -> Any:
        seen["lookup"] += 1
        return get(name)

    def counted_validate(obj: Any, *args: Any, **kwargs: Any) -> Any:
        seen["validation"] += 1
        return validate(obj, *args, **kwargs)

    monkeypatch.setattr(MEMORY_SYSTEMS, "get", counted_get)
    monkeypatch.setattr(cls, "model_validate", counted_validate)
    yield seen


@pytest.mark.parametrize("verb", [("scan",), ("forget", "--dry-run"), ("forget", "--literal", IBAN)])
def test_scan_and_forget_resolve_the_memory_once(tmp_path: Path, calls: Counter[str], verb: tuple[str, ...],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _store(tmp_path)
    monkeypatch.chdir(tmp_path)  # forget writes its receipt here
    calls.clear()
    assert cli(verb[0], "--memory", "traceless", "--memory-config", str(cfg), "--user", "alice", *verb[1:]) == 0
    assert calls == Counter(lookup=1, validation=1), calls


def test_a_spec_is_not_given_a_second_config(tmp_path: Path) -> None:
    from traceless import scan

    with pytest.raises(ConfigError, match="give no other config"):
        scan(resolve_system("traceless", {"db": str(tmp_path / "m.db")}), {"db": "other.db"}, user="alice")


def test_resolve_fills_defaults_under_the_given_keys() -> None:
    spec = resolve_system("traceless", {"S": 2}, defaults={"S": 0, "k": 2})
    assert (spec.name, spec.cls, spec.config.S, spec.config.k) == ("traceless", MEMORY_SYSTEMS.get("traceless"), 2, 2)
    with pytest.raises(ConfigError, match="unknown key 'nope'"):
        resolve_system("traceless", {"nope": 1})


def test_an_audit_resolves_the_memory_once(tmp_path: Path, calls: Counter[str]) -> None:
    """The audit on the traceless store, every phase with traceless's own erasure after it
    (``erasure_claims``): one lookup and one validation (a mem0 audit made 22 and 5)."""
    from traceless.audit import SystemAuditConfig, run_system_audit

    rt = SystemRuntime(ScriptedBackend(lambda m, c: "I do not know."), HashingEmbedder(), "scripted")
    spec = resolve_system("traceless", {"S": 1, "modes": ["noop", "raw_only"]})
    run_system_audit(SystemAuditConfig(system="traceless", system_config={"S": 1, "modes": ["noop", "raw_only"]},
                                       profiles=2), rt, tmp_path / "a", spec=spec)
    assert calls == Counter(lookup=1, validation=1), calls
