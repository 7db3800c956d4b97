"""Forgetting: ``forget(store, target, mode) -> Receipt``, the registry of modes, signed
receipts and physical-erasure scans.

Modes (``traceless forget modes``): noop, raw_only, raw_plus_resummarize, full_purge,
tombstone (paper 000's ladder); exact, lineage_closure, exposure_group (paper 001).
"""

from traceless.forget import _modes as _modes  # noqa: F401  (registers the modes)
from traceless.forget._erasure import encodings_of, scan_files
from traceless.forget._forget import (
    FORGET_MODES,
    TIERS,
    ForgetMode,
    ForgetOp,
    ForgetTarget,
    forget,
    forget_mode,
)
from traceless.forget._receipt import (
    Certificate,
    CertificateProbe,
    Receipt,
    TargetRef,
    TierReport,
    Verification,
    VerifyResult,
    attach_certificate,
    check_receipt_path,
    load_receipt,
    pseudonym,
    receipt_key,
    sign,
    verify_signature,
    write_receipt,
)
from traceless.forget._verify import verify_receipt

__all__ = [
    "Certificate",
    "CertificateProbe",
    "FORGET_MODES",
    "TIERS",
    "ForgetMode",
    "ForgetOp",
    "ForgetTarget",
    "Receipt",
    "TargetRef",
    "TierReport",
    "Verification",
    "attach_certificate",
    "encodings_of",
    "forget",
    "forget_mode",
    "load_receipt",
    "receipt_key",
    "scan_files",
    "sign",
    "verify_signature",
    "check_receipt_path",
    "VerifyResult",
    "verify_receipt",
    "pseudonym",
    "write_receipt",
]

import sys as _sys  # noqa: E402

from traceless._callable import make_callable as _make_callable  # noqa: E402


def _call_api(*args: object, **kwargs: object) -> object:
    # the public function (``forget(..., certify=True)`` needs the audit engine, imported on use)
    from traceless._api import forget as api_forget

    return api_forget(*args, **kwargs)  # type: ignore[arg-type]


# `from traceless import forget; forget(store, target, mode)` works even when this package
# is imported first (importing a subpackage binds the module to the package attribute)
_make_callable(_sys.modules[__name__], _call_api)
