"""``kernel.digest``: the bystander digest is each record's ``record_hash`` (SHA-256, 128 bits,
hex), sorted as strings, whatever way it is computed (journals of interrupted erasures hold it)."""

from __future__ import annotations

import hashlib
import random

import pytest

from traceless.systems.kernel import digest, record_hash


def _reference(texts: list[str]) -> tuple[str, ...]:
    return tuple(sorted(hashlib.sha256(t.encode("utf-8")).hexdigest()[:32] for t in texts))


@pytest.mark.parametrize("seed", range(12))
def test_the_digest_is_the_records_hashes_sorted(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "ab\t\n=é€😀\x00"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12))) for _ in range(rng.randrange(0, 400))]
    texts += rng.sample(texts, min(len(texts), 5))  # the same record twice is counted twice
    got = digest(iter(texts))
    assert got == _reference(texts)
    assert sorted(got) == sorted(record_hash(t) for t in texts)


def test_no_record_is_an_empty_digest() -> None:
    assert digest([]) == ()
