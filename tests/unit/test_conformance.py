"""The erasure conformance suite (``traceless.systems.conformance``): on the suite's own test
system (``DictSystem``), on that system made wrong on purpose (each check must be able to
fail), and on every registered built-in system whose package is installed (derived from the
registry: a new system is picked up without editing this file)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import Capability, SystemRuntime, load_entry_points, system_class, system_status
from traceless.systems.conformance import CHECKS, run_conformance
from traceless.systems.testing import register_dict_system

RUNTIME = SystemRuntime(ScriptedBackend(lambda m, c: "noted"), HashingEmbedder(), "scripted")


def _kernel_systems() -> list[str]:
    """Registered systems that attach to a live instance and whose package is installed here."""
    load_entry_points()
    return [s.name for s in system_status() if s.installed and Capability.LIVE in system_class(s.name).capabilities]


def test_the_suite_passes_its_own_test_system(tmp_path: Path) -> None:
    register_dict_system()
    report = run_conformance("dict", RUNTIME, tmp_path)
    assert set(report.checks) == set(CHECKS)
    assert report.passed, report.failures()


@pytest.mark.parametrize("bug, fails", [
    ("over-delete", "bystanders_intact"),
    ("keep-fact", "erasure_complete"),
    ("write-on-scan", "scan_changes_no_byte"),
])
def test_each_check_fails_a_system_that_breaks_it(tmp_path: Path, bug: str, fails: str) -> None:
    register_dict_system()
    report = run_conformance("dict", RUNTIME, tmp_path, config={"bug": bug},
                             checks=("scan_changes_no_byte", "erasure_complete", "bystanders_intact"))
    assert not report.checks[fails].passed, report.checks[fails].detail


def test_the_certify_check_fails_a_system_that_erases_before_its_probes_can_run(tmp_path: Path) -> None:
    register_dict_system()
    checks = ("certify_refused_or_runs",)
    good = run_conformance("dict", RUNTIME, tmp_path / "good", checks=checks).checks["certify_refused_or_runs"]
    assert good.passed and "refused before the erasure" in good.detail, good.detail
    bad = run_conformance("dict", RUNTIME, tmp_path / "bad", config={"bug": "certify-unchecked"}, checks=checks)
    assert not bad.checks["certify_refused_or_runs"].passed, bad.checks["certify_refused_or_runs"].detail


@pytest.mark.parametrize("name", _kernel_systems())
def test_every_registered_live_system_conforms(tmp_path: Path, name: str) -> None:
    report = run_conformance(name, RUNTIME, tmp_path)
    assert report.passed, report.failures()


def test_the_crewai_venv_runs_the_suite_on_its_three_systems() -> None:
    """CI runs this file in the CrewAI/ADK/Strands venv too (``TRACELESS_REQUIRE_CREWAI=1``):
    there, a system missing from the suite is a failure, not a skip."""
    if not os.environ.get("TRACELESS_REQUIRE_CREWAI"):
        pytest.skip("runs in the CrewAI/ADK/Strands venv (TRACELESS_REQUIRE_CREWAI=1)")
    assert {"crewai", "adk", "strands"} <= set(_kernel_systems())
