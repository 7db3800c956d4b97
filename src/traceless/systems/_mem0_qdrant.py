"""qdrant local's points found by their bytes (issue 39): which pickled points a scan or a
plan for a user and some literals must decode, told from the stored bytes alone.

A point is ``pickle.dumps`` of a ``PointStruct`` (qdrant local's ``CollectionPersistence``);
every ``str`` in it (the payload's values, and the strings inside a nested value) is there as
its UTF-8 bytes after a string opcode. The scan's match rule reads a payload's texts: a
``str`` value as it is, any other value as its JSON (``json.dumps(ensure_ascii=False)``). So

* the user's points (``user_id`` equal to the user) hold the user id pickled as a string:
  ``SHORT_BINUNICODE`` (protocol 4 and later, under 256 bytes) or ``BINUNICODE`` (protocols
  2 and 3, or longer), exactly: ``u1`` never selects ``u10``'s points by that rule;
* a point whose texts hold a literal's text form holds ``text_needle(form)``: the form itself
  when it can only be matched in a string's own characters, the form less a first run that
  a JSON escape could have produced otherwise; a form that could also be matched across a
  JSON value's syntax (a quote) or in a number, ``true``/``false``/``null`` (only those
  characters) has no needle, and every point is decoded then (``point_needles`` is None).

Nothing here decodes a point; the caller decodes the selected ones and applies the one match
rule to them (a superset is selected: the same hits as decoding every point).
"""

from __future__ import annotations

import base64
import bisect
import itertools
import pickle
import struct
from collections.abc import Sequence

from traceless.systems.kernel import literal_forms

__all__ = ["decode_ids", "encode_key", "encode_keys", "float_run", "key_forms", "may_hold", "pickled_str",
           "point_needles", "selected", "text_needle"]

_ESCAPE_TAIL = frozenset("nrtbfu0123456789abcdef")
"""What may follow a backslash in ``json.dumps(ensure_ascii=False)`` (``\\n`` … ``\\u001f``)."""
_OUTSIDE = frozenset("{}[],: 0123456789-+.eE" "truefalsnNIiy")
"""Every character JSON writes outside a string (syntax, numbers, ``true``, ``NaN``, ``Infinity`` …)."""
_KEY_PROTOCOL = 4  # qdrant local's ``CollectionPersistence.KEY_PICKLE_PROTOCOL``


def text_needle(form: str) -> bytes | None:
    """Bytes that every point whose texts hold ``form`` holds, or None when there are none.

    A form with a quote can match across a JSON value's syntax: None. A form with a
    backslash or a control character matches a JSON text only where the string itself holds
    the form (a control character is always escaped there; a backslash of the form can only
    be a string's own, doubled): the form's bytes. Any other form matches inside one
    string's characters when it holds one character JSON never writes outside a string, but
    may begin inside an escape (``\\n``, ``\\u001f``): the form less its first run (at most 5)
    of characters an escape ends with. A form of only such characters: None."""
    if '"' in form:
        return None
    if "\\" in form or any(c < " " for c in form):
        return form.encode("utf-8", "surrogatepass")
    k = 0
    while k < min(5, len(form)) and form[k] in _ESCAPE_TAIL:
        k += 1
    core = form[k:]
    if all(c in _OUTSIDE for c in core):
        return None
    return core.encode("utf-8", "surrogatepass")


def point_needles(literals: Sequence[str]) -> list[bytes] | None:
    """The needles of every text form of every literal; None when one form has none (then
    every point is decoded)."""
    out: set[bytes] = set()
    for lit in literals:
        for form in literal_forms(lit):
            needle = text_needle(form)
            if needle is None:
                return None
            out.add(needle)
    return sorted(out)


def pickled_str(s: str) -> tuple[bytes, bytes]:
    """``s`` as a pickle stores it: (protocol 4 and later, protocols 2 and 3)."""
    b = s.encode("utf-8", "surrogatepass")
    long = b"X" + struct.pack("<I", len(b)) + b  # BINUNICODE
    return (b"\x8c" + bytes([len(b)]) + b if len(b) < 256 else long), long


def may_hold(blob: bytes, user: tuple[bytes, bytes] | None, needles: Sequence[bytes]) -> bool:
    """The point's bytes may be the user's (``pickled_str``) or hold a literal's needle. A
    pickle of protocol 0 or 1 (never qdrant's) is always decoded. The unnamed vector's floats
    (``float_run``: no string is there, and nine in ten of a point's bytes) are not searched."""
    lo, hi = float_run(blob) or (len(blob), len(blob))
    for n in needles:
        if blob.find(n, 0, lo) >= 0 or blob.find(n, hi) >= 0:
            return True
    if user is None:
        return False
    if blob[:1] != b"\x80" or len(blob) < 2 or blob[1] < 2:
        return True
    u = user[0] if blob[1] >= 4 else user[1]
    return blob.find(u, 0, lo) >= 0 or blob.find(u, hi) >= 0


_VECTOR = b"\x8c\x06vector\x94}\x94\x8c\x00\x94]\x94("
"""A protocol-4 pickle's ``"vector": {"": [`` (qdrant local's unnamed vector), floats next."""
_PAYLOAD = b"es\x8c\x07payload\x94"
"""What follows the floats: the list and the vector dict closed, then the payload's key."""


def float_run(blob: bytes) -> tuple[int, int] | None:
    """(start, end) of the floats of a point's unnamed vector in its pickle: a run of
    ``BINFLOAT`` (``G`` and 8 raw bytes: every 9th byte a ``G``, the run ending where one is
    not), the payload's key right after it; None when the pickle is not laid out so (then
    every byte is searched). The floats' raw bytes belong to no string: a string's bytes (the
    user id, a payload text) lie wholly before or after them."""
    v = blob.find(_VECTOR, 0, 512)
    if v < 0:
        return None
    p = v + len(_VECTOR)
    ops = blob[p::9]
    q = p + 9 * (len(ops) - len(ops.lstrip(b"G")))
    return (p, q) if q > p and blob.startswith(_PAYLOAD, q) else None


def encode_key(point_id: str | int) -> str:
    """The ``points.id`` of a point id (qdrant local's ``CollectionPersistence.encode_key``)."""
    return base64.b64encode(pickle.dumps(point_id, protocol=_KEY_PROTOCOL)).decode("utf-8")


def encode_keys(point_ids: Sequence[str]) -> list[str]:
    """``encode_key`` of many string ids at once: the pickles whose length is a multiple of 3
    (a UUID's: 51 bytes) base64-encoded joined, in one call, then cut apart."""
    pickles = [pickle.dumps(i, protocol=_KEY_PROTOCOL) for i in point_ids]
    whole = [p for p in pickles if len(p) % 3 == 0]
    enc = base64.b64encode(b"".join(whole)).decode("utf-8")
    out, pos = [], 0
    for p in pickles:
        if len(p) % 3:
            out.append(base64.b64encode(p).decode("utf-8"))
            continue
        n = len(p) // 3 * 4
        out.append(enc[pos:pos + n])
        pos += n
    return out


def selected(blobs: Sequence[bytes], user: tuple[bytes, bytes] | None, needles: Sequence[bytes]) -> list[int]:
    """The indexes of ``blobs`` that ``may_hold`` selects. Points laid out alike (the first
    one's ``float_run``, checked for every point of the batch at once: its vector marker the
    first, every 9th byte of the floats a ``G``, the payload key after them) are searched
    at once, the bytes before and after their floats joined, and only the points where a needle
    is found there are decided by ``may_hold``; a batch not laid out alike is decided point by
    point."""
    run = float_run(blobs[0]) if blobs else None
    if run is None or user is None and not needles:
        return [i for i, b in enumerate(blobs) if may_hold(b, user, needles)]
    p, q = run
    n, m, k, ops = len(blobs), len(_VECTOR), len(_PAYLOAD), b"G" * ((q - p) // 9)
    alike = (b"".join([b[q:q + k] for b in blobs]) == _PAYLOAD * n
             and all(b[p:q:9] == ops for b in blobs)
             and all(b.find(_VECTOR, 0, p) == p - m for b in blobs))  # protocol 4+: MEMOIZE in the marker
    if not alike:
        return [i for i, b in enumerate(blobs) if may_hold(b, user, needles)]
    heads = [b[:p] for b in blobs]
    tails = [b[q:] for b in blobs]
    found = _parts_holding(heads, [*needles, *(user or ())]) | _parts_holding(tails, [*needles, *(user or ())])
    if user is not None:  # a pickle of protocol 0 or 1 is always decoded (``may_hold``)
        found |= {i for i, b in enumerate(blobs) if b[:1] != b"\x80" or len(b) < 2 or b[1] < 2}
    return [i for i in sorted(found) if may_hold(blobs[i], user, needles)]


def _parts_holding(parts: Sequence[bytes], needles: Sequence[bytes]) -> set[int]:
    """The indexes of ``parts`` that may hold one of ``needles``: the parts joined, each needle
    found in the joined bytes, each place mapped back to the part it starts in (a superset: a
    place across a join counts for the part it starts in; ``may_hold`` decides)."""
    text = b"\0".join(parts)
    starts = list(itertools.accumulate((len(x) + 1 for x in parts[:-1]), initial=0))
    out: set[int] = set()
    for n in needles:
        at = text.find(n)
        while at >= 0:
            out.add(bisect.bisect_right(starts, at) - 1)
            at = text.find(n, at + 1)
    return out


_UUID_KEY = pickle.dumps("0" * 36, protocol=_KEY_PROTOCOL)
"""The pickle of a 36-character string id (a UUID's), the shape of most keys: 13 bytes, the
id, 2 bytes (51: whole base64 quanta, so many keys joined decode at once)."""


def decode_ids(keys: Sequence[str]) -> set[bytes]:
    """The UTF-8 bytes of ``str(id)`` of every point whose key is in ``keys`` (the inverse of
    ``encode_key``): the keys of 36-character string ids decoded joined, at once, their fixed
    bytes checked column by column; any other key decoded alone."""
    size, b64 = len(_UUID_KEY), len(_UUID_KEY) // 3 * 4
    fast = [k for k in keys if len(k) == b64 and k[-1] != "="]
    raw = base64.b64decode("".join(fast))
    n = len(fast)
    ok = len(raw) == n * size and all(raw[j::size] == _UUID_KEY[j:j + 1] * n for j in (*range(13), size - 2, size - 1))
    out = {raw[i + 13:i + 13 + 36] for i in range(0, len(raw), size)} if ok else set()
    for k in (k for k in keys if not ok or len(k) != b64 or k[-1] == "="):
        if (i := _decode_key(k)) is not None:
            out.add(str(i).encode("utf-8", "surrogatepass"))
    return out


def _decode_key(key: str) -> str | int | None:
    """The id whose ``encode_key`` is ``key``; None for a key no id encodes to (no memory's)."""
    try:
        i = pickle.loads(base64.b64decode(key, validate=True))  # noqa: S301 - qdrant local's own key format
    except Exception:  # noqa: BLE001 - not a pickle: no id's key
        return None
    return i if isinstance(i, (str, int)) and encode_key(i) == key else None


def key_forms(point_id: str) -> list[str]:
    """The keys a point whose ``str(id)`` is ``point_id`` may have: the string's, and the
    integer's for an integer id (``str(5) == "5"``)."""
    out = [encode_key(point_id)]
    if not point_id.lstrip("-").isdigit():  # a UUID (most): no integer's
        return out
    try:
        n = int(point_id)
    except ValueError:
        return out
    return [*out, encode_key(n)] if str(n) == point_id else out
