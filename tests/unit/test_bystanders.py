"""Bystanders in every audit table: each deletion phase records whether the other users'
canaries survived each user's deletion (copies in the named stores and the system's own
retrieval), and an over-deletion is a finding in the report and the terminal table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from traceless.audit import SystemAuditConfig, bystander_cell, run_system_audit
from traceless.forget import ForgetTarget, forget
from traceless.models import CachingBackend, HashingEmbedder, ScriptedBackend
from traceless.systems import (
    MEMORY_SYSTEMS,
    DeletionTarget,
    NativeSystem,
    SystemConfig,
    SystemRuntime,
    memory_system,
)


def _runtime() -> SystemRuntime:
    return SystemRuntime(CachingBackend(ScriptedBackend(lambda m, c: "I do not know.")), HashingEmbedder(), "scripted")


@pytest.fixture
def wiping() -> Any:
    @memory_system("wipes-everyone")
    class Wipes(NativeSystem):
        """The native store with one more deletion, ``wipe_all``: every user's memory is forgotten
        (as Agno's clear_memory tool and mem0's reset do)."""

        @classmethod
        def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
            return ("full_purge", "wipe_all")

        def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
            if operation != "wipe_all":
                return super().delete(operation, target)
            for owner in sorted({a.owner for a in self.store.artifacts()}):
                forget(self.store, ForgetTarget.user(owner), "full_purge", writer=self.writer)
            return {}

    yield Wipes
    MEMORY_SYSTEMS._entries.pop("wipes-everyone")


def test_over_deletion_is_a_finding_and_a_per_user_deletion_keeps_the_bystanders(
        tmp_path: Path, wiping: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.cli._systems import print_result
    from traceless.report import render_report

    res = run_system_audit(SystemAuditConfig(system="wipes-everyone", system_config={"S": 0}, profiles=3),
                           _runtime(), tmp_path / "a")
    assert "before" not in res.bystanders
    ok, wiped = res.bystanders["full_purge"], res.bystanders["wipe_all"]
    # S=0: each user's canary is one raw turn, kept in the raw and the embedding tier (2 copies);
    # the 3 per-user deletions see 2, 1 and 0 other users' canaries still there: 4 + 2 + 0 copies
    assert ok["copies_before"] == ok["copies_after"] == 6 and ok["lost"] == {} and ok["intact"] is True
    assert ok["retrieved_after"] == ok["retrieved_before"] == 3  # the direct probe finds each one
    # the first user's wipe_all takes the other two users' canaries (4 copies); none is left later
    assert wiped["copies_before"] == 4 and wiped["copies_after"] == 0 and wiped["lost"] == {"raw": 2, "embedding": 2}
    assert wiped["intact"] is False and wiped["retrieved_before"] == 2 and wiped["retrieved_after"] == 0
    md = render_report(tmp_path / "a").read_text()
    row = next(x for x in md.splitlines() if x.startswith("| wipe_all |"))
    assert row.endswith(f"| {bystander_cell(wiped)} |") and "**NO** (0/4; embedding −2, raw −2; 2 no longer retrieved)" in row
    assert next(x for x in md.splitlines() if x.startswith("| full_purge |")).endswith("| yes (6/6) |")
    print_result(res, "scripted")
    out = capsys.readouterr().out
    assert "bystanders" in out and "NO (0/4;" in out and "yes (6/6)" in out


def test_bystander_cell_forms() -> None:
    assert bystander_cell(None) == "—"
    assert bystander_cell({"intact": True, "copies_before": 4, "copies_after": 4, "lost": {},
                           "retrieved_before": 2, "retrieved_after": 2}) == "yes (4/4)"
    assert bystander_cell({"intact": False, "copies_before": 4, "copies_after": 4, "lost": {},
                           "retrieved_before": 2, "retrieved_after": 1}) == "**NO** (4/4; 1 no longer retrieved)"
