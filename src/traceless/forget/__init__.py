"""Forgetting: ``forget(store, target, mode) -> Receipt``, the registry of modes, signed
receipts and physical-erasure scans.

Modes (``traceless forget modes``): noop, raw_only, raw_plus_resummarize, full_purge,
tombstone (paper 000's ladder); exact, lineage_closure, exposure_group (paper 001).

The public verb ``traceless.forget(...)`` (the write gate on by default, ``certify=``) is the
plain function ``traceless._api.forget``; ``forget`` here is the engine's function.

Every name below is imported from its submodule on first use (``traceless._lazy``): listing
the modes or checking a receipt's signature does not import the store, numpy or the models.
"""

from typing import TYPE_CHECKING

from traceless._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from traceless.forget._bundle import (
        BUNDLE_FILE,
        BundleCheck,
        BundleEntry,
        BundleVerifyResult,
        RequestBundle,
        bundle_signature_ok,
        is_bundle,
        load_bundle,
        sign_bundle,
        verify_bundle,
        write_bundle,
    )
    from traceless.forget._erasure import encodings_of, occurrences, scan_bytes, scan_files
    from traceless.forget._forget import MIN_LITERAL_CHARS, TIERS, ForgetOp, ForgetTarget, forget
    from traceless.forget._log import (
        LogAppend,
        LogConsistency,
        LogInclusion,
        LogVerifyResult,
        append_bundle,
        append_receipt,
        bundle_entry,
        check_log,
        receipt_entry,
        verify_log,
        verify_log_consistency,
        verify_logged,
    )
    from traceless.forget._merkle import (
        consistency_proof,
        inclusion_proof,
        leaf_hash,
        tree_hash,
        verify_consistency,
        verify_inclusion,
    )
    from traceless.forget._normalize import find_variants
    from traceless.forget._note import Checkpoint, open_checkpoint, open_note, sign_note, verifier_key
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
    from traceless.forget._registry import FORGET_MODES, ForgetMode, forget_mode
    from traceless.forget._requests import (
        LoggedReceipt,
        RequestLogEntry,
        Verdict,
        check_request_id,
        fresh_receipt_path,
        log_request,
        name_receipt,
        read_requests,
        receipt_file_name,
        request_log_path,
        verdict_of,
    )
    from traceless.forget._timestamp import check_tsa_url, stamp_receipt, verify_timestamp
    from traceless.forget._verify import check_store, verify_receipt, verify_request_bundle

__all__ = [
    "Certificate",
    "CertificateProbe",
    "FORGET_MODES",
    "MIN_LITERAL_CHARS",
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
    "find_variants",
    "forget",
    "forget_mode",
    "load_receipt",
    "receipt_key",
    "occurrences",
    "scan_bytes",
    "scan_files",
    "sign",
    "verify_signature",
    "check_receipt_path",
    "VerifyResult",
    "verify_receipt",
    "check_store",
    "pseudonym",
    "write_receipt",
    # the append-only receipt log (forget --log; traceless log verify)
    "Checkpoint",
    "LogAppend",
    "LogConsistency",
    "LogInclusion",
    "LogVerifyResult",
    "append_bundle",
    "bundle_entry",
    "append_receipt",
    "check_log",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "open_checkpoint",
    "open_note",
    "receipt_entry",
    "sign_note",
    "tree_hash",
    "verifier_key",
    "verify_consistency",
    "verify_inclusion",
    "verify_log",
    "verify_log_consistency",
    "verify_logged",
    # erasure requests: ticket ids, receipt file names, the local request log
    "LoggedReceipt",
    "RequestLogEntry",
    "Verdict",
    "check_request_id",
    "fresh_receipt_path",
    "log_request",
    "name_receipt",
    "read_requests",
    "receipt_file_name",
    "request_log_path",
    "verdict_of",
    # RFC 3161 time-stamps on receipts (forget --tsa URL; forget verify --tsa-cert CA)
    "check_tsa_url",
    "stamp_receipt",
    "verify_timestamp",
    # the request bundle across a deployment (forget --deployment)
    "BUNDLE_FILE",
    "BundleCheck",
    "BundleEntry",
    "BundleVerifyResult",
    "RequestBundle",
    "bundle_signature_ok",
    "is_bundle",
    "load_bundle",
    "sign_bundle",
    "verify_bundle",
    "verify_request_bundle",
    "write_bundle",
]

EXPORTS: dict[str, tuple[str, ...]] = {
    "._bundle": ("BUNDLE_FILE", "BundleCheck", "BundleEntry", "BundleVerifyResult", "RequestBundle", "bundle_signature_ok",
                 "is_bundle", "load_bundle", "sign_bundle", "verify_bundle", "write_bundle"),
    "._erasure": ("encodings_of", "occurrences", "scan_bytes", "scan_files"),
    "._forget": ("MIN_LITERAL_CHARS", "TIERS", "ForgetOp", "ForgetTarget", "forget"),
    "._receipt": ("Certificate", "CertificateProbe", "Receipt", "TargetRef", "TierReport", "Verification",
                  "VerifyResult", "attach_certificate", "check_receipt_path", "load_receipt", "pseudonym",
                  "receipt_key", "sign", "verify_signature", "write_receipt"),
    "._log": ("LogAppend", "LogConsistency", "LogInclusion", "LogVerifyResult", "append_bundle", "append_receipt",
              "bundle_entry", "check_log",
              "receipt_entry", "verify_log", "verify_log_consistency", "verify_logged"),
    "._merkle": ("consistency_proof", "inclusion_proof", "leaf_hash", "tree_hash", "verify_consistency",
                 "verify_inclusion"),
    "._normalize": ("find_variants",),
    "._note": ("Checkpoint", "open_checkpoint", "open_note", "sign_note", "verifier_key"),
    "._registry": ("FORGET_MODES", "ForgetMode", "forget_mode"),
    "._requests": ("LoggedReceipt", "RequestLogEntry", "Verdict", "check_request_id", "fresh_receipt_path",
                   "log_request", "name_receipt", "read_requests", "receipt_file_name", "request_log_path",
                   "verdict_of"),
    "._timestamp": ("check_tsa_url", "stamp_receipt", "verify_timestamp"),
    "._verify": ("check_store", "verify_receipt", "verify_request_bundle"),
}
"""Which submodule defines each public name (a test checks it covers ``__all__`` exactly)."""

__getattr__, __dir__ = _lazy_exports(__name__, EXPORTS)

