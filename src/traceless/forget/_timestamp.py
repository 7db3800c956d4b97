"""RFC 3161 time-stamps on receipts (issue 38.4): an Ed25519 signature proves who signed a
receipt, not when. ``forget --tsa URL`` asks the time-stamp authority the user names for a
token over the receipt's signature bytes (SHA-256 imprint, a nonce, the TSA's certificate
requested) and keeps it in the receipt's ``timestamp`` field; ``forget verify --tsa-cert
CA.pem`` checks the token (``rfc3161-client``: the TSA's signature chained to that root,
the imprint, the nonce) and says the time the TSA vouches for. Only the signature's digest
leaves the machine (no receipt content), and only to the URL given. A request bundle's signed
summary (``bundle.json``) is stamped the same way, over its own signature.
"""

from __future__ import annotations

import base64
import datetime as dt
import urllib.error
import urllib.request
from pathlib import Path
from typing import TypeVar

from traceless.errors import ConfigError, ReceiptError
from traceless.forget._bundle import RequestBundle
from traceless.forget._receipt import Receipt

Signed = TypeVar("Signed", Receipt, RequestBundle)
"""What carries a time-stamp over its signature: a receipt, or a request bundle's summary."""

__all__ = ["check_tsa_url", "stamp_receipt", "verify_timestamp"]


def _rfc3161() -> None:
    """``rfc3161-client`` is installed, or one line that says how."""
    import importlib.util

    if importlib.util.find_spec("rfc3161_client") is None:
        raise ConfigError("time-stamps need rfc3161-client: pip install 'traceless[tsa]'")


def check_tsa_url(url: str) -> str:
    """``url`` if it is an http(s) URL and the client is installed (checked before anything is erased)."""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--tsa {url!r}: give the time-stamp authority's http(s) URL, e.g. https://tsa.example/tsr")
    _rfc3161()
    return url


def _imprinted(receipt: Receipt | RequestBundle) -> bytes:
    if not receipt.signature:
        raise ReceiptError("the receipt is not signed: only a signed receipt is time-stamped")
    return bytes.fromhex(receipt.signature)


def stamp_receipt(receipt: Signed, url: str, *, timeout: float = 30.0) -> Signed:
    """The receipt (or a request bundle's summary) with a TSA's token over its signature
    (``timestamp``); the signature itself is unchanged, so it verifies as before."""
    from rfc3161_client import PKIStatus, TimestampRequestBuilder, decode_timestamp_response

    req = TimestampRequestBuilder().data(_imprinted(receipt)).nonce(nonce=True).cert_request(cert_request=True).build()
    http = urllib.request.Request(check_tsa_url(url), data=req.as_bytes(), method="POST",
                                  headers={"Content-Type": "application/timestamp-query"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # only the URL given
    try:
        with opener.open(http, timeout=timeout) as r:
            body = r.read()
    except (urllib.error.URLError, OSError) as e:
        raise ConfigError(f"--tsa {url}: no time-stamp ({getattr(e, 'reason', e)}); check the URL, or run without "
                          "--tsa") from None
    try:
        resp = decode_timestamp_response(body)
    except ValueError as e:
        raise ConfigError(f"--tsa {url}: the reply is not an RFC 3161 response ({e})") from None
    if resp.status not in (PKIStatus.GRANTED, PKIStatus.GRANTED_WITH_MODS):
        raise ConfigError(f"--tsa {url}: the TSA refused the request (status {resp.status})")
    if resp.tst_info.nonce != req.nonce:
        raise ConfigError(f"--tsa {url}: the reply answers another request (nonce differs)")
    return receipt.model_copy(update={"timestamp": base64.b64encode(body).decode("ascii")})


def verify_timestamp(receipt: Receipt | RequestBundle, root: str | Path) -> dt.datetime:
    """The time the receipt's (or a bundle summary's) token vouches for, checked against the TSA root certificate
    ``root`` (PEM): the token's signature chains to it, and its imprint is the SHA-256 of
    this receipt's signature. ``ReceiptError`` when any of it does not hold."""
    from cryptography import x509
    from rfc3161_client import VerificationError, VerifierBuilder, decode_timestamp_response

    if not receipt.timestamp:
        raise ReceiptError("the receipt has no time-stamp (it was made without --tsa)")
    _rfc3161()
    try:
        ca = x509.load_pem_x509_certificate(Path(root).read_bytes())
    except (OSError, ValueError) as e:
        raise ConfigError(f"--tsa-cert {root}: not a PEM certificate ({e}); give the TSA's root CA") from None
    resp = decode_timestamp_response(base64.b64decode(receipt.timestamp))
    try:
        VerifierBuilder(roots=[ca]).build().verify_message(resp, _imprinted(receipt))
    except VerificationError as e:
        raise ReceiptError(f"the receipt's time-stamp does not verify under {root} ({e})") from None
    return resp.tst_info.gen_time
