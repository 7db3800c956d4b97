"""Audits: canaries, probes, memory views, and the ``traceless audit`` job."""

from traceless.audit._audit import PAPER_LADDER, AuditConfig, AuditResult, AuditRow, run_audit
from traceless.audit._canary import (
    CANARY_SPACE,
    CANARY_WORDS,
    canary_sentence,
    inject_canary,
    is_canary,
    make_canary,
)
from traceless.audit._engine import VIEWS, probe_view, view_config
from traceless.audit._probes import PROBE_LEVELS, Probe, extracted, probes
from traceless.audit._synthetic import synthetic_users

__all__ = [
    "AuditConfig",
    "AuditResult",
    "AuditRow",
    "CANARY_SPACE",
    "CANARY_WORDS",
    "PAPER_LADDER",
    "PROBE_LEVELS",
    "Probe",
    "VIEWS",
    "canary_sentence",
    "extracted",
    "inject_canary",
    "is_canary",
    "make_canary",
    "probe_view",
    "probes",
    "run_audit",
    "synthetic_users",
    "view_config",
]
