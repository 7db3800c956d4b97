"""`memory add` stores exactly what it stored before it was made fast (issue #13.5).

A fixed series of writes (S=1/S=2 summaries, embeddings, extractive consolidation, a
second batch that supersedes consolidations, duplicate replace and skip, whole-session raw
units) is compared with ``tests/fixtures/write_golden.json``, which the write pipeline of
commit c27934c (before the batched inserts) produced from the same input: every stored
column but ``created_at``, every lineage edge and the id counters. An encrypted store
must hold the same artifacts once decrypted, and a PostgreSQL store the same rows.

Regenerate the fixture only for an intended change of what is stored:
``python tests/unit/test_write_golden.py > tests/fixtures/write_golden.json``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _forget_helpers import alice_sessions, bob_sessions, canonical_dump, make_summarizer, session  # noqa: E402

from traceless.memory import MemoryStore, MemoryWriter, Session, WriteConfig, _crypto  # noqa: E402
from traceless.models import HashingEmbedder  # noqa: E402

GOLDEN = Path(__file__).parents[1] / "fixtures" / "write_golden.json"


pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _crowd(first: int, n: int) -> list[Session]:
    """Sessions of three users, their turns naming facts the scripted summarizer keys on."""
    topics = ["I walk my dog at dawn", "we met in Lisbon", "green tea again", "piano practice ran late"]
    return [session(f"user{i % 3}", f"c{i}", [f"day {i}: {topics[i % 4]}", f"note {i} about nothing"],
                    neighbors={"2": [0]} if i % 2 else None, date=f"2024/01/{1 + i % 28:02d}")
            for i in range(first, first + n)]


def _writer(store: MemoryStore, **cfg: Any) -> MemoryWriter:
    return MemoryWriter(store, summarizer=make_summarizer(), embedder=HashingEmbedder(16),
                        config=WriteConfig(**{"levels": (1, 2), "extractive": True, **cfg}))


def write_fixed(store: MemoryStore) -> None:
    """The fixed input: four writes into one store."""
    _writer(store).write_sessions(alice_sessions() + bob_sessions() + _crowd(0, 9))
    b2 = session("bob", "b2", ["BOB I sold the piano", "BOB now I play drums"])
    _writer(store).write_sessions(_crowd(9, 5) + [b2], on_duplicate="replace")
    again = session("alice", "s1", ["ALICE this copy must be skipped"])
    _writer(store).write_sessions([again, *_crowd(14, 2)], on_duplicate="skip")
    _writer(store, raw_unit="session", levels=(1,), extractive=False).write_sessions(
        [session("carol", f"k{i}", [f"CAROL tea {i}", f"CAROL dog {i}"]) for i in range(3)])


def _stored(dump: dict[str, Any]) -> dict[str, Any]:
    """The canonical dump without the store's random id, as JSON would hold it."""
    # store_id is random; free_space is the scrub's own marker (docs/erasure.md), not written content
    dump["meta"] = [kv for kv in dump["meta"] if kv[0] not in ("store_id", "free_space")]
    out: dict[str, Any] = json.loads(json.dumps(dump))
    return out


def _decrypted(store: MemoryStore) -> dict[str, Any]:
    """What the public API returns: artifacts and edges, without digests (keyed when encrypted,
    also those a consolidation records of its sources)."""
    def meta(m: dict[str, Any]) -> dict[str, Any]:
        return {**m, "sources": sorted(m["sources"])} if "sources" in m else m

    arts = [[a.id, a.owner, a.tier.value, a.kind, a.session_id, a.seq, a.text,
             None if a.vector is None else a.vector.hex(), meta(a.meta)] for a in store.artifacts()]
    edges = [[e.child, e.parent, e.op, e.params] for a in store.artifacts() for e in store.parents(a.id)]
    return {"artifacts": arts, "lineage": sorted(edges)}


def test_stored_rows_equal_the_golden(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with MemoryStore(db) as store:
        write_fixed(store)
    got, want = _stored(canonical_dump(db)), json.loads(GOLDEN.read_text())
    for part in ("artifacts", "lineage", "meta", "gate", "receipts"):
        assert got[part] == want[part], part


def test_encrypted_store_holds_the_same_artifacts(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "p.db") as plain, MemoryStore(tmp_path / "e.db", encrypt=True) as enc:
        write_fixed(plain)
        write_fixed(enc)
        assert _decrypted(enc) == _decrypted(plain)
        assert len(_decrypted(enc)["artifacts"]) == len(json.loads(GOLDEN.read_text())["artifacts"])


@pytest.mark.postgres
def test_postgres_store_holds_the_same_artifacts(tmp_path: Path, pg_url: str) -> None:
    with MemoryStore(tmp_path / "p.db") as plain, MemoryStore(pg_url, encrypt=False) as pg:
        write_fixed(plain)
        write_fixed(pg)
        assert _decrypted(pg) == _decrypted(plain)


def _hashing_reference(texts: list[str], dim: int) -> np.ndarray[Any, Any]:
    """The hashing embedder as first written: every word hashed, added into the float32 row."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"[A-Za-z0-9]+", t.lower()):
            h = hashlib.blake2b(w.encode(), digest_size=8).digest()
            out[i, int.from_bytes(h[:4], "little") % dim] += 1.0 if h[4] & 1 else -1.0
        n = float(np.linalg.norm(out[i]))
        if n > 0:
            out[i] /= n
    return out


@pytest.mark.parametrize("dim", [16, 64, 256])
def test_hashing_embedder_vectors_are_unchanged(dim: int) -> None:
    texts = [f"Session {i}: the the THE dog {i % 7} Ünïcode café {i * 7919} x{'y' * (i % 5)}" for i in range(300)]
    texts += ["", "!!", "a a a a a a b", "a b " * 200]
    e = HashingEmbedder(dim)
    want = _hashing_reference(texts, dim)
    assert np.array_equal(e.embed(texts), want)
    assert np.array_equal(e.embed(texts[::-1]), want[::-1])  # a second call, from the word cache


def test_sealed_payload_bytes_are_unchanged() -> None:
    """An encrypted store's keyed digest is an HMAC of the payload: same payload bytes as
    ``json.dumps(..., ensure_ascii=False)`` wrote them."""
    key, p = bytes(range(32)), _crypto.Sealed("café ü\nline", b"\x00\x01\x02\x03", {"z": 1, "a": ["ü", None]})
    head = json.dumps({"t": p.text, "m": p.meta}, ensure_ascii=False).encode("utf-8")
    raw = struct.pack(">I", len(head)) + head + (p.vector or b"")
    sealed, digest = _crypto.seal(key, "r-00000001", p)
    assert digest == hmac.new(key, raw, hashlib.sha256).hexdigest()
    assert _crypto.unseal(key, "r-00000001", sealed) == p


if __name__ == "__main__":  # regenerate the fixture (see the module docstring)
    with tempfile.TemporaryDirectory() as d:
        import os

        os.environ["TRACELESS_HOME"] = str(Path(d) / "home")
        with MemoryStore(Path(d) / "m.db") as s:
            write_fixed(s)
        print(json.dumps(_stored(canonical_dump(Path(d) / "m.db")), indent=0, ensure_ascii=False))
