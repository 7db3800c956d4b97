"""Issue 36 item 1: ``scan --literal EMAIL`` (no --user) names the owner of every record that
holds it, per store, in the table and in --json: how a request that gives only an email or an
IBAN finds the person. Values stay hidden without --reveal."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from traceless.cli._erase import scan_lines
from traceless.memory import Session, Turn
from traceless.models import CachingBackend, HashingEmbedder, ScriptedBackend
from traceless.systems import MemorySystem, SystemRuntime, load_system_config, open_system, scan_system
from traceless.systems.testing import DictConfig, DictSystem

EMAIL = "ann.lee@example.org"


def _sessions() -> list[Session]:
    return [Session(user_id="cust-1", session_id="s1", turns=[Turn(role="user", content=f"mail me at {EMAIL}")]),
            Session(user_id="cust-2", session_id="s2", turns=[Turn(role="user", content="I like trains")])]


@pytest.mark.parametrize("name", ["agno", "openai-agents", "dict"])
def test_a_literal_scan_names_the_owner_of_each_record(name: str, tmp_path: Path) -> None:
    if name != "dict" and importlib.util.find_spec(name.replace("-", "_").replace("openai_agents", "agents")) is None:
        pytest.skip(f"needs traceless[{name}]")
    rt = SystemRuntime(CachingBackend(ScriptedBackend(lambda m, c: "ok")), HashingEmbedder(), "scripted")
    if name == "dict":
        sys: MemorySystem = DictSystem(tmp_path / "w", DictConfig(), rt)
    else:
        sys = open_system(name, tmp_path / "w", load_system_config(name, {}), rt)
    try:
        sys.write(_sessions())
        rep = scan_system(sys, None, [EMAIL])
    finally:
        sys.close()
    owners = {h.owner for h in rep.hits if h.literal_count}
    assert owners == {"cust-1"}, rep.hits
    lines = "\n".join(scan_lines(rep))
    assert "owner=cust-1" in lines and EMAIL not in lines  # the owner is named, the value is not
    assert '"owner": "cust-1"' in rep.model_dump_json(indent=1) and EMAIL not in rep.model_dump_json()
