"""``verify_receipt``: check a receipt as a third party (signature only, no secret) or as
the store's owner (signature + the store it names), and its behavioural certificate when
it carries one. Never creates a key."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from traceless.errors import ConfigError
from traceless.forget._receipt import Receipt, VerifyResult, pseudonym, receipt_key, verify_signature
from traceless.memory._backend import store_exists

if TYPE_CHECKING:  # a signature-only check (a third party's) never opens a store
    from traceless.memory._store import MemoryStore

__all__ = ["verify_receipt"]


def verify_receipt(receipt: Receipt, *, public_key: bytes | None = None, db: str | Path | None = None,
                   ) -> tuple[VerifyResult, list[str]]:
    """Check ``receipt``; returns the result and, for the user, the erasures this open of
    ``db`` finished (an interrupted forget's physical erasure)."""
    failed = [k for k, ok in receipt.verification.checks.items() if not ok]
    cert = receipt.certificate
    res = VerifyResult(
        receipt_id=receipt.receipt_id, signature_ok=verify_signature(receipt, public_key), signer=receipt.signer,
        receipt_passed=receipt.verification.passed, failed_checks=failed, ok=False, certified=cert is not None,
        # recomputed from the certificate's own numbers, not taken from the checks it signed
        certificate_failures=cert.failures() if cert is not None else [],
    )
    finished: list[str] = []
    if db is not None and res.signature_ok:
        if not store_exists(db):
            raise ConfigError(f"{db} does not exist")
        from traceless.forget._forget import keys_gone  # also registers the receipt completion
        from traceless.memory._store import MemoryStore

        with MemoryStore(str(db)) as store:
            finished = list(store.finished_erasures)
            same = not receipt.store_id or receipt.store_id == store.store_id
            back = _back(receipt, store) if same else []
            res = res.model_copy(update={
                "store_checked": True, "same_store": same, "removed_still_absent": same and not back,
                "pending_erasure": store.get_meta("pending_erasure"),
                # an older key file left behind would still decrypt a copy taken before the forget
                "old_keys_gone": keys_gone(store, receipt.keys.old_master_key) if receipt.keys else None,
            })
    res.ok = (res.signature_ok and res.receipt_passed and not res.certificate_failures and (not res.store_checked or (
        bool(res.same_store) and bool(res.removed_still_absent) and res.pending_erasure is None
        and res.old_keys_gone is not False)))
    return res, finished


def _back(receipt: Receipt, store: MemoryStore) -> list[str]:
    """Artifacts the receipt removed that exist again."""
    removed = [i for t in receipt.tiers.values() for i in t.removed]
    if receipt.target.kind == "user":
        # ids of an erased user are keyed pseudonyms: compare under this machine's pepper
        pep = receipt_key(create=False)
        live = {pseudonym(a.id, "p", pep) for a in store.artifacts()}
        return [i for i in removed if i in live]
    return [i for i in removed if store.exists(i)]
