"""The completion of a forget's receipt when an open of the store finishes the forget's
interrupted erasure (the old master key file shredded after a kill between the commit and
the shredding): a default plug-in of ``traceless.memory.ERASURE_FINISHERS``.

The store names this module in the registry's ``defaults`` and imports it only when an open
has finished such an erasure, so the receipt is completed by whatever process opens the
store next (``traceless memory add``, a plain ``MemoryStore``), not only by one that had
imported ``traceless.forget``; the memory package imports nothing of the forget package
(the layers, ``tests/unit/test_architecture.py``). It imports only public names, as a
third-party finisher would.
"""

from __future__ import annotations

from traceless.forget import Receipt, sign, verify_signature
from traceless.memory import ERASURE_FINISHERS, MemoryStore

__all__ = ["KEYS_PENDING", "complete_receipt", "keys_gone"]

KEYS_PENDING = ("signed before the old master key file was shredded (that follows the commit): this copy claims "
                "no key destruction; the completed receipt does, once the shredding is durable")
"""The note of a receipt signed before its key destruction was durable."""


def keys_gone(store: MemoryStore, old_kid: str) -> bool:
    """The old master key and every other superseded key file of the store are gone."""
    return store.master_key_gone(old_kid) and not store.older_master_keys()


@ERASURE_FINISHERS.register("receipt", help="complete the stored receipt once the old master key is shredded")
def complete_receipt(store: MemoryStore, receipt_id: str) -> None:
    """An open finished the interrupted erasure of ``receipt_id`` (keys shredded): complete
    its stored receipt (re-signed) if it still waits for the key destruction and verifies
    under this machine's key (a tampered receipt is never re-signed)."""
    r = Receipt.model_validate_json(store.receipt(receipt_id))
    if r.keys is None or "key_destroyed" in r.guarantee or not verify_signature(r):
        return
    if not keys_gone(store, r.keys.old_master_key):
        return
    checks = {**r.verification.checks, "old_keys_destroyed": True}
    v = r.verification.model_copy(update={"checks": checks, "passed": all(checks.values())})
    notes = [n for n in r.notes if n != KEYS_PENDING] + [
        "the forget was interrupted after its commit; the old master key file was shredded when the store "
        "was next opened, and this receipt completed then"]
    final = sign(r.model_copy(update={"verification": v, "notes": notes,
                                      "guarantee": [*r.guarantee, "key_destroyed"]}))
    with store.transaction():
        store.update_receipt(receipt_id, final.model_dump_json())
