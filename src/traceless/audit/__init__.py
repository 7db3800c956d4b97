"""Audits: canaries, probes, memory views, the ``traceless audit`` job and the audit engine
for any memory system (``run_system_audit``)."""

import sys

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
from traceless.audit._system_audit import (
    SystemAuditConfig,
    SystemAuditResult,
    SystemAuditRow,
    plant_canaries,
    run_system_audit,
)

__all__ = [
    "AuditConfig",
    "AuditResult",
    "AuditRow",
    "CANARY_SPACE",
    "CANARY_WORDS",
    "PAPER_LADDER",
    "PROBE_LEVELS",
    "Probe",
    "SystemAuditConfig",
    "SystemAuditResult",
    "SystemAuditRow",
    "VIEWS",
    "canary_sentence",
    "extracted",
    "inject_canary",
    "is_canary",
    "make_canary",
    "plant_canaries",
    "probe_view",
    "probes",
    "run_audit",
    "run_system_audit",
    "synthetic_users",
    "view_config",
]


def _call_api(*args: object, **kwargs: object) -> object:
    from traceless._api import audit

    return audit(*args, **kwargs)  # type: ignore[arg-type]


from traceless._callable import make_callable as _make_callable  # noqa: E402

# `from traceless import audit; audit("mem0", ...)` (this package is also the function)
_make_callable(sys.modules[__name__], _call_api)
