"""CrewAI 1.15.28's LanceDB table keeps a memory's categories and metadata in the columns
``categories_str`` and ``metadata_str``: the adapter's records (scan, stores, bystander
digests) must read them, or a literal kept only there is in the files' bytes and in no record.

Runs where crewai is installed (its own venv; ``TRACELESS_REQUIRE_CREWAI=1``: absence fails)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from traceless.memory import Session, Turn
from traceless.models import CachingBackend, HashingEmbedder, ScriptedBackend
from traceless.systems import SystemRuntime, load_system_config, open_system, scan_system, system_class

if os.environ.get("TRACELESS_REQUIRE_CREWAI"):
    importlib.import_module("crewai")
else:
    pytest.importorskip("crewai")

SECRET_SESSION = "acct-QX7-SESSIONSECRET-4411"  # an app's session id that is itself personal data


def test_a_literal_kept_only_in_a_memorys_metadata_is_found_in_its_record(tmp_path: Path) -> None:
    rt = SystemRuntime(CachingBackend(ScriptedBackend(lambda m, c: "no")), HashingEmbedder(), "scripted")
    system = open_system("crewai", tmp_path / "m", load_system_config("crewai", {}), rt)
    try:  # the adapter records the session id in the memory's metadata (CrewAI's metadata_str)
        system.write([Session(user_id="alice", session_id=SECRET_SESSION, turns=[
            Turn(role="user", content="I like hiking"), Turn(role="assistant", content="noted")])])
    finally:
        system.close()
    cfg = load_system_config("crewai", {"storage_path": str(tmp_path / "m" / "memory")})
    rep = scan_system(system_class("crewai").attach(cfg, read_only=True), None, [SECRET_SESSION], reveal=True)
    assert rep.files  # the bytes are in LanceDB's data files ...
    hits = [h for h in rep.hits if h.store == "memories" and h.literal_count]
    assert len(hits) == 1 and hits[0].value is not None and "conversation" in hits[0].value  # ... and in the record
