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
import pickle
import struct
from collections.abc import Sequence
from typing import Any

from traceless.forget import occurrences
from traceless.systems.kernel import literal_forms

__all__ = ["ID_SIZE", "absent", "decode_ids", "encode_key", "encode_keys", "float_run", "key_forms", "may_hold", "pickled_str",
           "point_needles", "selected", "split_ids", "text_needle"]

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
    """The indexes of ``blobs`` that ``may_hold`` selects. The points are joined and searched
    for every needle and both forms of the pickled user id at once, as the byte scan searches
    a file (``traceless.forget.occurrences``: every overlapping occurrence); only a point
    where one starts, or (with a user) a point not pickled with protocol 2 or later, is
    decided by ``may_hold``. A point's whole bytes are searched, its floats too: a superset of
    what ``may_hold`` searches."""
    if not blobs or user is None and not needles:
        return []
    import numpy as np  # noqa: PLC0415 - numpy's import (0.1 s) only where points are searched

    text = b"".join(blobs)
    lens = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))
    starts = np.cumsum(lens) - lens
    hits = np.array(occurrences(text, [*needles, *(user or ())]), dtype=np.int64)
    found = np.zeros(len(blobs), dtype=bool)
    found[np.searchsorted(starts, hits, side="right") - 1] = True
    if user is not None:  # a pickle of protocol 0 or 1 is always decoded (``may_hold``)
        arr = np.frombuffer(text, dtype=np.uint8)
        big = lens >= 2
        found |= ~big
        at = starts[big]
        found[big] |= (arr[at] != 0x80) | (arr[at + 1] < 2)
    return [i for i in np.flatnonzero(found).tolist() if may_hold(blobs[i], user, needles)]


_UUID_KEY = pickle.dumps("0" * 36, protocol=_KEY_PROTOCOL)
"""The pickle of a 36-character string id (a UUID's), the shape of most keys: 13 bytes, the
id, 2 bytes (51: whole base64 quanta, so many keys joined decode at once)."""


ID_SIZE = 36
"""The UTF-8 length of most ids (a UUID's string): ``split_ids`` and ``absent`` take those joined."""


def decode_ids(keys: Sequence[str]) -> set[bytes]:
    """The UTF-8 bytes of ``str(id)`` of every point whose key is in ``keys`` (the inverse of
    ``encode_key``; ``split_ids``'s two parts as one set)."""
    joined, other = split_ids(keys)
    return {joined[i:i + ID_SIZE] for i in range(0, len(joined), ID_SIZE)} | other


def split_ids(keys: Sequence[str]) -> tuple[bytes, set[bytes]]:
    """(the ``ID_SIZE``-byte ids of the keys of 36-character string ids, joined; the UTF-8
    bytes of every other key's ``str(id)``). The keys of 36-character ids are decoded joined,
    at once, their fixed bytes checked column by column; any other key is decoded alone."""
    size, b64 = len(_UUID_KEY), len(_UUID_KEY) // 3 * 4
    fast = [k for k in keys if len(k) == b64 and k[-1] != "="]
    raw = base64.b64decode("".join(fast))
    n = len(fast)
    ok = len(raw) == n * size and all(raw[j::size] == _UUID_KEY[j:j + 1] * n for j in (*range(13), size - 2, size - 1))
    joined = b""
    if ok and n:
        import numpy as np  # noqa: PLC0415 - numpy's import only where keys are decoded

        joined = np.frombuffer(raw, dtype=np.uint8).reshape(n, size)[:, 13:13 + ID_SIZE].tobytes()
    other: set[bytes] = set()
    for k in (k for k in keys if not ok or len(k) != b64 or k[-1] == "="):
        if (i := _decode_key(k)) is not None:
            other.add(str(i).encode("utf-8", "surrogatepass"))
    return joined, other


def absent(ids: bytes, among: bytes, size: int = ID_SIZE) -> list[int]:
    """The indexes ``i`` of the ``size``-byte records of ``ids`` (``ids[i*size:(i+1)*size]``)
    that no record of ``among`` equals. Each record is mixed into 64 bits and looked up among
    ``among``'s sorted; a record whose mix is found is compared byte for byte with the one
    found, and a mix found with other bytes (two records sharing it) is decided by a set."""
    import numpy as np  # noqa: PLC0415 - numpy's import only where ids are compared

    a, b = _words(ids, size), _words(among, size)
    if not len(a):
        return []
    if not len(b):
        return list(range(len(a)))
    ha, hb = _mix(a), _mix(b)
    order = np.argsort(hb)
    near = order[np.minimum(np.searchsorted(hb[order], ha), len(hb) - 1)]
    same = hb[near] == ha  # a record of ``among`` has that mix (the one found, if any)
    equal = same.copy()
    equal[same] = (b[near[same]] == a[same]).all(axis=1)
    if (unsure := np.flatnonzero(same & ~equal)).size:
        whole = {among[i:i + size] for i in range(0, len(among), size)}
        equal[[i for i in unsure.tolist() if ids[i * size:(i + 1) * size] in whole]] = True
    return np.flatnonzero(~equal).tolist()


def _words(records: bytes, size: int) -> Any:
    """The ``size``-byte records as rows of 64-bit words (zero-padded to a whole word)."""
    import numpy as np  # noqa: PLC0415

    n, width = len(records) // size, -(-size // 8)
    rows = np.zeros((n, width * 8), dtype=np.uint8)
    rows[:, :size] = np.frombuffer(records, dtype=np.uint8, count=n * size).reshape(n, size)
    return rows.view("<u8")


def _mix(words: Any) -> Any:
    """A 64-bit mix of each row of words (FNV-style: xor, then multiply, word by word)."""
    import numpy as np  # noqa: PLC0415

    h = np.full(len(words), 0xCBF29CE484222325, dtype=np.uint64)
    for j in range(words.shape[1]):
        h = (h ^ words[:, j]) * np.uint64(0x100000001B3)
    return h


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
