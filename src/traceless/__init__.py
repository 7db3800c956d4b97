"""traceless: agent memory that can prove it forgot.

The public API (imported on first use, so ``import traceless`` stays light)::

    from traceless import Memory, forget, verify, audit, MEMORY_SYSTEMS, FORGET_MODES

``forget`` and ``audit`` are the ``traceless.forget`` / ``traceless.audit`` packages made
callable (a subpackage import rebinds the package attribute, so the name cannot hold a
plain function): ``forget(store, target, mode, certify=...)`` calls
``traceless._api.forget`` and ``audit(system, ...)`` calls ``traceless._api.audit``. Type
checkers see those two functions (declared below), so typed code calls them as documented.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from traceless._version import __version__, code_version

if TYPE_CHECKING:
    from traceless._api import Memory, audit, forget, scan, verify
    from traceless.audit import SystemAuditResult
    from traceless.forget import FORGET_MODES, ForgetTarget, Receipt
    from traceless.systems import MEMORY_SYSTEMS, MemorySystem, memory_system

__all__ = [
    "FORGET_MODES",
    "ForgetTarget",
    "MEMORY_SYSTEMS",
    "Memory",
    "MemorySystem",
    "Receipt",
    "SystemAuditResult",
    "__version__",
    "audit",
    "code_version",
    "forget",
    "memory_system",
    "scan",
    "verify",
]

_LAZY = {
    "Memory": "traceless._api", "verify": "traceless._api", "scan": "traceless._api",
    "SystemAuditResult": "traceless.audit",
    "FORGET_MODES": "traceless.forget", "ForgetTarget": "traceless.forget", "Receipt": "traceless.forget",
    "MEMORY_SYSTEMS": "traceless.systems", "MemorySystem": "traceless.systems", "memory_system": "traceless.systems",
}


def __getattr__(name: str) -> Any:
    if name in ("forget", "audit"):  # the subpackage, made callable (see traceless._callable)
        return importlib.import_module(f"traceless.{name}")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'traceless' has no attribute {name!r}")
