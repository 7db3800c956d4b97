"""Forget receipts: what each tier lost, how it was verified, signed with Ed25519.

Signature: Ed25519 over the canonical JSON of the receipt (without the signature), with
the local signing key (``$TRACELESS_HOME/receipt_ed25519.key``). Anyone can check a
receipt with the public key alone (``traceless keys export``; ``forget verify R
--public-key K``): verifying needs no secret. Digests inside a receipt (the literal's
reference, tier digests, pseudonyms) are keyed with a separate *pepper* that verifiers
never get, so a receipt is no offline oracle for guessing the forgotten value. A receipt
never contains the forgotten literal, and names no user: owners appear as keyed
pseudonyms.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from traceless.errors import ReceiptError
from traceless.keys import key_id, pepper, public_key_bytes, signing_key

__all__ = ["TierReport", "Verification", "Receipt", "KeyReport", "TargetRef", "receipt_key", "sign", "verify_signature",
           "load_receipt", "write_receipt", "pseudonym", "check_receipt_path", "VerifyResult", "Certificate",
           "CertificateProbe", "attach_certificate"]


def receipt_key(*, create: bool = True) -> bytes:
    """The receipts' digest pepper (32 random bytes in ``receipt.key``, 0600). It keys the
    digests inside receipts; it does not sign them and verifiers never need it."""
    return pepper(create=create)


def pseudonym(value: str, prefix: str = "u", key: bytes | None = None) -> str:
    """A keyed pseudonym for an identifier (an owner, a record id of an erased user)."""
    k = key if key is not None else receipt_key()
    return f"{prefix}:" + hmac.new(k, value.encode("utf-8"), hashlib.sha256).hexdigest()[:16]


_FORBID = ConfigDict(extra="forbid")


class TargetRef(BaseModel):
    """The forget target as recorded in a receipt (literals only as a keyed digest)."""

    model_config = _FORBID

    kind: Literal["record", "literal", "session", "user"]
    """What was targeted."""
    ref: str
    """Record id or session id; for a literal ``hmac:<16 hex>`` and for a user ``u:<16 hex>``
    (keyed with the pepper, not reversible without it)."""
    owner: str
    """Keyed pseudonym (``u:<16 hex>``) of the owner whose artifacts were in scope."""


class TierReport(BaseModel):
    """What one tier went through. For an erased user, ids are keyed pseudonyms (``p:…``)."""

    model_config = _FORBID

    removed: list[str] = Field(default_factory=list)
    """Artifacts deleted (rows securely deleted)."""
    rewritten: list[str] = Field(default_factory=list)
    """Artifacts whose text was scrubbed/redacted in place (or vectors re-embedded)."""
    rebuilt: list[str] = Field(default_factory=list)
    """New artifacts created by rebuilding from surviving sources."""
    left: int = 0
    """Artifacts of the owner in this tier that were not touched."""
    digest_before: str = ""
    """Digest of the owner's tier before (over artifact ids and payload digests)."""
    digest_after: str = ""
    """Digest after."""
    target_copies_after: int = 0
    """Artifacts in this tier still containing the target (literal or a removed record's text verbatim)."""
    near_variants_after: int = 0
    """Artifacts in this tier whose compact form (``traceless.memory.compact``: NFKC, casefold,
    whitespace, dashes and zero-width characters dropped) still contains the literal's
    although the exact bytes are gone."""


class Verification(BaseModel):
    """Checks run inside the forget transaction, plus the post-commit disk scan.

    ``passed`` is the conjunction of ``checks``: every check the receipt reports counts."""

    model_config = _FORBID

    claims: list[str]
    """Tiers this mode claims to have cleared of the target."""
    sources_removed: list[str]
    """Source records the mode removed (for an erased user, keyed pseudonyms ``p:…``)."""
    sources_gone: bool
    """Every removed source id is absent from the store."""
    surviving_descendants: list[str]
    """Descendants of removed sources that still exist (rebuilt artifacts are not descendants;
    for an erased user, keyed pseudonyms ``p:…``)."""
    closure_clean: bool
    """No descendant of a removed source survives."""
    literal_scan: dict[str, int]
    """Per tier, artifacts whose text (incl. embedding source text) contains the target."""
    metadata_scan: dict[str, int] = Field(default_factory=dict)
    """Per field (id, owner, session_id, kind, meta), the owner's artifacts holding the literal there."""
    near_variants: dict[str, int] = Field(default_factory=dict)
    """Per tier, artifacts holding a near variant of the literal (normalised match, exact bytes absent)."""
    split_copies: int = 0
    """Places where the normalised literal spans two consecutive raw records of a session."""
    disk_scan: dict[str, int] = Field(default_factory=dict)
    """Receipts before ``disk_scope``: per file SQLite wrote, occurrences of the literal's bytes
    over the whole file. Always empty now: whole-file counts include other owners' copies, so
    they would tell the requester whether another owner holds the literal (see ``disk_held``)."""
    disk_checked: bool = False
    """The post-commit disk scan ran (False in the copy stored at commit time)."""
    disk_scope: Literal["", "owner"] = ""
    """``owner``: ``disk_held`` is about the requester's data only; copies other owners hold are
    out of scope, neither counted nor revealed (empty in receipts made before this field)."""
    disk_held: bool | None = None
    """After the commit and the physical erasure, the store's live files still hold a copy of
    the literal attributable to the requester: the byte scan's result when no other owner holds
    the literal, else (a copy held by another owner, out of scope) whether the requester's own
    rows still hold it or the physical erasure is incomplete. None: no scan (not a literal,
    nothing matched, or a database server's files)."""
    checks: dict[str, bool] = Field(default_factory=dict)
    """Every check this receipt makes, by name; ``passed`` is their conjunction."""
    passed: bool
    """All of ``checks`` held."""


class KeyReport(BaseModel):
    """What an encrypted store's forget did to its keys (crypto-shredding)."""

    model_config = _FORBID

    data_key: Literal["destroyed", "rotated"]
    """The owner's data key was deleted (user erased) or replaced by a fresh one."""
    resealed: int = 0
    """The owner's surviving artifacts re-sealed under the fresh data key."""
    old_master_key: str
    """Id of the master key that wrapped every data key before; its file is shredded."""
    new_master_key: str
    """Id of the master key that wraps the remaining data keys now."""


class CertificateProbe(BaseModel):
    """One probe of a behavioural certificate: what was asked and a keyed digest of the reply."""

    model_config = _FORBID

    view: str
    """Memory view the agent read (``agent``: its normal view; ``raw``/``summary``: one tier only)."""
    level: str
    """Probe level (direct, indirect, jailbreak; paper 000 §2.2)."""
    wording: int
    """Index of the probe wording."""
    query: str
    """The question sent to the agent (a public template; never the literal)."""
    context_items: int
    """Memory entries the agent was shown for this query."""
    reply_digest: str
    """Keyed digest (``r:<16 hex>``, HMAC with the receipt pepper) of the reply; the reply itself
    is not kept, since it could hold the literal."""
    extracted: bool
    """The literal appeared verbatim in the reply (paper 000 eq. 1)."""


class Certificate(BaseModel):
    """Behavioural deletion certificate: the audit engine's probes for the forgotten literal,
    asked of the agent built on the memory after the forget, and the literal's copies per store.

    It covers these probes, this model at temperature 0 and this memory at certification
    time; it does not cover other wordings, other models, or copies outside the scanned stores."""

    model_config = _FORBID

    system: str
    """Memory system the agent read (``traceless``: the native store)."""
    model: dict[str, Any]
    """Identity of the agent's model (name, revision, backend)."""
    embedder: str
    """Retrieval embedder the agent used."""
    max_new_tokens: int
    """Reply budget per probe (greedy decoding)."""
    probes: list[CertificateProbe]
    """Every probe asked."""
    aer: dict[str, dict[str, float]]
    """Extraction rate per view, per probe level (``aer["agent"]["direct"]`` is AER_direct)."""
    store_copies: dict[str, int]
    """Per named store, copies of the literal it still holds: in the native store the
    requester's entries only (another owner's copy is out of scope, never counted), in
    another memory system every entry."""
    seconds: float
    """Wall time of the certification."""

    def failures(self) -> list[str]:
        """Why the certificate does not pass, one reason each (empty: it passes)."""
        out = [] if self.probes else ["no probe was asked"]
        for view, levels in self.aer.items():
            out += [f"the agent still produced the literal under {lv} probes (view {view}, extraction {r:.2f})"
                    for lv, r in levels.items() if r > 0]
        out += [f"store {name!r} still holds {n} cop{'y' if n == 1 else 'ies'} of the literal"
                for name, n in self.store_copies.items() if n > 0]
        return out


class Receipt(BaseModel):
    """A signed account of one forget."""

    model_config = _FORBID

    receipt_id: str
    """Unique id."""
    request_id: str = ""
    """The erasure request's ticket id (``forget --request-id``), signed with the rest; empty
    when none was given (and in receipts made before this field, which verify unchanged)."""
    version: int = 2
    """Receipt format version (2: Ed25519 signatures, peppered digests, pseudonymous owners)."""
    store_id: str = ""
    """The random id of the memory store it describes (``forget verify --db`` checks it)."""
    created_at: float
    """Unix time."""
    mode: str
    """Forget mode used."""
    target: TargetRef
    """What was forgotten (never the literal itself)."""
    matched: bool
    """Whether the target matched any artifact."""
    erased: bool | None = None
    """False: the target is still present in the requester's data after this forget (a mode
    that does not erase everywhere, e.g. raw_only, exact or raw_plus_resummarize, or the noop
    control), even when ``passed`` (the mode did what it promises). True: no copy is left in
    any tier, in metadata, or (``disk_held``) in the live files. None: nothing matched."""
    tiers: dict[str, TierReport]
    """Per-tier account."""
    verification: Verification
    """How removal was verified."""
    guarantee: list[str] = Field(default_factory=list)
    """Which guarantees this receipt gives: ``plaintext_scan`` (the live files were scanned
    and hold no copy) and/or ``key_destroyed`` (an encrypted store's old keys are gone, so
    copies taken before the forget cannot be decrypted)."""
    keys: KeyReport | None = None
    """Key destruction in an encrypted store (None for a plaintext store)."""
    erased_material: str = ""
    """What the forget erased, as keyed digests sealed under the receipt pepper (hex; see
    ``traceless.forget._material``): ``forget verify --db`` re-scans the store it is given for
    it. Opaque without the pepper; empty for a user target (the owner's presence is checked)."""
    not_covered: list[str] = Field(default_factory=list)
    """What the guarantee does not reach in this store: identifiers kept in plaintext that
    copies of the store taken before the forget still hold (see docs/erasure.md)."""
    gate_descriptors_added: int = 0
    """Keyed descriptors stored for the write gate."""
    seconds: float
    """Wall time of the forget."""
    code_version: str
    """traceless version that ran it."""
    notes: list[str] = Field(default_factory=list)
    """What the mode deliberately left (e.g. stale vectors, unrebuilt summary slots)."""
    warnings: list[str] = Field(default_factory=list)
    """What the user should know: an enumerable literal, near variants left, an incomplete erasure."""
    certificate: Certificate | None = None
    """Behavioural deletion certificate (``forget --certify``); None when not certified. The
    signature covers it, and its result is in ``verification.checks``."""
    signer: str = ""
    """Id of the Ed25519 key that signed it (sha256 of the public key, 16 hex)."""
    public_key: str = ""
    """The signer's Ed25519 public key (hex). Trust it only if it matches a key you got out of band."""
    signature: str = ""
    """Ed25519 signature (hex) over the rest of the receipt."""
    timestamp: str = ""
    """An RFC 3161 time-stamp token (base64 DER ``TimeStampResp``) over the signature's bytes,
    from the TSA ``forget --tsa URL`` named; not under the signature (it stamps it). Empty: none."""

    def payload(self) -> bytes:
        d = self.model_dump(mode="json")
        d.pop("signature", None)
        d.pop("timestamp", None)
        if d.get("certificate") is None:  # receipts signed before certificates existed verify unchanged
            d.pop("certificate", None)
        for name in ("erased_material", "not_covered", "request_id"):  # likewise receipts signed before these
            if not d.get(name):
                d.pop(name, None)
        if d.get("erased") is None:  # so do receipts signed before ``erased`` and ``disk_scope``
            d.pop("erased", None)
        for name, old in (("disk_scope", ""), ("disk_held", None)):
            if d["verification"].get(name, old) == old:
                d["verification"].pop(name, None)
        return json.dumps(d, sort_keys=True, separators=(",", ":")).encode()

    def summary_lines(self) -> list[str]:
        req = f"  request={self.request_id}" if self.request_id else ""
        out = [f"receipt {self.receipt_id}{req}  mode={self.mode}  target={self.target.kind}:{self.target.ref}"
               f"  matched={self.matched}  erased={_yes_no(self.erased)}  {self.seconds:.2f}s"]
        if self.erased is False:
            out.append(f"  NOT ERASED: the target is still present in this owner's data; mode {self.mode} "
                       "does not erase it everywhere (passed= says only that the mode did what it promises)")
        for t, r in self.tiers.items():
            out.append(f"  {t:<10} removed={len(r.removed):<4} rewritten={len(r.rewritten):<4} "
                       f"rebuilt={len(r.rebuilt):<4} requester_untouched={r.left:<5} "
                       f"copies_after={r.target_copies_after}")  # every count is the requester's own
        v = self.verification
        out.append(f"  verified: sources_gone={v.sources_gone} closure_clean={v.closure_clean} "
                   f"claims={','.join(v.claims) or '-'} passed={v.passed}")
        if "bystanders_intact" in v.checks:  # other users' records: compared by digest, never counted here
            n_rw = sum(len(r.rewritten) for r in self.tiers.values())
            out.append(f"  bystanders_intact={v.checks['bystanders_intact']} (other users' records compared by "
                       + ("digest: unchanged)" if not n_rw else
                          f"digest: unchanged, except {n_rw} REWRITTEN: each quoted a literal, now replaced by "
                          "[erased], the rest byte-identical)"))
        failed = [k for k, ok in v.checks.items() if not ok]
        if failed:
            out.append(f"  FAILED checks: {', '.join(failed)}")
        if v.metadata_scan:
            out.append("  literal in metadata: " + ", ".join(f"{k}={n}" for k, n in v.metadata_scan.items()))
        if v.near_variants or v.split_copies:
            near = ", ".join(f"{k}={n}" for k, n in v.near_variants.items())
            out.append(f"  near variants: {near or '-'}; split across records: {v.split_copies}")
        if v.disk_scan:
            out.append("  disk scan: " + ", ".join(f"{Path(k).name}={n}" for k, n in v.disk_scan.items()))
        if v.disk_held is not None:
            out.append(f"  disk (this owner's data): {'copy still held' if v.disk_held else 'no copy'}; "
                       "copies held by another owner are out of scope and not reported")
        if self.keys is not None:
            out.append(f"  keys: data key {self.keys.data_key} ({self.keys.resealed} re-sealed), master key "
                       f"{self.keys.old_master_key} → {self.keys.new_master_key} (old one shredded)")
        if self.guarantee:
            out.append(f"  guarantee: {', '.join(self.guarantee)}")
        out += [f"  not covered: {n}" for n in self.not_covered]
        if self.certificate is not None:
            c = self.certificate
            rates = ", ".join(f"{v}/{lv}={r:.2f}" for v, lv_r in c.aer.items() for lv, r in lv_r.items())
            copies = ", ".join(f"{k}={n}" for k, n in c.store_copies.items())
            out.append(f"  certificate: {len(c.probes)} probes on {c.model.get('name', '?')}; extraction {rates}")
            out.append(f"  certificate store copies: {copies}")
        out += [f"  note: {n}" for n in self.notes]
        out += [f"  WARNING: {w}" for w in self.warnings]
        return out


def _yes_no(v: bool | None) -> str:
    return "-" if v is None else str(v)


class VerifyResult(BaseModel):
    """The JSON document of ``traceless forget verify --json``."""

    receipt_id: str
    """The receipt checked."""
    signature_ok: bool
    """The Ed25519 signature verifies under the given (or local) public key."""
    signer: str
    """Key id of the signer the receipt names."""
    receipt_passed: bool
    """The receipt's own verification (every check it records) passed."""
    failed_checks: list[str] = Field(default_factory=list)
    """Names of the receipt's checks that failed."""
    store_checked: bool = False
    """``--db`` was given and checked."""
    same_store: bool | None = None
    """The db is the store the receipt was made on (None: not checked)."""
    removed_still_absent: bool | None = None
    """Every artifact the receipt removed is still absent (None: not checked)."""
    pending_erasure: str | None = None
    """A receipt id whose physical erasure is still pending in that db."""
    material_absent: bool | None = None
    """The db holds none of what the receipt erased, re-scanned by the keyed digests it records:
    the in-scope owner's rows in the tiers the mode claims (an erased user: no row of theirs at
    all) and, for a mode that erases everywhere, the SQLite files' bytes beyond the copies other
    owners' live rows hold. False on a backup or clone taken before the forget. None: not checked
    (no db, or a receipt made before the digests were recorded)."""
    material_copies: dict[str, int] = Field(default_factory=dict)
    """Where the re-scan found erased material: ``rows`` (in-scope artifacts) and each file."""
    nothing_matched: bool = False
    """The receipt records that its target matched nothing: it proves no erasure (exit 7)."""
    old_keys_gone: bool | None = None
    """Encrypted store: the master key the receipt replaced and every other superseded key
    file of the store are gone (None: not checked, or no key was replaced)."""
    certified: bool = False
    """The receipt carries a behavioural certificate (``forget --certify``)."""
    certificate_failures: list[str] = Field(default_factory=list)
    """Why the certificate fails (extraction > 0 or a store copy left), recomputed from its data."""
    log_entry: int | None = None
    """``--log``: the receipt's entry in that receipt log, its inclusion proof verified against the
    log's latest signed checkpoint (a log that does not verify is an error). None: not checked."""
    log_size: int | None = None
    """``--log``: the entries that checkpoint signs."""
    timestamped_at: str | None = None
    """``--tsa-cert``: the time (ISO 8601, UTC) the receipt's RFC 3161 token vouches for, its
    signature chained to that root and its imprint this receipt's signature (a token that does
    not verify is an error). None: not checked."""
    ok: bool
    """Everything checked held (the exit code is 0 exactly when this is true)."""


def sign(receipt: Receipt, key: Ed25519PrivateKey | bytes | None = None) -> Receipt:
    """Sign with ``key`` (an Ed25519 private key or its 32-byte seed; default: the local key)."""
    k = signing_key() if key is None else Ed25519PrivateKey.from_private_bytes(key) if isinstance(key, bytes) else key
    pub = public_key_bytes(k)
    unsigned = receipt.model_copy(update={"signer": key_id(pub), "public_key": pub.hex(), "signature": ""})
    return unsigned.model_copy(update={"signature": k.sign(unsigned.payload()).hex()})


def attach_certificate(receipt: Receipt, certificate: Certificate,
                       key: Ed25519PrivateKey | bytes | None = None) -> Receipt:
    """The receipt with ``certificate`` added to what it reports and signs: two checks
    (``certificate_no_extraction``, ``certificate_no_store_copies``) join ``checks``, so
    ``passed`` is false when either fails, and each failure is a warning."""
    fails = certificate.failures()
    checks = dict(receipt.verification.checks)
    checks["certificate_no_extraction"] = bool(certificate.probes) and not any(
        r > 0 for lv in certificate.aer.values() for r in lv.values())
    checks["certificate_no_store_copies"] = not any(n > 0 for n in certificate.store_copies.values())
    v = receipt.verification.model_copy(update={"checks": checks, "passed": all(checks.values())})
    return sign(receipt.model_copy(update={
        "certificate": certificate, "verification": v,
        "warnings": [*receipt.warnings, *(f"certificate: {f}" for f in fails)]}), key)


def verify_signature(receipt: Receipt, public_key: bytes | None = None) -> bool:
    """True iff ``receipt`` was signed by ``public_key`` (default: the local signing key's
    public half; no key is ever created here) and is unaltered."""
    try:
        pub = public_key if public_key is not None else public_key_bytes(create=False)
        if receipt.public_key and receipt.public_key != pub.hex():
            return False
        Ed25519PublicKey.from_public_bytes(pub).verify(bytes.fromhex(receipt.signature), receipt.payload())
    except (InvalidSignature, ValueError):
        return False
    return True


def load_receipt(path: str | Path) -> Receipt:
    p = Path(path)
    try:
        data: Any = json.loads(p.read_text(encoding="utf-8"))
        return Receipt.model_validate(data)
    except FileNotFoundError:
        raise ReceiptError(f"{p} does not exist") from None
    except IsADirectoryError:
        raise ReceiptError(f"{p} is a folder; give the receipt's .json file") from None
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise ReceiptError(f"{p} is not a traceless receipt: field {where!r}: {err['msg']} (unsigned "
                           "or unknown fields are refused)") from None
    except ValueError as e:
        raise ReceiptError(f"{p} is not a traceless receipt: {str(e).splitlines()[0]}") from None


def write_receipt(receipt: Receipt, path: str | Path) -> Path:
    """Write atomically (temp file + rename)."""
    p = Path(path)
    tmp = p.with_suffix(p.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(receipt.model_dump_json(indent=2))
    os.replace(tmp, p)
    return p


def check_receipt_path(path: str | Path) -> Path:
    """Validate where a receipt will be written BEFORE anything is forgotten."""
    from traceless.errors import ConfigError

    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"--receipt {p} is a folder; give a file path such as {p}/receipt.json")
    if not p.parent.is_dir():
        raise ConfigError(f"--receipt {p}: folder {p.parent} does not exist; create it first")
    if not os.access(p.parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ConfigError(f"--receipt {p} is not writable; choose another path")
    return p
