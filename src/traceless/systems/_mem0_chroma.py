"""chroma's HNSW segment after a mem0 erasure (issue 38.1).

Past a collection's ``sync_threshold`` (1,000 writes by default) chroma persists its vectors
to the collection's HNSW segment, ``<path>/<segment id>/data_level0.bin``: each vector's
float32 bytes as written (``l2``, ``ip``; mem0 creates ``l2``) or L2-normalised (``cosine``).
Its own ``delete`` only marks a vector deleted, keeping its floats; ``delete_collection``
leaves the segment directory on disk (chromadb 1.5.9, measured). The floats hold no byte of
the text, but embedding inversion recovers text from them, so the erasure:

1. reads the erased records' vectors through chroma's own API before mem0 deletes them
   (``erased_vectors``);
2. after mem0's deletion, rebuilds every collection it erased from (``rebuild``): every
   remaining record (id, vector, metadata, document, uri) copied into a new collection
   ``<name>.traceless-rebuild`` of the same configuration, schema and metadata, the old
   collection deleted and its segment directories removed, the new one renamed to the old
   name. A kill at any step leaves the old collection whole or the new one complete
   (``finish`` completes it on the re-run, before mem0 opens the collection);
3. zeroes the bytes of every HNSW segment that hold no index data (``scrub_segments``):
   chroma's hnswlib writes ``length.bin`` whole from memory it never initialised (``malloc``)
   and fills only for ``cosine`` (each vector's norm), so the file holds whatever the writing
   process's heap held before: pointers, and text of the records it handled (measured: an
   erased user's canary six times in a rebuilt segment's ``length.bin``, one CI run in two);
   ``l2``/``ip``: the whole file, ``cosine``: past its last element; ``data_level0.bin`` past
   its last element. What chroma reads stays the same (checked: ``get``, ``query``);
4. checks every file of the instance for each erased vector, raw and normalised as chroma's
   hnswlib normalises (``surviving``): ``clear`` only when none is left.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceless.forget import scan_bytes
from traceless.systems import StoreOutcome

__all__ = ["REBUILD_SUFFIX", "ChromaErasure", "chroma_file_vectors", "chroma_log_vectors", "collection_spaces",
           "erased_vectors", "finish", "rebuild", "scrub_segments", "surviving", "vector_forms"]

REBUILD_SUFFIX = ".traceless-rebuild"
"""The name of a collection being rebuilt is its own plus this (chroma allows ``.`` and ``-``)."""
_SEGMENT_FILES = frozenset({"header.bin", "data_level0.bin", "length.bin", "link_lists.bin",
                            "index_metadata.pickle"})
"""What chroma's local HNSW segment directory holds; a directory with anything else is not removed."""


@dataclass
class ChromaErasure:
    """The vector part of one erasure on a chroma instance: ``before`` mem0's deletion,
    ``rebuild`` after it, ``verify`` once every file is in its final state."""

    path: Path
    """The chroma ``PersistentClient`` path."""
    erased: dict[str, tuple[str, set[str]]]
    """Per store (``vector_store``, ``entity_store``): its collection and the ids erased from it."""
    vectors: dict[str, set[bytes]] = field(default_factory=dict)
    """Per erased id, its vectors' byte forms (``vector_forms``: raw, normalised), read before the
    deletion from chroma's API and from its log (an update's earlier vector is there too)."""
    gone: set[str] = field(default_factory=set)
    """Erased ids of which no vector could be read (an earlier, interrupted run deleted them)."""
    spaces: dict[str, str] = field(default_factory=dict)
    """Per collection of the instance, its HNSW distance (``l2``, ``ip``, ``cosine``), read before
    the deletion (``scrub_segments`` keeps a ``cosine`` segment's norms)."""
    notes: list[str] = field(default_factory=list)

    def before(self) -> None:
        self.notes += [f"chroma: {n}" for n in finish(self.path, [c for c, _ in self.erased.values()])]
        self.spaces = collection_spaces(self.path)
        api = erased_vectors(self.path, {c: ids for c, ids in self.erased.values()})
        wanted = {i for _, ids in self.erased.values() for i in ids}
        for i, vecs in [*api.items(), *_log_vectors(self.path, wanted).items()]:
            self.vectors.setdefault(i, set()).update(f for pair in vector_forms(vecs) for f in pair)
        self.gone = wanted - set(self.vectors)

    def rebuild(self, files: Sequence[Path]) -> None:
        """Rebuild the collections erased from when a segment file still holds an erased vector
        (or some could not be read): below the sync threshold chroma has written none there, and
        the log entries the caller removed were their only copies. Then, rebuilt or not, zero
        what every segment holds beyond its index (``scrub_segments``)."""
        held = [f for f in surviving(files, self.vectors) if self.path in Path(f).parents
                and Path(f).parent != self.path]
        if not held and not self.gone:
            self.notes.append("chroma: no segment file holds an erased vector (they were in its log only): "
                              "no rebuild needed")
        else:
            self._rebuild()
        zeroed, segments = scrub_segments(self.path, self.spaces)
        if zeroed:
            self.notes.append(f"chroma: {zeroed} bytes of uninitialised memory hnswlib had written into {segments} "
                              "HNSW segment files zeroed (length.bin, and data_level0.bin past its last element)")

    def _rebuild(self) -> None:
        t0 = time.monotonic()
        kept = rebuild(self.path, [c for c, ids in self.erased.values() if ids])
        with closing(sqlite3.connect(self.path / "chroma.sqlite3")) as con:
            con.execute("VACUUM")  # the deleted collection's rows
        took = time.monotonic() - t0
        self.notes += [f"chroma: the HNSW segment of {c} rebuilt from its {n} remaining records in {took:.2f} s "
                       "(the old segment directory removed, chroma.sqlite3 VACUUMed)" for c, n in kept.items()]

    def verify(self, files: Sequence[Path], outcomes: Mapping[str, StoreOutcome]) -> None:
        """Each store's erased vectors looked for in every file: ``clear`` stays possible only
        when none is found and every one could be read."""
        left = surviving(files, self.vectors)
        for store, (_, ids) in self.erased.items():
            if not ids or store not in outcomes:
                continue
            o = outcomes[store]
            o.notes += self.notes if store == "vector_store" else []
            where = {f: n for f, per in left.items() if (n := sum(i in ids for i in per))}
            found, gone = len({i for per in left.values() for i in per if i in ids}), len(ids & self.gone)
            o.notes.append(f"chroma: {found} of the {len(ids)} erased vectors (float32, raw or L2-normalised) in "
                           f"the instance's {len(files)} files" + "".join(
                               f"; {n} in {_shown(f, self.path)}" for f, n in sorted(where.items())))
            if gone:
                o.notes.append(f"chroma: no vector of {gone} of them could be read (an interrupted erasure deleted "
                               "them): the files were not checked for those")
            if found or gone:
                o.ceiling = "logical"


def _shown(f: str, root: Path) -> str:
    try:
        return str(Path(f).relative_to(root))
    except ValueError:
        return Path(f).name


@contextmanager
def _client(path: Path) -> Iterator[Any]:
    """chroma's client on ``path`` with mem0's own settings (one process may hold one chroma
    system per path, of one set of settings), closed after use."""
    import chromadb
    from chromadb.config import Settings

    client: Any = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    try:
        yield client
    finally:
        client.close()


def vector_forms(vectors: Sequence[Any]) -> list[tuple[bytes, bytes]]:
    """Each vector's (a sequence of floats, or its float32 bytes) float32 little-endian bytes, raw and L2-normalised as hnswlib does it for
    ``cosine`` (the squares summed in float32 in order, ``1 / (sqrt(sum) + 1e-30)``, each
    component multiplied in float32): the bytes chroma writes, bit for bit (checked on 1.5.9)."""
    import numpy as np

    rows = [np.frombuffer(x, dtype="<f4") if isinstance(x, bytes) else x for x in vectors]
    v = np.asarray(rows, dtype="<f4").reshape(len(rows), -1)
    total = np.cumsum(v * v, axis=1, dtype=np.float32)[:, -1:]  # cumsum: the order of hnswlib's loop
    scale = np.float32(1.0) / (np.sqrt(total, dtype=np.float32) + np.float32(1e-30))
    normed = (v * scale).astype("<f4")
    return [(r.tobytes(), n.tobytes()) for r, n in zip(v, normed, strict=True)]


def erased_vectors(path: Path, ids: Mapping[str, set[str]]) -> dict[str, list[Any]]:
    """Before the deletion: ``{collection: ids}``'s vectors through chroma's own
    ``get(ids, include=['embeddings'])``; an id chroma no longer has is left out."""
    out: dict[str, list[Any]] = {}
    with _client(path) as client:
        names = {c.name for c in client.list_collections()}
        for name, want in ids.items():
            if not want or name not in names:
                continue
            col = client.get_collection(name, embedding_function=None)
            for chunk in _chunks(sorted(want), client.get_max_batch_size()):
                got = col.get(ids=chunk, include=["embeddings"])
                for i, e in zip(got["ids"], got["embeddings"] if got["ids"] else [], strict=True):
                    out.setdefault(i, []).append(e)
    return out


def _log_vectors(path: Path, ids: set[str]) -> dict[str, list[bytes]]:
    """The float32 vectors chroma's log (``embeddings_queue``) keeps for ``ids``: every entry
    not yet flushed, an earlier version's included."""
    out: dict[str, list[bytes]] = {}
    want = sorted(ids)
    with closing(sqlite3.connect(f"{(path / 'chroma.sqlite3').resolve().as_uri()}?mode=ro", uri=True)) as con:
        for k in range(0, len(want), 500):
            chunk = want[k:k + 500]
            for i, blob in con.execute(
                    "SELECT id, vector FROM embeddings_queue WHERE vector IS NOT NULL AND encoding = 'FLOAT32' "
                    f"AND id IN ({','.join('?' * len(chunk))})", chunk):  # noqa: S608 - placeholders only
                out.setdefault(str(i), []).append(bytes(blob))
    return out


def finish(path: Path, names: Iterable[str]) -> list[str]:
    """Complete a rebuild a kill interrupted: a finished copy whose original is gone takes its
    name; a copy beside its original (possibly partial) is dropped (the rebuild redoes it)."""
    notes: list[str] = []
    with _client(path) as client:
        have = {c.name for c in client.list_collections()}
        for name in names:
            if name + REBUILD_SUFFIX not in have:
                continue
            if name in have:
                client.delete_collection(name + REBUILD_SUFFIX)
                notes.append(f"an interrupted rebuild's partial copy of {name} dropped")
            else:
                client.get_collection(name + REBUILD_SUFFIX, embedding_function=None).modify(name=name)
                notes.append(f"an interrupted rebuild of {name} completed (its copy renamed)")
    if n := _drop_orphan_segments(path):
        notes.append(f"{n} segment directories no collection refers to removed (left by a deleted collection)")
    return notes


def rebuild(path: Path, names: Iterable[str]) -> dict[str, int]:
    """Rewrite each collection's HNSW segment from its remaining records (module docstring);
    returns the records each one kept. The old segment directories are removed after the
    client is closed (chroma keeps them open until then)."""
    kept: dict[str, int] = {}
    with _client(path) as client:
        have = {c.name for c in client.list_collections()}
        batch = client.get_max_batch_size()
        for name in names:
            if name in have:
                kept[name] = _copy_collection(client, name, batch)
    _drop_orphan_segments(path)
    return kept


def _copy_collection(client: Any, name: str, batch: int) -> int:
    old = client.get_collection(name, embedding_function=None)
    # its schema carries the configuration; legacy ``hnsw:*`` metadata is configuration too, and
    # chroma refuses it beside a schema: then the configuration is given instead
    legacy = any(str(k).startswith("hnsw:") for k in old.metadata or {})
    how = {"configuration": old.configuration} if legacy else {"schema": _schema_of(old)}
    new = client.create_collection(name + REBUILD_SUFFIX, metadata=old.metadata or None, embedding_function=None,
                                   **how)
    got = client.get_collection(new.name, embedding_function=None).configuration
    if _comparable(got) != _comparable(old.configuration):
        client.delete_collection(new.name)
        raise RuntimeError(f"chroma: a copy of {name} would not keep its configuration ({old.configuration} became "
                           f"{got}); nothing was rebuilt, the erased vectors stay in its segment")
    ids = old.get(include=[])["ids"]
    for chunk in _chunks(ids, batch):
        got = old.get(ids=chunk, include=["embeddings", "metadatas", "documents", "uris"])
        new.add(ids=got["ids"], embeddings=got["embeddings"], metadatas=_none_if_empty(got["metadatas"]),
                documents=_none_if_empty(got["documents"]), uris=_none_if_empty(got["uris"]))
    if new.count() != len(ids):
        raise RuntimeError(f"chroma: the rebuilt copy of {name} holds {new.count()} of its {len(ids)} records; "
                           "the original is kept: run the erasure again")
    client.delete_collection(name)
    new.modify(name=name)
    return len(ids)


def _comparable(config: Mapping[str, Any]) -> dict[str, Any]:
    """A collection's configuration with its embedding function by name (the client builds a
    new object of it on every read)."""
    ef = config.get("embedding_function")
    return {**config, "embedding_function": None if ef is None else ef.name()}


def _schema_of(col: Any) -> Any:
    """The collection's schema as chroma's client reads it, except that a vector index with no
    embedding function of its own (mem0 passes none) keeps none: the client reads it as
    chroma's default one, which a copy would then store."""
    schema = col.schema
    if col.configuration.get("embedding_function") is None:
        for vt in [schema.defaults, *schema.keys.values()]:
            cfg = getattr(getattr(getattr(vt, "float_list", None), "vector_index", None), "config", None)
            if cfg is not None:
                cfg.embedding_function = None
    return schema


def _none_if_empty(values: Sequence[Any] | None) -> list[Any] | None:
    """chroma refuses a list of only ``None`` for a field no record has (uris, documents)."""
    return None if values is None or all(v is None for v in values) else list(values)


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield list(items[i:i + size])


def _drop_orphan_segments(path: Path) -> int:
    """Remove the segment directories no segment of chroma's catalogue names (what
    ``delete_collection`` leaves behind, with every vector the collection had); how many."""
    with closing(sqlite3.connect(f"{(path / 'chroma.sqlite3').resolve().as_uri()}?mode=ro", uri=True)) as con:
        live = {str(r[0]) for r in con.execute("SELECT id FROM segments")}
    dropped = 0
    for d in path.iterdir():
        if d.is_dir() and d.name not in live and _is_uuid(d.name) and all(
                p.is_file() and p.name in _SEGMENT_FILES for p in d.iterdir()):
            shutil.rmtree(d)
            dropped += 1
    return dropped


def _is_uuid(name: str) -> bool:
    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False


def surviving(files: Iterable[Path], vectors: Mapping[str, Iterable[bytes]]) -> dict[str, dict[str, int]]:
    """``{file: {id: copies}}`` of the erased vectors (any of each one's byte forms) still in
    ``files``."""
    forms = {i: sorted(set(v)) for i, v in vectors.items()}
    needles = [f for fs in forms.values() for f in fs]
    if not needles:
        return {}
    out: dict[str, dict[str, int]] = {}
    for f, counts in scan_bytes(files, needles).items():
        per, k = {}, 0
        for i, fs in forms.items():
            per[i], k = sum(counts[k:k + len(fs)]), k + len(fs)
        if any(per.values()):
            out[f] = {i: n for i, n in per.items() if n}
    return out


def collection_spaces(path: Path) -> dict[str, str]:
    """Every collection's HNSW distance through chroma's API (``cosine`` where its configuration
    names none: the reading that keeps the most of a segment)."""
    with _client(path) as client:
        out: dict[str, str] = {}
        for c in client.list_collections():
            hnsw = (client.get_collection(c.name, embedding_function=None).configuration or {}).get("hnsw") or {}
            out[c.name] = str(hnsw.get("space") or "cosine")
        return out


def scrub_segments(path: Path, spaces: Mapping[str, str]) -> tuple[int, int]:
    """Zero what the HNSW segments of the collections in ``spaces`` hold beyond their index
    (module docstring, step 3); (nonzero bytes zeroed, files changed). A segment whose header
    is not hnswlib's layout as ``chroma_file_vectors`` reads it is left as it is."""
    db = path / "chroma.sqlite3"
    if not db.is_file():
        return 0, 0
    with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as con:
        rows = con.execute("SELECT s.id, c.name FROM segments s JOIN collections c ON c.id = s.collection "
                           "WHERE s.scope = 'VECTOR'").fetchall()
    zeroed = files = 0
    for sid, name in rows:
        d = path / str(sid)
        layout = _segment_layout(d / "header.bin") if str(name) in spaces else None
        if layout is None:
            continue
        count, size, _, _ = layout
        lengths_kept = count * 4 if spaces[str(name)] == "cosine" else 0  # cosine: each vector's norm
        for f, start in ((d / "data_level0.bin", count * size), (d / "length.bin", lengths_kept)):
            n = _zero_from(f, start)
            zeroed, files = zeroed + n, files + bool(n)
    return zeroed, files


def _segment_layout(header: Path) -> tuple[int, int, int, int] | None:
    """(``cur_element_count``, ``size_data_per_element``, ``label_offset``, ``offsetData``) from
    an HNSW segment's ``header.bin`` (a format version, then hnswlib's ``offsetLevel0``,
    ``max_elements`` and these); None when the file is missing or not that layout."""
    h = header.read_bytes() if header.is_file() else b""
    if len(h) < 52:
        return None
    _, _, _, count, size, label_off, data_off = struct.unpack_from("<I6Q", h, 0)
    return (count, size, label_off, data_off) if 0 < data_off < label_off <= size else None


def _zero_from(f: Path, start: int) -> int:
    """Zero ``f`` from byte ``start`` to its end, in place; how many of those bytes were not zero."""
    if not f.is_file() or f.stat().st_size <= start:
        return 0
    with open(f, "r+b") as fh:
        fh.seek(start)
        tail = fh.read()
        nonzero = len(tail) - tail.count(0)
        if nonzero:
            fh.seek(start)
            fh.write(bytes(len(tail)))
            fh.flush()
            os.fsync(fh.fileno())
    return nonzero


def chroma_file_vectors(path: Path) -> Any:
    """Every vector chroma's HNSW segments under ``path`` hold in their files, read from the
    bytes (``header.bin``: a format version, then hnswlib's ``offsetLevel0``, ``max_elements``,
    ``cur_element_count``, ``size_data_per_element``, ``label_offset``, ``offsetData``;
    ``data_level0.bin``: each element's links, its float32 vector, its label), deleted ones
    included: what anyone with the folder reads, whatever the API says. One float32 array
    (rows: vectors of one dimension; segments of another dimension are left out)."""
    import numpy as np

    rows: list[Any] = []
    for header in sorted(Path(path).rglob("header.bin")):
        data = header.with_name("data_level0.bin")
        layout = _segment_layout(header)
        if layout is None or not data.is_file():
            continue
        n, size, label_off, data_off = layout
        raw = data.read_bytes()
        if n * size > len(raw):
            continue  # not hnswlib's layout as this reader knows it: nothing read rather than garbage
        arr = np.frombuffer(raw[: n * size], dtype=np.uint8).reshape(n, size)
        rows.append(arr[:, data_off:label_off].copy().view("<f4"))
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    dim = rows[0].shape[1]
    return np.concatenate([r for r in rows if r.shape[1] == dim])


def chroma_log_vectors(path: Path) -> Any:
    """Every float32 vector chroma's write-ahead log (``embeddings_queue`` in
    ``chroma.sqlite3``) under ``path`` holds: each add, update and upsert not yet purged, of
    records its own ``delete`` removed included (a delete appends an entry; the add stays in
    the log until the HNSW segment is persisted, past ``sync_threshold`` writes). Read from the
    file read-only; one float32 array (rows of the first dimension met; others left out)."""
    import numpy as np

    db = Path(path) / "chroma.sqlite3"
    rows: list[Any] = []
    if db.is_file():
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as con:
            if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'embeddings_queue'").fetchone():
                rows = [np.frombuffer(bytes(b), dtype="<f4") for (b,) in con.execute(
                    "SELECT vector FROM embeddings_queue WHERE vector IS NOT NULL AND encoding = 'FLOAT32' "
                    "ORDER BY seq_id")]
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    dim = len(rows[0])
    return np.stack([r for r in rows if len(r) == dim]).astype(np.float32)
