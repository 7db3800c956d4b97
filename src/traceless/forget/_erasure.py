"""Physical-erasure checks: scan the raw bytes of every file a store wrote."""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from io import BufferedReader
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ahocorasick_rs import MATCHKIND_LEFTMOST_FIRST, MATCHKIND_STANDARD, BytesAhoCorasick, Implementation

if TYPE_CHECKING:
    import numpy as np

__all__ = ["encodings_of", "occurrences", "scan_bytes", "scan_files"]

_CHUNK = 1 << 24
_WORKERS = min(4, os.cpu_count() or 1)
"""Threads the many-forms search runs chunks on (``_many_counts``)."""
_MANY_CHUNK = 1 << 22
"""Bytes of a file per chunk of the many-forms search (4 MB: 4.1 s over 1.2 GB on two threads,
16 MB 5.2 s: the last chunk's search waits alone less)."""
_BATCH = 64
"""Forms per gate automaton: Aho–Corasick with up to 64 patterns runs the SIMD prefilter
(Teddy) at ~5 GB/s here; at 65 patterns it falls back to the automaton at ~0.45 GB/s (measured
on a 100 MB qdrant ``storage.sqlite``: 64 → 5.1 GB/s, 65 → 0.48, 128 → 0.15). So more forms
(an erasure's vectors: hundreds of 1536-byte needles) are searched in batches of 64."""
_DFA_BYTES = 1 << 14
"""Pattern bytes up to which a batch's automata are DFAs (twice as fast as the contiguous NFA on
the exact pass: 0.74 against 1.33 s for 30 literal forms over 419 MB). Past it the NFA: a DFA
over 50 vectors of 1536 mostly-zero bytes took 8.8 s to build."""
_SLICE = 1 << 18
"""Bytes the gate searches per call: it returns every match as a list, so this bounds it."""
_CROWDED = 1 << 12
"""Gate matches in one slice past which a batch is counted per form in the chunk instead (a
form's head that most of the bytes hold, e.g. a vector of zeros in a zero-filled file)."""
_PLAN_FROM = 1 << 24
"""Bytes a file's first chunk must hold for its forms' gates to be planned (``_plan``): below it
the forms' heads are the gate (planning, some 20–50 ms, would cost more than a slow gate)."""
_SAMPLE = 1 << 18
"""Bytes at the start of each file whose 3-byte sequences are counted (``_rarity``) to choose
where in each form its gate window starts (``_window``)."""
_WINDOW = 32
"""The most bytes of a form its gate window holds."""
_BINS = 1 << 18
"""Hash bins of the 3-byte sequences ``_rarity`` counts (2 MB of counts: a forget of a 6 MB record
must peak under 4 times its size, ``test_trust3_crypto``)."""


def _json_escaped(literal: str, upper: bool) -> bytes:
    out = []
    for c in literal:
        if ord(c) < 128:
            out.append(json.dumps(c)[1:-1])
        else:
            units = c.encode("utf-16-be")
            for i in range(0, len(units), 2):
                h = units[i : i + 2].hex()
                out.append("\\u" + (h.upper() if upper else h))
    return "".join(out).encode("ascii")


def encodings_of(literal: str) -> list[bytes]:
    """The byte forms a literal can take on disk: UTF-8, UTF-16LE, UTF-16BE, and (for a
    non-ASCII literal) JSON's ``\\uXXXX`` escapes in lower and upper hex."""
    forms = [literal.encode("utf-8"), literal.encode("utf-16-le"), literal.encode("utf-16-be")]
    if any(ord(c) >= 128 for c in literal):
        forms += [_json_escaped(literal, False), _json_escaped(literal, True)]
    return list(dict.fromkeys(forms))


def scan_files(files: Iterable[Path], literal: str | Sequence[str]) -> dict[str, int]:
    """Occurrences of ``literal``'s bytes (any encoding above) per file; given several
    literals, the sum of their occurrences, each file read once (not once per literal)."""
    forms = [f for lit in ([literal] if isinstance(literal, str) else literal) for f in encodings_of(lit) if f]
    out: dict[str, int] = {}
    for f in files:
        try:
            with open(f, "rb") as fh:
                out[str(f)] = _count(fh, forms)
        except FileNotFoundError:
            continue
    return out


def scan_bytes(files: Iterable[Path], needles: Sequence[bytes]) -> dict[str, list[int]]:
    """Occurrences of each of ``needles`` (raw bytes: a vector's float32 form) per file, in
    the order given; each file read once, in chunks, as ``scan_files``."""
    forms = [n for n in needles if n]
    if len(forms) != len(needles):
        raise ValueError("scan_bytes: an empty needle matches everywhere; give only non-empty byte strings")
    out: dict[str, list[int]] = {}
    for f in files:
        try:
            with open(f, "rb") as fh:
                out[str(f)] = _counts(fh, forms) if forms else []
        except FileNotFoundError:
            continue
    return out


def _count(fh: BufferedReader, forms: list[bytes]) -> int:
    return sum(_counts(fh, forms))


def _trigrams(data: bytes | memoryview) -> np.ndarray:
    """Each 3-byte sequence of ``data`` hashed into ``_BINS`` bins."""
    import numpy as np  # only for a file of ``_PLAN_FROM`` bytes or more (``forget verify`` imports no NumPy)

    a = np.frombuffer(data, dtype=np.uint8).astype(np.uint32)
    return ((a[:-2] * 65599 + a[1:-1]) * 257 + a[2:]) % _BINS


def _rarity(sample: bytes | memoryview) -> np.ndarray:
    """How often each (hashed) 3-byte sequence occurs in ``sample``."""
    import numpy as np

    return np.bincount(_trigrams(sample), minlength=_BINS) if len(sample) >= 3 else np.zeros(_BINS, np.int64)


def _window(form: bytes, rarity: np.ndarray) -> int:
    """Where in ``form`` its gate window starts: the 3 bytes the sample holds least often (the
    SIMD prefilter keys on a pattern's first bytes: a window starting with bytes that most of the
    file holds, such as the texts' common head "u0107 note", checks a candidate at almost every
    byte), a NUL byte never first; the earliest of the rarest."""
    import numpy as np

    if len(form) < 4:
        return 0
    score = rarity[_trigrams(form)].astype(np.float64)
    score[np.frombuffer(form[:-2], dtype=np.uint8) == 0] = np.inf
    return 0 if np.isinf(score.min()) else int(score.argmin())


def _heads(forms: tuple[bytes, ...]) -> tuple[int, ...]:
    """Each distinct form's window at its head, past its leading NULs (a file under
    ``_PLAN_FROM`` bytes; one of the candidates ``_plan`` times)."""
    return tuple(min(len(f) - len(f.lstrip(b"\0")), max(0, len(f) - 1)) for f in dict.fromkeys(forms))


def _gate_windows(forms: tuple[bytes, ...], sample: bytes | memoryview) -> tuple[int, ...]:
    """Each distinct form's gate window start (``_window``), chosen on this sample."""
    rarity = _rarity(sample)
    return tuple(_window(f, rarity) for f in dict.fromkeys(forms))


Gates = list[tuple[BytesAhoCorasick, BytesAhoCorasick, list[list[int]], int, int]]


@functools.lru_cache(maxsize=32)
def _gates(forms: tuple[bytes, ...], starts: tuple[int, ...], size: int) -> Gates:
    """Per batch of up to ``size`` distinct gate windows (each form's window: up to
    ``_WINDOW`` bytes from its start in ``starts``; forms that share a window share it): (the
    gate: leftmost-first over the windows, which the SIMD prefilter runs on; the exact
    automaton over the batch's forms themselves, every overlapping match; per distinct form the
    indexes of ``forms`` it stands for; the latest window start; the longest form). Made once
    per file set and choice of windows."""
    distinct: dict[bytes, list[int]] = {}
    for i, f in enumerate(forms):
        distinct.setdefault(f, []).append(i)
    by_window: dict[bytes, list[tuple[bytes, int]]] = {}
    for f, at in zip(distinct, starts, strict=True):
        by_window.setdefault(f[at:at + _WINDOW], []).append((f, at))
    # sorted: a batch's windows share their first bytes, which the SIMD prefilter keys on (2,006
    # texts' windows batched in the erasure's order took 2.6 s over a 1.2 GB file, sorted 0.73 s)
    windows = sorted(by_window)
    out = []
    for b in range(0, len(windows), size):
        heads = windows[b:b + size]
        batch = [fa for w in heads for fa in by_window[w]]
        kind = Implementation.DFA if sum(len(f) for f, _ in batch) <= _DFA_BYTES else Implementation.ContiguousNFA
        gate = BytesAhoCorasick(heads, matchkind=MATCHKIND_LEFTMOST_FIRST, implementation=kind)
        exact = BytesAhoCorasick([f for f, _ in batch], matchkind=MATCHKIND_STANDARD, implementation=kind)
        out.append((gate, exact, [distinct[f] for f, _ in batch], max(at for _, at in batch),
                    max(len(f) for f, _ in batch)))
    return out


_TRIAL = 1 << 18
"""Bytes of the sample each way of gating is timed on (``_plan``)."""


_PLANS: dict[tuple[bytes, ...], Gates] = {}
"""The last few form sets' gates (``_plan``), oldest first."""


def _plan(forms: tuple[bytes, ...], data: memoryview) -> Gates:
    """The gates a set of forms is searched with, chosen on the first file's first bytes (and
    kept for the next files and scans of the same forms: any choice counts the same). Four
    candidates, the one that searched the sample fastest kept: each form's window at its head
    (``_heads``) or where its 3 bytes are rarest in the sample (``_gate_windows``), and the gates
    in batches of ``_BATCH`` windows (the SIMD prefilter: ~5 GB/s a batch where the windows'
    first bytes rarely occur) or one gate over every window (no prefilter: ~0.45 GB/s, but one
    pass). The prefilter keys on the bytes' nibbles, so rarity in the file is a guess, and the
    timing decides: texts that all start like every other user's ("u0107 note"), or mem0's md5
    ``hash`` in hex among 10^6 other hashes, defeat the heads (0.25 GB/s a batch of 64); short
    canaries' heads ("WQ5-…") beat a rarer window made of digits and dashes. The counts are the
    same either way (the exact automaton decides); only the time differs."""
    if (kept := _PLANS.pop(forms, None)) is None:
        sample = bytes(data[:_SAMPLE])  # the first ``_SAMPLE`` bytes, copied only when a plan is made
        options = {(starts, size) for starts in (_heads(forms), _gate_windows(forms, sample))
                   for size in (_BATCH, len(forms) if len(set(forms)) > _BATCH else _BATCH)}
        kept = min((_gates(forms, st, size) for st, size in sorted(options)), key=lambda g: _took(g, sample[:_TRIAL]))
    _PLANS[forms] = kept
    while len(_PLANS) > 8:
        del _PLANS[next(iter(_PLANS))]
    return kept


def _took(gates: Gates, trial: bytes) -> float:
    """Seconds the gates take over ``trial`` (the fastest of three passes)."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for gate, *_ in gates:
            gate.find_matches_as_indexes(trial)
        best = min(best, time.perf_counter() - t0)
    return best


def _windows(view: memoryview, end: int, gate: BytesAhoCorasick, lead: int, longest: int) -> list[tuple[int, int]] | None:
    """The merged byte ranges of ``view[:end]`` where a form can start, or None when the gate
    matches too often to be worth it (``_CROWDED``). The gate reports, left to right, matches that
    do not overlap; an occurrence of a form holds its window ``lead`` bytes or fewer after its
    start, and a window's occurrence the gate did not report starts inside a reported match, so
    each occurrence lies whole in ``[start - lead, end + longest)`` of one of them. The gate runs over slices of ``_SLICE`` bytes (each extended by ``longest - 1``, so a
    match across a slice's end is whole in it), which bounds the list of matches it returns."""
    ranges: list[tuple[int, int]] = []
    for x in range(0, end, _SLICE):
        y = min(end, x + _SLICE + longest - 1)
        spans = gate.find_matches_as_indexes(view[x:y])
        if len(spans) > _CROWDED:
            return None
        ranges += [(max(0, x + s - lead), min(end, x + e - 1 + longest)) for _, s, e in spans]
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def occurrences(data: bytes | memoryview, forms: Sequence[bytes]) -> list[int]:
    """Where ``forms`` occur in ``data``: the start of every occurrence of each (overlapping
    ones too), in no order, found as the byte scan finds them: the gates planned for the form
    set on the first data given (``_plan``: timed, kept for the next calls with the same
    forms), the exact automaton over the windows around what they report. A caller mapping
    places to records (mem0's points joined in batches) gets the byte scan's speed whatever
    the forms look like: short forms with heads common in the data (``BB0-COCOA-8132`` among
    pickled floats) took one automaton over every byte 5x as long."""
    key = tuple(sorted({f for f in forms if f}))
    if not key or not data:
        return []
    view = memoryview(data)
    try:
        out: list[int] = []
        for gate, exact, _, lead, longest in _plan(key, view):
            windows = _windows(view, len(view), gate, lead, longest)
            for a, b in [(0, len(view))] if windows is None else windows:
                out += [a + s for _, s, _ in exact.find_matches_as_indexes(view[a:b], overlapping=True)]
        return out
    finally:
        view.release()


def _greedy(starts: list[int], size: int, limit: int) -> int:
    """What ``bytes.count`` counts from these starts: non-overlapping, leftmost first, ending by ``limit``."""
    n, free = 0, 0
    for p in sorted(starts):
        if p + size > limit:
            break
        if p >= free:
            n, free = n + 1, p + size
    return n


def _chunk_counts(buf: bytearray, have: int, end: int, forms: tuple[bytes, ...], n: list[int],  # noqa: PLR0913
                  gates: Gates) -> None:
    """Add to ``n`` each form's occurrences in ``buf[:end]`` not inside ``buf[:have]`` (the
    previous chunk's tail, counted with it). One gate pass per batch of forms over the chunk;
    where it reports a match, the exact automaton over the windows around it (``_windows``)
    gives every start of every form, counted as ``bytes.count`` counts them (``_greedy``); a
    crowded chunk (a form's head in most of its bytes) is counted per form by ``bytes.count``."""
    view = memoryview(buf)
    try:
        for gate, exact, owners, lead, longest in gates:
            windows = _windows(view, end, gate, lead, longest)
            if windows is None:
                for idx in owners:
                    got = buf.count(forms[idx[0]], 0, end) - buf.count(forms[idx[0]], 0, have)
                    for i in idx:
                        n[i] += got
                continue
            starts: list[list[int]] = [[] for _ in owners]
            for a, b in windows:
                for k, s, _ in exact.find_matches_as_indexes(view[a:b], overlapping=True):
                    starts[k].append(a + s)
            for k, idx in enumerate(owners):
                if starts[k]:
                    size = len(forms[idx[0]])
                    got = _greedy(starts[k], size, end) - _greedy(starts[k], size, have)
                    for i in idx:
                        n[i] += got
    finally:
        view.release()  # ``buf`` is resized by no one, but written again by the caller


_HS_CROWDED = 1 << 16
"""Matches in one chunk past which the many-forms search (``_many_counts``) gives the file back
to the gated automata (a form most of the bytes hold: each match is a Python call there)."""


@functools.lru_cache(maxsize=8)
def _many(forms: tuple[bytes, ...]) -> Any:
    """One Hyperscan database over ``forms`` (distinct, each as a ``\\xHH`` literal: its pure
    literal API stops at a NUL byte), or None where Hyperscan is not installed or refuses them.
    Past ``_BATCH`` forms the automata run batch after batch (4,010 forms of an erasure's rows
    over a 1.2 GB LanceDB file: 12.2 s); Hyperscan's many-literal matcher runs them in one pass
    (5.0 s, 3.2 s on two threads: it releases the GIL), measured."""
    try:
        import hyperscan
    except ImportError:  # pragma: no cover - a core dependency; an unsupported platform has none
        return None
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    try:
        db.compile(expressions=[b"".join(b"\\x%02x" % c for c in f) for f in forms], ids=list(range(len(forms))),
                   elements=len(forms))
    except hyperscan.error:  # pragma: no cover - a form past Hyperscan's limits
        return None
    return db


class _Crowded(Exception):
    """A chunk matched more than ``_HS_CROWDED`` times."""


def _many_counts(fh: BufferedReader, forms: list[bytes], db: Any) -> list[int]:
    """``_counts`` of many forms (more distinct than ``_BATCH``) by Hyperscan: the file read in
    chunks, each with the previous one's last ``longest - 1`` bytes in front and searched on a
    worker thread (Hyperscan releases the GIL); an occurrence is taken from the chunk it ends in
    past that overlap (so from one chunk only, whole), every start of every form kept, then
    counted as ``bytes.count`` counts (``_greedy``). ``db``: ``_many`` of the distinct forms.
    ``_Crowded`` when a chunk matches too often: the caller searches the file again with the
    automata."""
    import hyperscan

    distinct = list(dict.fromkeys(forms))

    sizes = [len(f) for f in distinct]
    keep = max(sizes) - 1
    local = threading.local()

    def search(chunk: bytes, base: int, fresh: int) -> list[tuple[int, int]]:
        """(form, start) of every occurrence in ``chunk`` (at ``base`` in the file) ending past ``fresh``."""
        if getattr(local, "scratch", None) is None:
            local.scratch = hyperscan.Scratch(db)
        found: list[tuple[int, int]] = []

        def on_match(i: int, _from: int, to: int, _flags: int, _ctx: object) -> bool:
            if to > fresh:
                found.append((i, base + to - sizes[i]))
            return len(found) > _HS_CROWDED

        try:
            db.scan(chunk, match_event_handler=on_match, scratch=local.scratch)
        except hyperscan.ScanTerminated:
            raise _Crowded from None
        return found

    starts: list[list[int]] = [[] for _ in distinct]
    tail, base = b"", 0
    pending: list[Future[list[tuple[int, int]]]] = []
    while got := fh.read(_MANY_CHUNK):
        chunk = tail + got
        pending.append(_pool().submit(search, chunk, base, len(tail)))
        tail = chunk[len(chunk) - min(keep, len(chunk)):] if keep else b""
        base += len(chunk) - len(tail)
        if len(pending) > _WORKERS:
            _collect(pending.pop(0), starts)
    for job in pending:
        _collect(job, starts)
    total = base + len(tail)
    at = {f: k for k, f in enumerate(distinct)}
    return [_greedy(starts[at[f]], len(f), total) for f in forms]


@functools.cache
def _pool() -> ThreadPoolExecutor:
    """The many-forms search's worker threads, made once (a scan of thousands of small files
    would otherwise start a pool per file)."""
    return ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="traceless-scan")


def _collect(job: Future[list[tuple[int, int]]], starts: list[list[int]]) -> None:
    for i, s in job.result():
        starts[i].append(s)


_PIECES = 64
"""Pieces of ``_SPREAD // _PIECES`` bytes, evenly spread over a file, that ``_many_first`` times
on: a LanceDB file is a gigabyte of vectors and a tenth of it texts, where one matcher can be
slower; eight pieces of 32 KB all fell in the vectors and chose the slower (measured)."""
_SPREAD = 1 << 20
"""Bytes of those pieces together (a 256 KB trial, timed in a tenth of a millisecond, chose the
slower matcher while other threads ran: measured in an erasure)."""
_HS_SURE = 0.5
"""Seconds of Hyperscan's search of a whole file, projected from its samples, at or under which
it is taken without timing the automata: planning them costs more than it could save (2,004
erased vectors and texts over a 1.2 GB LanceDB file: the plan 1.05 s, Hyperscan's whole search
0.4 s, measured)."""


def _many_first(fh: BufferedReader, forms: tuple[bytes, ...]) -> bool:
    """Whether a file is searched for ``forms`` by Hyperscan first: timed against the gated automata (planned as ``_plan`` plans them) on ``_PIECES``
    samples spread over the file, for each file of ``_PLAN_FROM`` bytes or more (a few
    milliseconds; a choice kept from one file misled the next: a LanceDB scalar index's pages
    chose for its data file); a smaller file, the automata. Neither always wins (measured over a
    1.2 GB LanceDB file): 2,005 texts that all start "filler " and end " about the weather"
    took the automata on their rarest windows 0.8–1.1 s and Hyperscan 3.5–3.8 s; 4,010 needles
    mixing 8-byte ones among random floats with those texts took the automata 12.2 s (a batch
    holding a window common in the vectors fires at every few bytes) and Hyperscan 5.0 s."""
    try:
        size = os.fstat(fh.fileno()).st_size
    except OSError:  # no file under the reader (io.UnsupportedOperation): the automata
        return False
    db = _many(tuple(dict.fromkeys(forms))) if size >= _PLAN_FROM else None  # no database made for a small file
    if db is None:
        return False
    step = _SPREAD // _PIECES
    trial = b"".join(os.pread(fh.fileno(), step, k * (size - step) // (_PIECES - 1)) for k in range(_PIECES))
    many = _took_many(db, trial)
    if many * size / max(1, len(trial)) <= _HS_SURE:
        return True  # the whole search is quicker than planning the automata to compare with
    return bool(many < _took(_plan(forms, memoryview(trial)), trial))


def _took_many(db: Any, trial: bytes) -> float:
    """Seconds Hyperscan takes over ``trial`` (the fastest of three passes, as ``_took``)."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        db.scan(trial, match_event_handler=lambda *_: None)
        best = min(best, time.perf_counter() - t0)
    return best


def _counts(fh: BufferedReader, forms: list[bytes]) -> list[int]:
    """Occurrences of ``forms`` in a file: by Hyperscan (``_many_counts``) where it searched
    samples faster (``_many_first``; a file of ``_PLAN_FROM`` bytes or more), else (or where it
    gives up) by the gated automata (``_gated_counts``). However few the forms: two float32
    vectors that are mostly zeros took the automata 8.8 s over a 1.2 GB file of such vectors
    (their gate fires everywhere) and Hyperscan 0.6 s, measured."""
    if _many_first(fh, tuple(forms)):
        start = fh.tell()
        try:
            return _many_counts(fh, forms, _many(tuple(dict.fromkeys(forms))))
        except _Crowded:
            fh.seek(start)
    return _gated_counts(fh, forms)


def _gated_counts(fh: BufferedReader, forms: list[bytes]) -> list[int]:
    """Occurrences of ``forms`` in a file read in chunks (a store of 10^6 sessions is a
    1 GB file; not mapped: another connection may truncate the WAL meanwhile). Each chunk is
    searched with the previous one's last bytes in front, so a copy across the boundary is
    found once. One buffer is reused (read into, tail moved to its front): no chunk is copied.

    One pass per chunk for all forms (per 64: ``_BATCH``), not one per form; the counts are
    exactly those of ``bytes.count`` per form (tested)."""
    keep = max(len(f) for f in forms) - 1
    buf = bytearray(keep + _CHUNK)
    view = memoryview(buf)
    n, have = [0] * len(forms), 0  # ``have``: bytes of the previous chunk's tail at the front of ``buf``
    key = tuple(forms)
    gates: Gates | None = None
    while got := fh.readinto(view[have:]):
        end = have + got
        gates = gates or (_plan(key, view) if end >= _PLAN_FROM else _gates(key, _heads(key), _BATCH))
        _chunk_counts(buf, have, end, key, n, gates)
        tail = min(keep, end)
        buf[:tail] = buf[end - tail:end]
        have = tail
    return n
