"""The inversion check (issue 38.2) on vectors read from a real chroma instance's files: the
planted canaries' memories, deleted through chroma's own ``delete``, are still in
``data_level0.bin`` and the candidate attack ranks their canaries first among 10^4 + 20
candidates; an instance that never held them (what the rebuild leaves) gives 0; and the
vectors must come from the files (a wrong reader finds nothing: the check can fail)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from traceless.audit import canary_sentence, candidate_inversion, make_canary
from traceless.models import HashingEmbedder
from traceless.systems import chroma_file_vectors

pytestmark = pytest.mark.skipif(importlib.util.find_spec("chromadb") is None, reason="needs chromadb")
FILL = ("I moved to Lisbon last spring and I am learning Portuguese", "Can you recommend a good book on gardening",
        "My sister has two cats named Milo and Otis", "I prefer tea over coffee in the mornings")


def _planted() -> list[str]:
    rng = np.random.default_rng(20261203)
    return [make_canary(rng) for _ in range(20)]


def _instance(path: Path, texts: list[str], delete: int = 0) -> None:
    """A chroma collection of ``texts`` (hashing vectors) past its sync threshold; the first
    ``delete`` deleted through chroma's own ``delete``."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    col = client.create_collection("prod_memories")
    vecs = HashingEmbedder().embed(texts)
    ids = [f"m{i}" for i in range(len(texts))]
    for s in range(0, len(texts), 500):
        col.add(ids=ids[s:s + 500], embeddings=vecs[s:s + 500].tolist(), documents=texts[s:s + 500])
    if delete:
        col.delete(ids=ids[:delete])
    assert col.count() == len(texts) - delete  # the API no longer has them


def _texts(planted: list[str], others: int = 1000) -> tuple[list[str], list[str]]:
    mem = [f"{FILL[i % 4]}. By the way, {canary_sentence(c)}." for i, c in enumerate(planted)]
    return mem, [f"{FILL[i % 4]} and the weather is nice on day {i}." for i in range(others)]


def test_canaries_deleted_through_chroma_are_recovered_from_its_files(tmp_path: Path) -> None:
    planted = _planted()
    mem, other = _texts(planted)
    _instance(tmp_path / "chroma", mem + other, delete=len(mem))
    vecs = chroma_file_vectors(tmp_path / "chroma")
    deleted = HashingEmbedder().embed(mem)
    in_files = {r.tobytes() for r in vecs.astype("<f4")}
    assert all(v.astype("<f4").tobytes() in in_files for v in deleted)  # the deleted vectors, bit for bit
    rep = candidate_inversion(vecs, planted, HashingEmbedder(), decoys=10_000)
    assert rep.candidates == 10_020 and rep.planted == 20
    assert rep.top1.low > 0.5 and rep.topk.value >= rep.top1.value, rep


def test_files_that_never_held_them_recover_nothing(tmp_path: Path) -> None:
    planted = _planted()
    _, other = _texts(planted)
    _instance(tmp_path / "chroma", other)
    rep = candidate_inversion(chroma_file_vectors(tmp_path / "chroma"), planted, HashingEmbedder(), decoys=10_000)
    assert rep.vectors >= 1000 and rep.top1.successes == 0 and rep.topk.successes == 0


def test_vectors_read_at_the_wrong_offset_recover_nothing(tmp_path: Path) -> None:
    """The reader is what makes the rate: the same bytes shifted by one float find nothing."""
    planted = _planted()
    mem, other = _texts(planted)
    _instance(tmp_path / "chroma", mem + other, delete=len(mem))
    vecs = chroma_file_vectors(tmp_path / "chroma")
    shifted = np.roll(vecs, 1, axis=1)
    assert candidate_inversion(shifted, planted, HashingEmbedder(), decoys=10_000).top1.successes < 3


def test_below_the_sync_threshold_the_deleted_vectors_are_in_chromas_log(tmp_path: Path) -> None:
    """An audit's few memories never reach ``data_level0.bin`` (chroma persists its HNSW
    segment past ``sync_threshold`` writes); its log keeps every add, deleted ones included:
    ``chroma_log_vectors`` reads them bit for bit from ``chroma.sqlite3``."""
    from traceless.systems import chroma_log_vectors

    planted = _planted()[:5]
    mem, other = _texts(planted, others=5)
    _instance(tmp_path / "chroma", mem + other, delete=len(mem))
    assert len(chroma_file_vectors(tmp_path / "chroma")) == 0
    log = chroma_log_vectors(tmp_path / "chroma")
    in_log = {r.tobytes() for r in log.astype("<f4")}
    assert len(log) == 10 and all(v.astype("<f4").tobytes() in in_log for v in HashingEmbedder().embed(mem))
    rep = candidate_inversion(log, planted, HashingEmbedder(), decoys=2_000)
    assert rep.top1.successes >= 3, rep
    assert len(chroma_log_vectors(tmp_path / "nothing")) == 0
