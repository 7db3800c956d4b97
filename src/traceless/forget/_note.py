"""C2SP signed notes (c2sp.org/signed-note) with Ed25519, and the checkpoints of
c2sp.org/tlog-checkpoint they carry.

A signed note is a text ending in a newline, a blank line, then signature lines
``— <key name> <base64(key id || signature)>``; the key id is
``SHA-256(key name || 0x0A || 0x01 || public key)[:4]`` and the Ed25519 signature is over the
text (its final newline included). A checkpoint's text is three lines: the log's origin, the
tree size in decimal and the base64 root hash. The key name of a traceless log is its origin,
so a verifier needs the public key alone; ``verifier_key`` is the ``name+id+key`` string Go's
``golang.org/x/mod/sumdb/note`` and transparency-dev tools take.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict

from traceless.errors import ReceiptLogError
from traceless.keys import public_key_bytes

__all__ = ["Checkpoint", "note_key_id", "open_checkpoint", "open_note", "sign_note", "verifier_key"]

DASH = "\u2014"
ED25519 = b"\x01"
_SIZE = re.compile(r"0|[1-9][0-9]*")


def note_key_id(name: str, public: bytes) -> bytes:
    """The 4-byte key id of an Ed25519 key named ``name``."""
    return hashlib.sha256(name.encode() + b"\n" + ED25519 + public).digest()[:4]


def verifier_key(name: str, public: bytes) -> str:
    """``name+<key id hex>+<base64(0x01 || public key)>``: the key in the form note tools read."""
    return f"{name}+{note_key_id(name, public).hex()}+{base64.b64encode(ED25519 + public).decode()}"


def _check_name(name: str) -> None:
    if not name or "+" in name or any(c.isspace() for c in name):
        raise ReceiptLogError(f"note key name {name!r} is empty or holds a space or '+'; choose another log origin")


def sign_note(text: str, name: str, key: Ed25519PrivateKey) -> str:
    """The signed note of ``text`` (which must end in a newline) under ``key`` named ``name``."""
    _check_name(name)
    if not text.endswith("\n") or any(ord(c) < 0x20 and c != "\n" for c in text):
        raise ReceiptLogError("a note's text must end in a newline and hold no control character")
    sig = note_key_id(name, public_key_bytes(key)) + key.sign(text.encode())
    return f"{text}\n{DASH} {name} {base64.b64encode(sig).decode()}\n"


def _split_note(note: str, what: str) -> tuple[str, list[str]]:
    if not note.endswith("\n") or "\n\n" not in note:
        raise ReceiptLogError(f"{what} is not a signed note (a text, a blank line, signature lines)")
    cut = note.rstrip("\n").rfind("\n\n")
    text, sigs = note[:cut + 1], note[cut + 2:].splitlines()
    if not sigs or any(not s.startswith(DASH + " ") for s in sigs):
        raise ReceiptLogError(f"{what}: its signature lines must each read '{DASH} <key name> <base64 signature>'")
    return text, sigs


def open_note(note: str, name: str, public: bytes, what: str = "the note") -> str:
    """The text of ``note`` once a signature by ``public`` named ``name`` verifies (signatures
    of other keys are ignored, as the spec says); ``ReceiptLogError`` otherwise."""
    text, sigs = _split_note(note, what)
    kid = note_key_id(name, public)
    known = 0
    for line in sigs:
        parts = line[2:].split(" ")
        if len(parts) != 2 or parts[0] != name:
            continue
        try:
            raw = base64.b64decode(parts[1], validate=True)
        except binascii.Error:
            raise ReceiptLogError(f"{what}: a signature is not base64") from None
        if raw[:4] != kid:
            continue
        known += 1
        try:
            Ed25519PublicKey.from_public_bytes(public).verify(raw[4:], text.encode())
        except InvalidSignature:
            raise ReceiptLogError(f"{what}: the signature of {name} does not verify: the note was altered "
                                  "or signed by another key (pass the signer's key with --public-key)") from None
    if not known:
        raise ReceiptLogError(f"{what} carries no signature of {name} by this key (pass the signer's key with "
                              "--public-key)")
    return text


class Checkpoint(BaseModel):
    """A log's signed state (c2sp.org/tlog-checkpoint): origin, tree size, root hash."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    origin: str
    """The log's unique name (its first line); the checkpoint's key name too."""
    size: int
    """Entries in the tree."""
    root: str
    """The RFC 9162 root hash of those entries (hex; base64 in the note)."""

    def text(self) -> str:
        """The note text: origin, size and base64 root, one per line."""
        return f"{self.origin}\n{self.size}\n{base64.b64encode(bytes.fromhex(self.root)).decode()}\n"

    def sign(self, key: Ed25519PrivateKey) -> str:
        """The checkpoint as a note signed by ``key`` (named by the origin)."""
        return sign_note(self.text(), self.origin, key)


def open_checkpoint(note: str, public: bytes, what: str = "the checkpoint") -> Checkpoint:
    """The checkpoint in ``note`` once its signature by ``public`` verifies."""
    origin = note.split("\n", 1)[0]
    _check_name(origin)
    lines = open_note(note, origin, public, what).split("\n")
    if len(lines) < 4 or not _SIZE.fullmatch(lines[1]):
        raise ReceiptLogError(f"{what} is not a checkpoint: its text must be the origin, the tree size and "
                              "the base64 root hash")
    try:
        root = base64.b64decode(lines[2], validate=True)
    except binascii.Error:
        root = b""
    if len(root) != 32:
        raise ReceiptLogError(f"{what}: its root hash is not 32 bytes of base64")
    return Checkpoint(origin=origin, size=int(lines[1]), root=root.hex())
