"""A JSON store file (``{collection: {key: value, …}, …}``, what LlamaIndex's ``persist`` writes)
indexed by entry at C speed: each entry's span in the file's text, its value decoded by the
``json`` module's C scanner, except a flat array of numbers (an embedding), left undecoded
(``LAZY``) until asked for: most of a vector store's bytes, and most of a full decode's time.

The spans let a scan find the entries that hold a pattern by searching the file's text once
per pattern (``str.find``) and decode only those, and let an erasure splice the file
(``splice``): every entry it does not change keeps its bytes.

A file ``json.dump`` wrote with its defaults (ASCII, separators ``", "``/``": "``, no indent:
what LlamaIndex's ``persist`` writes) is indexed without a Python step per entry
(``_Columns``): msgspec validates the file and gives each collection's keys and each value's
length at C speed, the spans follow from those lengths (checked to add up to each
collection's bytes exactly: a duplicate key, a space, an escaped key fall back to the parse
above), and an entry is decoded only when asked for (``entry``).
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from traceless.forget import occurrences
from traceless.systems.kernel import stream_hash

__all__ = ["LAZY", "Entry", "JsonIndex", "find_all"]

_HASH_CHUNK = 1 << 26
"""Characters hashed at a time from a file's text that is not ASCII (encoded chunk by chunk)."""

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER_CHARS = frozenset("0123456789.,-+eE []NaInfity")
"""Every character a flat array of JSON numbers can hold (``NaN``, ``Infinity`` as Python writes them)."""
_DECODER = json.JSONDecoder()
_SCAN = _DECODER.scan_once  # type: ignore[attr-defined]
_SPACE = frozenset(" \t\n\r")


class _Lazy:
    """The value of an entry not decoded (a flat array of numbers)."""

    def __repr__(self) -> str:
        return "LAZY"


LAZY = _Lazy()


@dataclass(slots=True)
class Entry:
    """One entry of one collection: ``coll[key]`` (``key`` "" for a collection that is no object)."""

    coll: str
    key: str
    start: int
    """Offset in the file's text of the key's opening quote (of the value, for a non-object)."""
    vstart: int
    """Offset of the value's first character."""
    end: int
    """One past the value's last character."""
    value: Any
    """The decoded value, or ``LAZY``."""


def _ws(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m is not None else pos


def _expect(text: str, pos: int, ch: str) -> None:
    if text[pos:pos + 1] != ch:
        raise ValueError(f"expected {ch!r} at {pos}")


def _value(text: str, pos: int) -> tuple[Any, int]:
    """(value, end) of the value at ``pos``; a flat array of numbers is left ``LAZY``."""
    if text[pos:pos + 1] == "[":
        close = text.find("]", pos)
        if close > 0 and all(text.find(c, pos + 1, close) < 0 for c in '"[{'):
            return LAZY, close + 1
    try:
        return _SCAN(text, pos)  # type: ignore[no-any-return]
    except StopIteration as e:
        raise ValueError(f"expected a value at {e.value}") from None


def _object(text: str, pos: int, coll: str, out: list[Entry], seps: set[str]) -> int:
    """The entries of the object at ``pos`` (its ``{``) appended, the separators met added to
    ``seps``; returns the offset past its ``}``. The separators ``json.dump`` writes (``": "``,
    ``", "``) are taken without a regex (most of a file's entries: a third of the parse)."""
    pos = _ws(text, pos + 1)
    if text[pos:pos + 1] == "}":
        return pos + 1
    while True:
        _expect(text, pos, '"')
        key, after = scanstring(text, pos + 1)
        if text.startswith(": ", after) and text[after + 2:after + 3] not in _SPACE:
            vstart = after + 2
        else:
            colon = _ws(text, after)
            _expect(text, colon, ":")
            vstart = _ws(text, colon + 1)
            seps.add(text[after:vstart])
        value, end = _value(text, vstart)
        out.append(Entry(coll, key, pos, vstart, end, value))
        if text.startswith(', "', end):
            pos = end + 2
            continue
        pos = _ws(text, end)
        if text[pos:pos + 1] == "}":
            return pos + 1
        _expect(text, pos, ",")
        nxt = _ws(text, pos + 1)
        seps.add(text[end:nxt])
        pos = nxt


def _parse(text: str, seps: set[str], ranges: dict[str, tuple[int, int]]) -> tuple[list[Entry],
                                                                                 dict[str, tuple[int, int]]]:
    """Every entry of every collection, in file order, and each object collection's span; each
    collection's entries' indexes put in ``ranges`` (first, one past the last)."""
    entries: list[Entry] = []
    colls: dict[str, tuple[int, int]] = {}
    pos = _ws(text, 0)
    _expect(text, pos, "{")
    pos = _ws(text, pos + 1)
    while text[pos:pos + 1] != "}":
        _expect(text, pos, '"')
        coll, after = scanstring(text, pos + 1)
        pos = _ws(text, after)
        _expect(text, pos, ":")
        pos = _ws(text, pos + 1)
        first = len(entries)
        if text[pos:pos + 1] == "{":
            start, pos = pos, _object(text, pos, coll, entries, seps)
            colls[coll] = (start, pos)
        else:
            value, end = _DECODER.raw_decode(text, pos)
            entries.append(Entry(coll, "", pos, pos, end, value))
            pos = end
        if len(entries) > first:
            ranges[coll] = (first, len(entries))
        pos = _ws(text, pos)
        if text[pos:pos + 1] == ",":
            pos = _ws(text, pos + 1)
        elif text[pos:pos + 1] != "}":
            raise ValueError(f"expected ',' or '}}' at {pos}")
    if _ws(text, pos + 1) != len(text):
        raise ValueError("text after the top-level object")
    return entries, colls


def find_all(text: str, forms: Iterable[str]) -> list[int]:
    """Every offset of every form in ``text`` (one ``str.find`` pass per form, C speed)."""
    out: list[int] = []
    for f in forms:
        i = text.find(f) if f else -1
        while i >= 0:
            out.append(i)
            i = text.find(f, i + 1)
    return out


def _plain_keys(keys: list[str]) -> bool:
    """Every key written by ``json.dumps`` as itself between quotes (no escape)."""
    joined = "".join(keys)
    return joined.isascii() and joined.isprintable() and '"' not in joined and "\\" not in joined


def _address(buf: Any) -> int:
    return int(np.frombuffer(buf, np.uint8).ctypes.data) if len(buf) else 0


@dataclass(slots=True)
class _Columns:
    """The entries of a file ``json.dump`` wrote with its defaults, as arrays: keys, each entry's
    start, value start and end (a collection that is no object: one entry, key "")."""

    keys: list[str]
    colls: list[str]
    """Each collection's name, in file order."""
    first: list[int]
    """Index of each collection's first entry (``colls``' order)."""
    spans: dict[str, tuple[int, int]]
    """Each object collection's span (its ``{`` to one past its ``}``)."""
    start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    vstart: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @classmethod
    def of(cls, data: bytes) -> _Columns | None:
        """The columns, or None where the file is not ``json.dump``'s default output (ASCII, no
        newline, the separators ``", "`` and ``": "``, keys without escapes, no duplicate key):
        each collection's entries' lengths must add up to its bytes exactly. A file whose
        collections are all objects is decoded once (a collection's span follows from its
        entries' lengths); otherwise its top level first, then each object collection."""
        if not data.isascii() or b"\n" in data:
            return None
        try:
            colls = msgspec.json.decode(data, type=dict[str, dict[str, msgspec.Raw]])
        except msgspec.ValidationError:  # a collection that is no object
            return cls._of_top(data)
        except msgspec.DecodeError:
            return None
        out = cls([], list(colls), [], {})
        if not _plain_keys(out.colls):
            return None
        base, pos, parts = _address(data), 1, []
        for name, inner in colls.items():
            at = pos + len(name) + 4  # past '"name": '
            got = out._add(name, at, list(inner), list(inner.values()), base)
            if got is None:
                return None
            parts.append(got)
            pos = out.spans[name][1] + 2
        if (pos if colls else 3) != len(data) + 1:
            return None
        return out._joined(parts)

    @classmethod
    def _of_top(cls, data: bytes) -> _Columns | None:
        """``of`` for a file with a collection that is no object (one entry, key "")."""
        try:
            top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        out = cls([], list(top), [], {})
        if not _plain_keys(out.colls) or _layout(out.colls, list(top.values())) != len(data):
            return None
        base, parts = _address(data), []
        for name, raw in top.items():
            at = _address(raw) - base
            if data[at:at + 1] != b"{":
                out.first.append(len(out.keys))
                out.keys.append("")
                parts.append(np.array([[at], [at], [at + len(raw)]], np.int64))
                continue
            inner = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
            got = out._add(name, at, list(inner), list(inner.values()), base)
            if got is None or out.spans[name][1] != at + len(raw):
                return None
            parts.append(got)
        return out._joined(parts)

    def _add(self, name: str, at: int, keys: list[str], raws: list[msgspec.Raw], base: int) -> np.ndarray | None:
        """Add an object collection starting at ``at`` (its ``{``): its span, keys and first
        entry; returns its entries' (start, value start, end) rows, or None where a key is
        escaped or a value is not where the lengths put it."""
        if not _plain_keys(keys):
            return None
        self.first.append(len(self.keys))
        self.keys += keys
        head = np.fromiter(map(len, keys), np.int64, len(keys)) + 4  # '"key": '
        size = np.fromiter(map(len, raws), np.int64, len(raws))
        step = head + size + 2  # the entry and the ", " after it
        start = at + 1 + np.concatenate(([0], np.cumsum(step)[:-1])).astype(np.int64)
        self.spans[name] = (at, at + _layout(keys, raws))
        if keys and (_address(raws[0]) - base != start[0] + head[0] or _address(raws[-1]) - base != start[-1] + head[-1]):
            return None
        return np.stack([start, start + head, start + head + size]) if keys else np.zeros((3, 0), np.int64)

    def spliced(self, changes: Mapping[int, str | None]) -> _Columns:
        """The columns after ``JsonIndex.splice_parts`` (entry ``i`` removed where
        ``changes[i]`` is None, else its text ``changes[i]``; only object collections' entries)."""
        keep = np.ones(len(self.keys), bool)
        head = self.vstart - self.start
        size = self.end - self.vstart
        for i, text in changes.items():
            if text is None:
                keep[i] = False
            else:
                size[i] = len(text) - head[i]
        out = _Columns([], self.colls, [], {})
        parts: list[np.ndarray] = []
        delta = 0  # how far the entries after the collections done so far moved
        for k, coll in enumerate(self.colls):
            first, last = self.first[k], self.first[k + 1] if k + 1 < len(self.colls) else len(self.keys)
            out.first.append(len(out.keys))
            if coll not in self.spans:
                out.keys += self.keys[first:last]
                parts.append(np.stack([self.start[first:last], self.vstart[first:last], self.end[first:last]]) + delta)
                continue
            at, end = self.spans[coll]
            idx = np.flatnonzero(keep[first:last]) + first
            step = head[idx] + size[idx] + 2
            start = at + delta + 1 + np.concatenate(([0], np.cumsum(step)[:-1]))[:len(idx)].astype(np.int64)
            out.keys += itertools.compress(self.keys[first:last], keep[first:last])
            parts.append(np.stack([start, start + head[idx], start + head[idx] + size[idx]]))
            length = int(step.sum()) if len(idx) else 2  # "{" + entries and ", " between + "}"
            out.spans[coll] = (at + delta, at + delta + length)
            delta += length - (end - at)
        return out._joined(parts)

    def _joined(self, parts: list[np.ndarray]) -> _Columns:
        rows = np.concatenate(parts, axis=1) if parts else np.zeros((3, 0), np.int64)
        self.start, self.vstart, self.end = rows[0], rows[1], rows[2]
        return self


def _layout(keys: list[str], raws: list[msgspec.Raw]) -> int:
    """The bytes of an object holding these keys and values as ``json.dumps`` joins them."""
    if not keys:
        return 2
    return 2 + sum(map(len, keys)) + 4 * len(keys) + sum(map(len, raws)) + 2 * (len(keys) - 1)


class JsonIndex:
    """One JSON store file's entries with their spans (raises ``ValueError``/``UnicodeDecodeError``
    on a file that is not one complete JSON object of UTF-8)."""

    _cols: _Columns | None

    def __init__(self, path: Path, data: bytes | None = None) -> None:
        data = path.read_bytes() if data is None else data
        cols = _Columns.of(data)
        if cols is not None:
            ranges = {c: (f, t) for c, f, t in zip(cols.colls, cols.first, [*cols.first[1:], len(cols.keys)],
                                                    strict=True) if t > f}
            self._set(path, None, data, None, cols.spans, ranges, True)
            self._cols = cols
            return
        text = data.decode("utf-8")
        seps: set[str] = set()
        ranges = {}
        entries, spans = _parse(text, seps, ranges)
        self._set(path, text, data, entries, spans, ranges, seps <= {": ", ", "} and "\n" not in text)

    def _set(self, path: Path, text: str | None, data: bytes, entries: list[Entry] | None,
             spans: dict[str, tuple[int, int]], ranges: dict[str, tuple[int, int]], standard: bool) -> None:
        self.path = path
        self._text = text
        self.data = data if text is None or len(data) == len(text) else None
        """The file's bytes when it is ASCII (its offsets are the text's): hashed without a copy."""
        self._entries, self.spans = entries, spans
        self.standard = standard
        """Written as ``json.dump`` writes by default (separators ``", "``, ``": "``, no indent): an
        entry's text is then what ``json.dumps`` makes of its value, but for the keys' order."""
        self.collections = sorted(set(ranges) | set(self.spans))
        self._cols = None
        self.memo: dict[Any, Any] = {}
        """What a caller derived from this index and keeps with it (``_llamaindex_live``: the owners' columns)."""
        self._made: dict[int, Entry] = {}
        self._where: dict[str, dict[str, int]] | None = None
        self._starts_: list[int] | None = None
        self._pieces: tuple[str, list[int], list[int]] | None = None
        self._range = ranges

    @property
    def columnar(self) -> bool:
        """Indexed without a Python step per entry (``_Columns``): entries are made when asked for."""
        return self._cols is not None

    @property
    def text(self) -> str:
        """The file's text (decoded on first use where the file was indexed from its bytes)."""
        if self._text is None:
            assert self.data is not None
            self._text = self.data.decode("ascii")
        return self._text

    @property
    def entries(self) -> list[Entry]:
        """Every entry, in file order (made on first use where the file was indexed as columns:
        a full read)."""
        if self._entries is None:
            self._entries = [self.entry(i) for i in range(len(self))]
        return self._entries

    def __len__(self) -> int:
        return len(self._cols.keys) if self._cols is not None else len(self.entries)

    def entry(self, i: int) -> Entry:
        """Entry ``i`` (its value decoded, ``LAZY`` for a flat array of numbers)."""
        if self._entries is not None or self._cols is None:
            return self.entries[i]
        e = self._made.get(i)
        if e is None:
            c = self._cols
            start, vstart, end = int(c.start[i]), int(c.vstart[i]), int(c.end[i])
            assert self.data is not None
            value = _value(self.data[vstart:end].decode("ascii"), 0)[0]
            e = self._made[i] = Entry(self.coll_of(i), c.keys[i], start, vstart, end, value)
        return e

    def coll_of(self, i: int) -> str:
        """The collection of entry ``i``."""
        for coll, (first, last) in self._range.items():
            if first <= i < last:
                return coll
        raise IndexError(i)

    def key(self, i: int) -> str:
        return self._cols.keys[i] if self._cols is not None else self.entries[i].key

    def bounds(self, i: int) -> tuple[int, int]:
        """(start, end) of entry ``i`` in the file."""
        if self._cols is not None:
            return int(self._cols.start[i]), int(self._cols.end[i])
        e = self.entries[i]
        return e.start, e.end

    @property
    def _starts(self) -> list[int]:
        """Each entry's start (made on first use: a ``hit``)."""
        if self._starts_ is None:
            self._starts_ = [e.start for e in self.entries]
        return self._starts_

    def members(self, coll: str) -> range:
        """The indexes of a collection's entries (in file order)."""
        first, last = self._range.get(coll, (0, 0))
        return range(first, last)

    def positions(self, keys: Iterable[str]) -> list[int]:
        """Indexes of the entries whose key is one of ``keys`` (any collection)."""
        want = set(keys)
        if not want:
            return []
        if self._cols is None:
            return [i for i, e in enumerate(self.entries) if e.key in want]
        if self._where is None:  # per collection: key -> index (the columns' keys are unique in one)
            self._where = {c: dict(zip(self._cols.keys[f:t], range(f, t), strict=True))
                           for c, (f, t) in self._range.items()}
        return sorted(i for where in self._where.values() for k in want if (i := where.get(k)) is not None)

    def collection_digest(self, coll: str, texts: Mapping[int, str | None],
                          split: int | None = None) -> list[tuple[int, str]]:
        """[(entries, SHA-256 hex)] of a collection's entries joined as ``json.dump`` and
        ``splice`` join them (``", "``): each entry's bytes as the file holds them, but entry
        ``i`` in ``texts`` given as ``texts[i]``, or left out where that is None. A file
        ``splice`` wrote hashes the same wherever the entries not in ``texts`` kept their bytes
        and their order. The bytes between the entries in ``texts`` are hashed as runs (no
        per-entry work). With ``split``, the first ``split`` entries and the rest (if any) are
        two digests: the entries appended since a digest of ``split`` entries do not change it."""
        span = self.members(coll)
        units: list[tuple[int, int, str | None]] = []
        pos = span.start
        for i in [*sorted(k for k in texts if k in span), span.stop]:
            if pos < i:
                units.append((pos, i, None))
            text = texts.get(i) if i < span.stop else None
            if text is not None:
                units.append((i, i + 1, text))
            pos = i + 1
        out: list[tuple[int, str]] = []
        h, n, sep = stream_hash(), 0, False
        for a, b, text in units:
            while a < b:
                if split is not None and not out and n == split:
                    out.append((n, h.hexdigest()))
                    h, n, sep = stream_hash(), 0, False
                cut = b if split is None or out or text is not None else min(b, a + split - n)
                if sep:
                    h.update(b", ")
                if text is not None:
                    h.update(text.encode("utf-8"))
                else:
                    self._hash(h, self.bounds(a)[0], self.bounds(cut - 1)[1])
                n, sep, a = n + cut - a, True, cut
        return [*out, (n, h.hexdigest())]

    def _hash(self, h: Any, start: int, end: int) -> None:
        """Feed the file's text ``[start, end)`` to ``h`` as UTF-8."""
        if self.data is not None:
            h.update(memoryview(self.data)[start:end])
            return
        for a in range(start, end, _HASH_CHUNK):
            h.update(self.text[a:min(end, a + _HASH_CHUNK)].encode("utf-8"))

    def typed(self, coll: str, kind: Any) -> list[Any] | None:
        """The values of an object collection decoded at C speed as ``kind`` (a ``msgspec``
        type: the fields a caller reads, the rest skipped), in file order; None where the file
        is not indexed as columns or a value does not fit ``kind``."""
        if self._cols is None or coll not in self.spans:
            return None
        a, b = self.spans[coll]
        assert self.data is not None
        try:
            return list(msgspec.json.decode(memoryview(self.data)[a:b], type=dict[str, kind]).values())
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None

    def value(self, e: Entry) -> Any:
        """The entry's value, decoded now if it was left ``LAZY``."""
        return json.loads(self.slice(e.vstart, e.end)) if e.value is LAZY else e.value

    def raw(self, e: Entry) -> str:
        """The entry's text as the file holds it (key and value)."""
        return self.slice(e.start, e.end)

    def slice(self, a: int, b: int) -> str:
        """The file's text ``[a, b)`` (from its bytes where the text was never decoded)."""
        if self._text is None and self.data is not None:
            return self.data[a:b].decode("ascii")
        return self.text[a:b]

    def hit(self, forms: Sequence[str]) -> set[int]:
        """Indexes of the entries whose span holds one of ``forms``. A form with a character no
        number array holds is looked for outside the ``LAZY`` arrays only (in the text the
        others leave: the keys, the decoded values); any other, in the whole text. Indexed as
        columns (ASCII): every form in the file's bytes, one pass for all (``occurrences``)."""
        if self._cols is not None:
            key = ("hit", *forms)
            if key not in self.memo:  # the file's bytes do not change under an index
                assert self.data is not None
                offs = np.array(occurrences(self.data, [f.encode("utf-8") for f in forms if f]), np.int64)
                at = np.searchsorted(self._cols.start, offs, side="right") - 1
                ok = (at >= 0) & (offs < self._cols.end[np.maximum(at, 0)])
                self.memo[key] = frozenset(int(i) for i in at[ok])
            return set(self.memo[key])
        out: set[int] = set()
        inside = [f for f in forms if set(f) <= _NUMBER_CHARS]
        for off in find_all(self.text, inside):
            self._add(out, off)
        outside = [f for f in forms if not set(f) <= _NUMBER_CHARS]
        if outside:
            text, offsets, starts = self._outside()
            for off in find_all(text, outside):
                k = bisect.bisect_right(offsets, off) - 1
                self._add(out, starts[k] + off - offsets[k])
        return out

    def hit_in(self, forms: Sequence[str], colls: Iterable[str]) -> set[int] | None:
        """``hit`` within the spans of the object collections ``colls`` only (a byte search of
        those spans: a vector store's owner collections without its embeddings); None where the
        file is not indexed as columns."""
        if self._cols is None or self.data is None:
            return None
        fs = [f.encode("utf-8") for f in forms if f]
        out: set[int] = set()
        for coll in colls:
            if coll not in self.spans or not fs:
                continue
            a, b = self.spans[coll]
            offs = np.array(occurrences(memoryview(self.data)[a:b], fs), np.int64) + a
            at = np.searchsorted(self._cols.start, offs, side="right") - 1
            ok = (at >= 0) & (offs < self._cols.end[np.maximum(at, 0)])
            out.update(int(i) for i in at[ok])
        return out

    def _add(self, out: set[int], off: int) -> None:
        i = bisect.bisect_right(self._starts, off) - 1
        if i >= 0 and off < self.entries[i].end:
            out.add(i)

    def _outside(self) -> tuple[str, list[int], list[int]]:
        """The text without the ``LAZY`` arrays' insides (each ``[`` and ``]`` kept), and per piece
        its offset there and in the file's text."""
        if self._pieces is None:
            cuts = [(e.vstart + 1, e.end - 1) for e in self.entries if e.value is LAZY]
            bounds = [0, *(x for c in cuts for x in c), len(self.text)]
            starts = bounds[0::2]
            pieces = [self.text[a:b] for a, b in zip(bounds[0::2], bounds[1::2], strict=True)]
            offsets = [0]
            for p in pieces[:-1]:
                offsets.append(offsets[-1] + len(p))
            self._pieces = ("".join(pieces), offsets, starts)
        return self._pieces

    def splice(self, changes: Mapping[int, str | None]) -> str:
        """The file's text with entry ``i`` replaced by ``changes[i]`` (its ``"key": value``
        text) or removed (None). A collection with a change is written again: its runs of
        unchanged entries as the file holds them, the changed entries' texts, joined by ``", "``;
        every other byte stays as it was. A change to an entry of a collection that is no
        object is ignored (such a collection holds no record to change)."""
        return self.spliced(changes)[0]

    def splice_parts(self, changes: Mapping[int, str | None]) -> list[bytes | memoryview]:
        """``splice``'s text as the pieces of bytes it joins, made from the file's bytes without
        copying them (a file indexed as columns: ASCII, its text never decoded); a changed
        entry's text must be ASCII and start with its key as the file holds it."""
        assert self.data is not None and self._cols is not None
        touched = sorted({self.coll_of(i) for i in changes if self.coll_of(i) in self.spans},
                         key=lambda c: self.spans[c][0])
        data = memoryview(self.data)
        parts: list[bytes | memoryview] = []
        pos = 0
        for coll in touched:
            start, end = self.spans[coll]
            parts.append(data[pos:start + 1])
            kept: list[bytes | memoryview] = []
            span = self.members(coll)
            run = span.start
            for i in [*sorted(k for k in changes if k in span), span.stop]:
                if run < i:
                    kept.append(data[self.bounds(run)[0]:self.bounds(i - 1)[1]])
                text = changes.get(i) if i < span.stop else None
                if text is not None:
                    a = self.bounds(i)[0]
                    head = self.data[a:a + len(self._cols.keys[i]) + 4]
                    if not text.isascii() or text.encode("ascii")[:len(head)] != head:
                        raise ValueError(f"a changed entry's text must start with its key as the file holds it "
                                         f"and be ASCII: {self.key(i)!r}")
                    kept.append(text.encode("ascii"))
                run = i + 1
            for k, piece in enumerate(kept):
                parts += [b", ", piece] if k else [piece]
            parts.append(b"}")
            pos = end
        parts.append(data[pos:])
        return parts

    def spliced_index(self, path: Path, data: bytes, changes: Mapping[int, str | None]) -> JsonIndex:
        """The index of ``splice_parts``' file, whose bytes are ``data``, made from this one's
        columns (the kept entries shifted, a changed entry's value length from its new text):
        no decode."""
        assert self._cols is not None
        cols = self._cols.spliced({i: t for i, t in changes.items() if self.coll_of(i) in self.spans})
        ix = type(self).__new__(type(self))
        ranges = {c: (f, t) for c, f, t in zip(cols.colls, cols.first, [*cols.first[1:], len(cols.keys)], strict=True)
                  if t > f}
        ix._set(path, None, data, None, cols.spans, ranges, self.standard)
        ix._cols = cols
        return ix

    def spliced(self, changes: Mapping[int, str | None]) -> tuple[str, list[Entry], dict[str, tuple[int, int]],
                                                                 dict[str, tuple[int, int]]]:
        """``splice``'s text, with its entries, collection spans and entry ranges made from this
        index's (shifted, a changed entry's value decoded from its new text): the new file's index
        without parsing it. A changed entry's text starts with its key as the file holds it."""
        touched = sorted({self.entries[i].coll for i in changes if self.entries[i].coll in self.spans},
                         key=lambda c: self.spans[c][0])
        parts: list[str] = []
        entries: list[Entry] = []
        spans: dict[str, tuple[int, int]] = {}
        pos = delta = done = 0  # old offset copied up to; new minus old offset there; entries placed
        for coll in touched:
            start, end = self.spans[coll]
            done = self._copy(parts, entries, spans, pos, start, delta, done)
            cursor = start + delta + 1
            parts.append("{")
            span = self.members(coll)
            cursor = self._rebuild(parts, entries, coll, span, changes, cursor)
            parts.append("}")
            spans[coll] = (start + delta, cursor + 1)
            delta, pos, done = cursor + 1 - end, end, max(done, span.stop)
        self._copy(parts, entries, spans, pos, len(self.text), delta, done)
        ranges: dict[str, tuple[int, int]] = {}
        n = 0
        for coll, (first, last) in sorted(self._range.items(), key=lambda kv: kv[1]):
            kept = last - first - sum(1 for i in changes if first <= i < last and changes[i] is None
                                      and coll in self.spans)
            if kept:
                ranges[coll] = (n, n + kept)
            n += kept
        return "".join(parts), entries, spans, ranges

    def _copy(self, parts: list[str], entries: list[Entry], spans: dict[str, tuple[int, int]], a: int, b: int,
              delta: int, done: int) -> int:
        """Copy the text ``[a, b)``, its entries and collection spans shifted by ``delta``; returns
        the index of the first entry past ``b``."""
        parts.append(self.text[a:b])
        i = done
        while i < len(self.entries) and self.entries[i].start < b:
            e = self.entries[i]
            entries.append(Entry(e.coll, e.key, e.start + delta, e.vstart + delta, e.end + delta, e.value))
            i += 1
        spans.update({c: (s + delta, t + delta) for c, (s, t) in self.spans.items() if a <= s and t <= b})
        return i

    def _rebuild(self, parts: list[str], entries: list[Entry], coll: str, span: range,
                 changes: Mapping[int, str | None], cursor: int) -> int:
        """A changed collection's entries written from ``cursor`` (past its ``{``): the runs of
        unchanged entries as the file holds them, the changed texts, joined by ``", "``; returns
        the offset of its ``}``."""
        pos, sep = span.start, False
        for i in [*sorted(k for k in changes if k in span), span.stop]:
            pieces: list[tuple[int, str | None]] = [(pos, None)] if pos < i else []
            text = changes.get(i) if i < span.stop else None
            pieces += [(i, text)] if text is not None else []
            for at, piece in pieces:
                if sep:
                    parts.append(", ")
                    cursor += 2
                if piece is None:  # the run of unchanged entries [at, i)
                    a, b = self.entries[at].start, self.entries[i - 1].end
                    parts.append(self.text[a:b])
                    for e in self.entries[at:i]:
                        d = cursor - a
                        entries.append(Entry(e.coll, e.key, e.start + d, e.vstart + d, e.end + d, e.value))
                    cursor += b - a
                else:
                    e = self.entries[at]
                    head = e.vstart - e.start
                    if piece[:head] != self.text[e.start:e.vstart]:
                        raise ValueError(f"a changed entry's text must start with its key as the file holds it: {e.key!r}")
                    parts.append(piece)
                    entries.append(Entry(e.coll, e.key, cursor, cursor + head, cursor + len(piece),
                                         _value(piece, head)[0]))
                    cursor += len(piece)
                sep = True
            pos = i + 1
        return cursor

    @classmethod
    def of_text(cls, path: Path, data: bytes, text: str, entries: list[Entry], spans: dict[str, tuple[int, int]],
                ranges: dict[str, tuple[int, int]], standard: bool) -> JsonIndex:
        """The index of a file whose bytes are ``data`` (its text ``text``), made from what is
        already known of it (``spliced``): no parse."""
        ix = cls.__new__(cls)
        ix._set(path, text, data, entries, spans, ranges, standard)
        return ix
