"""``verify_receipt``: check a receipt as a third party (signature only, no secret) or as
the store's owner (signature + the store it names, re-scanned for what the receipt erased),
and its behavioural certificate when it carries one. Never creates a key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceless.errors import ConfigError
from traceless.forget._material import Material, count_each, scan_files_for, scan_store_files, unseal_material
from traceless.forget._receipt import Receipt, VerifyResult, pseudonym, receipt_key, verify_signature
from traceless.memory import store_exists

if TYPE_CHECKING:  # a signature-only check (a third party's) never opens a store
    from traceless.forget._bundle import BundleVerifyResult
    from traceless.memory import MemoryStore

__all__ = ["check_store", "verify_receipt", "verify_request_bundle"]


def verify_request_bundle(path: str | Path, *, public_key: bytes | None = None, log: str | Path | None = None,
                          tsa_cert: str | Path | None = None) -> BundleVerifyResult:
    """``verify_bundle`` (the summary's signature, every receipt it lists, with the public key
    alone), and with ``log`` the summary's inclusion in that receipt log, with ``tsa_cert`` its
    RFC 3161 time-stamp (``ReceiptLogError`` / ``ReceiptError`` when either does not hold)."""
    from traceless.forget._bundle import load_bundle, verify_bundle
    from traceless.forget._log import verify_logged
    from traceless.forget._timestamp import verify_timestamp
    from traceless.keys import public_key_bytes

    res = verify_bundle(path, public_key=public_key)
    if not res.signature_ok or (log is None and tsa_cert is None):
        return res
    bundle, _ = load_bundle(path)
    if tsa_cert is not None:  # the token stamps the signature: checked once it verifies
        res.timestamped_at = verify_timestamp(bundle, tsa_cert).isoformat()
    if log is not None:
        inc = verify_logged(log, bundle, public_key if public_key is not None else public_key_bytes(create=False))
        res.log_entry, res.log_size = inc.index, inc.size
    return res


def verify_receipt(receipt: Receipt, *, public_key: bytes | None = None, db: str | Path | None = None,
                   log: str | Path | None = None, tsa_cert: str | Path | None = None) -> tuple[VerifyResult, list[str]]:
    """Check ``receipt``; returns the result and, for the user, the erasures this open of
    ``db`` finished (an interrupted forget's physical erasure). ``log``: also its inclusion in
    that receipt log (``ReceiptLogError`` when it is not there or the log does not verify)."""
    failed = [k for k, ok in receipt.verification.checks.items() if not ok]
    cert = receipt.certificate
    res = VerifyResult(
        receipt_id=receipt.receipt_id, signature_ok=verify_signature(receipt, public_key), signer=receipt.signer,
        receipt_passed=receipt.verification.passed, failed_checks=failed, ok=False, certified=cert is not None,
        # recomputed from the certificate's own numbers, not taken from the checks it signed
        certificate_failures=cert.failures() if cert is not None else [], nothing_matched=not receipt.matched,
    )
    finished: list[str] = []
    if tsa_cert is not None and res.signature_ok:  # the token stamps the signature: checked once it verifies
        from traceless.forget._timestamp import verify_timestamp

        res = res.model_copy(update={"timestamped_at": verify_timestamp(receipt, tsa_cert).isoformat()})
    if log is not None and res.signature_ok:
        from traceless.forget._log import verify_logged

        inc = verify_logged(log, receipt, public_key)
        res = res.model_copy(update={"log_entry": inc.index, "log_size": inc.size})
    if db is not None and res.signature_ok:
        if not store_exists(db):
            raise ConfigError(f"{db} does not exist")
        from traceless.memory import MemoryStore

        with MemoryStore(str(db), access="read") as store:  # refuses what is not a traceless store, unchanged
            pending = store.get_meta("pending_erasure")
        if pending:  # an interrupted forget: finishing its physical erasure is the one write verify makes
            with MemoryStore(str(db), access="write") as store:
                finished = list(store.finished_erasures)
        with MemoryStore(str(db), access="read") as store:
            res = res.model_copy(update=check_store(receipt, store))
    res.ok = (res.signature_ok and res.receipt_passed and not res.nothing_matched and not res.certificate_failures
              and (not res.store_checked or (bool(res.same_store) and bool(res.removed_still_absent)
                                             and res.pending_erasure is None and res.material_absent is not False
                                             and res.old_keys_gone is not False)))
    return res, finished


def check_store(receipt: Receipt, store: MemoryStore) -> dict[str, Any]:
    """The ``VerifyResult`` fields of checking ``receipt`` against an open ``store``: the
    same store id, removed artifacts still absent, and none of the erased material in it."""
    same = not receipt.store_id or receipt.store_id == store.store_id
    back = _back(receipt, store) if same else []
    out: dict[str, Any] = {"store_checked": True, "same_store": same, "removed_still_absent": same and not back,
                           "pending_erasure": store.get_meta("pending_erasure")}
    if receipt.keys:  # an older key file left behind would still decrypt a copy taken before the forget
        from traceless.forget._finish import keys_gone

        out["old_keys_gone"] = keys_gone(store, receipt.keys.old_master_key)
    copies = _material_copies(receipt, store) if same else None
    if copies is not None:
        out["material_absent"] = not any(copies.values())
        out["material_copies"] = {k: n for k, n in copies.items() if n}
    return out


def _back(receipt: Receipt, store: MemoryStore) -> list[str]:
    """Artifacts the receipt removed that exist again."""
    removed = [i for t in receipt.tiers.values() for i in t.removed]
    if receipt.target.kind == "user":
        # ids of an erased user are keyed pseudonyms: compare under this machine's pepper
        pep = receipt_key(create=False)
        live = {pseudonym(a.id, "p", pep) for a in store.artifacts()}
        return [i for i in removed if i in live]
    return [i for i in removed if store.exists(i)]


def _owner(store: MemoryStore, ref: str, pep: bytes) -> str | None:
    """The owner whose keyed pseudonym the receipt names, if the store holds any of theirs."""
    return next((o for o in store.owners() if pseudonym(o, "u", pep) == ref), None)


def _material_copies(receipt: Receipt, store: MemoryStore) -> dict[str, int] | None:
    """Where ``store`` holds what the receipt erased (``rows``: the in-scope owner's artifacts
    in the claimed tiers; a file name: its bytes beyond other live rows' copies); None when
    the receipt records no material (made before it was recorded)."""
    claims = set(receipt.verification.claims)
    if receipt.target.kind == "user":  # an erased user: no artifact of theirs in a claimed tier
        pep = receipt_key(create=False)
        owner = _owner(store, receipt.target.owner, pep)
        return {"rows": 0 if owner is None else sum(a.tier.value in claims for a in store.artifacts(owner=owner))}
    if not receipt.erased_material:
        return None
    pep = receipt_key(create=False)
    m = unseal_material(pep, receipt.erased_material)
    owner = _owner(store, receipt.target.owner, pep)
    checks = receipt.verification.checks
    rows = 0 if owner is None else _rows_holding(store, owner, pep, m, claims, everywhere="metadata_clean" in checks)
    out = {"rows": rows}
    if "disk_clean" in checks and store.scannable:
        files = scan_files_for(pep, m, store.files())
        if any(files.values()):
            files = scan_store_files(pep, m, store)
        if sum(files.values()) > _live_copies(store, pep, m):
            out.update(files)
    return out


def _rows_holding(store: MemoryStore, owner: str, pep: bytes, m: Material, claims: set[str], *,
                  everywhere: bool) -> int:
    """The owner's artifacts in ``claims`` tiers that hold the literal (also in their
    metadata, for a mode that erases everywhere) or a source record's pre-forget text."""
    arts = [a for a in store.artifacts(owner=owner) if a.tier.value in claims]
    per = 3 if everywhere else 1
    fields: list[bytes] = []
    for a in arts:
        fields.append((a.text or "").encode("utf-8"))
        if everywhere:
            fields += [json.dumps(a.meta, ensure_ascii=False).encode("utf-8"), (a.session_id or "").encode("utf-8")]
    hits = count_each(pep, m, fields)
    n = 0
    for k, a in enumerate(arts):
        old = a.id in m.texts and Material.mac(pep, fields[k * per]) == m.texts[a.id]
        n += old or any(hits[k * per:(k + 1) * per])
    return n


def _live_copies(store: MemoryStore, pep: bytes, m: Material) -> int:
    """Copies of the literal the live rows of every owner keep in the file in clear (another
    owner's copy is theirs to keep: only bytes beyond these count against the receipt)."""
    fields: list[bytes] = []
    for a in store.artifacts():
        clear = [a.id, a.owner, a.kind, a.session_id or ""]
        if not store.encrypted:
            clear += [a.text or "", json.dumps(a.meta, ensure_ascii=False, sort_keys=True)]
        fields += [f.encode("utf-8") for f in clear]
    return sum(count_each(pep, m, fields))
