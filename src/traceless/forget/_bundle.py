"""The request bundle (issue 36.2): one folder per erasure request across a deployment, that
holds each instance's signed receipt and a signed summary (``bundle.json``) binding them.

The summary names every instance of the deployment and, per receipt, its file, id, SHA-256
of its bytes, claim levels and whether it passed; it is signed with the same Ed25519 key
as the receipts. ``verify_bundle`` needs the public key alone: the summary's signature, then
every receipt it lists (present, the same bytes, its own signature under the same key, the
same request id, passed). A receipt removed, altered or added fails it. Nothing in the
bundle names the person except by the receipts' keyed pseudonyms.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from traceless.errors import ReceiptError
from traceless.forget._receipt import Receipt, load_receipt, verify_signature
from traceless.keys import key_id, public_key_bytes, signing_key

__all__ = ["BUNDLE_FILE", "BundleCheck", "BundleEntry", "BundleVerifyResult", "RequestBundle", "bundle_signature_ok",
           "is_bundle", "load_bundle", "sign_bundle", "verify_bundle", "write_bundle"]

BUNDLE_FILE = "bundle.json"
_FORBID = ConfigDict(extra="forbid")
BundleVerdict = Literal["erased", "unverified"]


class BundleEntry(BaseModel):
    """What one instance answered: a receipt per user id it held, or nothing found."""

    model_config = _FORBID

    instance: str
    """The instance's name in the deployment file."""
    system: str
    """Its memory system (``traceless memory systems``)."""
    outcome: Literal["erased", "unverified", "nothing_found"]
    """``erased``: a receipt that passed every check; ``unverified``: a receipt with a failed
    check; ``nothing_found``: nothing of the person was there (no receipt)."""
    owner: str = ""
    """The receipt's keyed pseudonym of the user id in this instance (``u:…``; empty for a
    literal-only request)."""
    receipt_file: str = ""
    """The receipt's file name inside the bundle folder (empty when nothing was found)."""
    receipt_id: str = ""
    """The receipt's id."""
    receipt_sha256: str = ""
    """SHA-256 (hex) of the receipt file's bytes as written."""
    claims: list[str] = Field(default_factory=list)
    """The receipt's per-store claim levels (``store:level``)."""


class RequestBundle(BaseModel):
    """The signed summary of one erasure request across a deployment (``bundle.json``)."""

    model_config = _FORBID

    bundle_version: int = 1
    """The format's version."""
    request_id: str
    """The ticket the request answers (in every receipt too)."""
    created_at: float
    """Unix time the summary was signed."""
    deployment: str
    """The deployment's name (its file's ``name``, or the file's stem)."""
    instances: list[str]
    """Every instance of the deployment, in its file's order: each has an entry."""
    entries: list[BundleEntry]
    """One per (instance, user id) with a receipt, one per instance where nothing was found."""
    verdict: BundleVerdict
    """``erased``: every receipt passed; ``unverified``: at least one did not."""
    signer: str = ""
    """Short id of the signing key (sha256 of the public key, 16 hex)."""
    public_key: str = ""
    """The Ed25519 public key (hex) the summary and its receipts verify with."""
    signature: str = ""
    """Ed25519 signature (hex) over the rest of the summary (``timestamp`` excepted)."""
    timestamp: str = ""
    """An RFC 3161 time-stamp token (base64 DER) over the signature, from the TSA ``forget
    --deployment --tsa URL`` named; not under the signature (it stamps it). Empty: none."""

    def payload(self) -> bytes:
        d = self.model_dump(mode="json")
        d.pop("signature", None)
        d.pop("timestamp", None)
        return json.dumps(d, sort_keys=True, separators=(",", ":")).encode()


class BundleCheck(BaseModel):
    """One receipt of a bundle, as checked."""

    model_config = _FORBID

    instance: str
    """The entry's instance."""
    receipt_file: str
    """The file the summary lists."""
    status: Literal["ok", "missing", "altered", "bad_signature", "other_request", "not_passed"]
    """``ok``, or what failed: the file is gone, its bytes differ from the signed digest, its
    signature does not verify under the bundle's key, it answers another request, it records
    a failed check."""


class BundleVerifyResult(BaseModel):
    """What ``forget verify BUNDLE`` checked (``docs/schemas/bundle-verify-result.json``)."""

    model_config = _FORBID

    request_id: str
    """The request the bundle answers."""
    signer: str
    """The summary's signer key id."""
    signature_ok: bool
    """The summary verifies under the public key given (or this machine's)."""
    receipts: list[BundleCheck] = Field(default_factory=list)
    """Every receipt the summary lists, checked."""
    unlisted: list[str] = Field(default_factory=list)
    """Receipt files in the folder that the summary does not list (a receipt added later)."""
    verdict: str = ""
    """The summary's own verdict (``erased`` / ``unverified``)."""
    ok: bool
    """All of it holds and the verdict is ``erased``."""
    timestamped_at: str | None = None
    """``--tsa-cert``: the time (ISO 8601, UTC) the summary's RFC 3161 token vouches for."""
    log_entry: int | None = None
    """``--log``: the summary's entry in that receipt log (inclusion proof verified)."""
    log_size: int | None = None
    """``--log``: the entries the log's latest checkpoint signs."""


def sign_bundle(bundle: RequestBundle, key: Ed25519PrivateKey | None = None) -> RequestBundle:
    """Sign with ``key`` (default: the local receipt-signing key)."""
    k = key if key is not None else signing_key()
    pub = public_key_bytes(k)
    unsigned = bundle.model_copy(update={"signer": key_id(pub), "public_key": pub.hex(), "signature": ""})
    return unsigned.model_copy(update={"signature": k.sign(unsigned.payload()).hex()})


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def write_bundle(folder: Path, request_id: str, deployment: str, instances: Sequence[str],
                 entries: Sequence[BundleEntry],
                 stamp: Callable[[RequestBundle], RequestBundle] | None = None) -> RequestBundle:
    """Sign and write the summary into ``folder`` (which holds the entries' receipt files
    already): each entry's digest is taken from the file as it lies there. ``stamp``: the
    signed summary time-stamped (``stamp_receipt`` with a TSA) before it is written."""
    done = [e.model_copy(update={"receipt_sha256": _digest(folder / e.receipt_file)}) if e.receipt_file else e
            for e in entries]
    verdict: BundleVerdict = "erased" if all(e.outcome != "unverified" for e in done) else "unverified"
    bundle = sign_bundle(RequestBundle(request_id=request_id, created_at=time.time(), deployment=deployment,
                                       instances=list(instances), entries=done, verdict=verdict))
    if stamp is not None:
        bundle = stamp(bundle)
    _write_private(folder / BUNDLE_FILE, bundle.model_dump_json(indent=2))
    return bundle


def load_bundle(path: str | Path) -> tuple[RequestBundle, Path]:
    """The summary and its folder, from the folder or its ``bundle.json``."""
    p = Path(path)
    f = p / BUNDLE_FILE if p.is_dir() else p
    try:
        data: Any = json.loads(f.read_text(encoding="utf-8"))
        return RequestBundle.model_validate(data), f.parent
    except FileNotFoundError:
        raise ReceiptError(f"{f} does not exist; give the request's bundle folder (`forget --deployment` wrote "
                           "request-<id>/)") from None
    except (ValidationError, json.JSONDecodeError) as e:
        first = str(e).splitlines()[0]
        raise ReceiptError(f"{f} is not a request bundle ({first})") from None


def is_bundle(path: str | Path) -> bool:
    """``path`` is a bundle folder or its summary file (``forget verify`` takes either)."""
    p = Path(path)
    return (p / BUNDLE_FILE).is_file() if p.is_dir() else p.name == BUNDLE_FILE


def bundle_signature_ok(bundle: RequestBundle, pub: bytes) -> bool:
    """The summary verifies under the public key ``pub`` (and names it)."""
    try:
        if bundle.public_key != pub.hex():
            return False
        Ed25519PublicKey.from_public_bytes(pub).verify(bytes.fromhex(bundle.signature), bundle.payload())
    except (InvalidSignature, ValueError):
        return False
    return True


def _check_entry(folder: Path, e: BundleEntry, bundle: RequestBundle, pub: bytes) -> BundleCheck:
    f = folder / e.receipt_file

    def check(status: Any) -> BundleCheck:
        return BundleCheck(instance=e.instance, receipt_file=e.receipt_file, status=status)

    if not f.is_file():
        return check("missing")
    if _digest(f) != e.receipt_sha256:
        return check("altered")
    try:
        r: Receipt = load_receipt(f)
    except ReceiptError:
        return check("altered")
    if not verify_signature(r, pub) or r.receipt_id != e.receipt_id:
        return check("bad_signature")
    if r.request_id != bundle.request_id:
        return check("other_request")
    return check("ok" if r.verification.passed else "not_passed")


def verify_bundle(path: str | Path, *, public_key: bytes | None = None) -> BundleVerifyResult:
    """Check a request bundle with the public key alone (default: this machine's signing key,
    never created here): the summary's signature, then every receipt it lists (with its log
    and time-stamp: ``verify_request_bundle``)."""
    bundle, folder = load_bundle(path)
    pub = public_key if public_key is not None else public_key_bytes(create=False)
    sig = bundle_signature_ok(bundle, pub)
    checks = [_check_entry(folder, e, bundle, pub) for e in bundle.entries if e.receipt_file] if sig else []
    listed = {e.receipt_file for e in bundle.entries}
    unlisted = sorted(p.name for p in folder.glob("receipt-*.json") if p.name not in listed)
    ok = (sig and all(c.status == "ok" for c in checks) and not unlisted and bundle.verdict == "erased"
          and {e.instance for e in bundle.entries} == set(bundle.instances))
    return BundleVerifyResult(request_id=bundle.request_id, signer=bundle.signer, signature_ok=sig, receipts=checks,
                              unlisted=unlisted, verdict=bundle.verdict, ok=ok)
