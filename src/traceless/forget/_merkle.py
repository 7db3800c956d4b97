"""The Merkle tree of RFC 9162 (Certificate Transparency 2.0, section 2.1), with SHA-256.

* leaf hash ``SHA-256(0x00 || leaf)``, interior node ``SHA-256(0x01 || left || right)``;
* ``tree_hash`` is the RFC's MTH: the empty tree hashes to ``SHA-256()``; a tree of n > 1
  leaves splits at k, the largest power of two smaller than n (2.1.1);
* ``inclusion_proof`` is PATH (2.1.3.1) and ``consistency_proof`` is PROOF/SUBPROOF (2.1.4.1);
* ``verify_inclusion`` and ``verify_consistency`` are the RFC's verification algorithms
  (2.1.3.2 and 2.1.4.2), step for step, plus the cases RFC 6962 gives an empty proof to
  (``size1 == size2`` and ``size1 == 0``), as Go's transparency-dev/merkle does.

Written here (a few dozen lines) rather than taken from PyPI: ``pymerkle`` builds proofs in a
format of its own (its ``rule``/``subset`` bits and a path that starts with the leaf), not the
RFC's audit paths, so a proof it makes is not one that another RFC 9162 verifier checks. The
test vectors of ``tests/unit/test_log.py`` are the RFC 6962 ones that transparency-dev/merkle
and certificate-transparency test against.

A proof is a list of 32-byte hashes; the leaves are given as their leaf hashes, so a log keeps
one hash per entry and never re-reads the entries to prove something.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["HASH_SIZE", "consistency_proof", "inclusion_proof", "leaf_hash", "node_hash", "tree_hash",
           "verify_consistency", "verify_inclusion"]

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(leaf: bytes) -> bytes:
    """``SHA-256(0x00 || leaf)``."""
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def tree_hash(leaves: Sequence[bytes], lo: int = 0, hi: int | None = None) -> bytes:
    """MTH of the leaf hashes ``leaves[lo:hi]``."""
    hi = len(leaves) if hi is None else hi
    n = hi - lo
    if n == 0:
        return EMPTY_ROOT
    if n == 1:
        return leaves[lo]
    k = _split(n)
    return node_hash(tree_hash(leaves, lo, lo + k), tree_hash(leaves, lo + k, hi))


def inclusion_proof(leaves: Sequence[bytes], index: int, size: int | None = None) -> list[bytes]:
    """PATH(index, D[size]): the audit path of leaf ``index`` in the tree of the first ``size``
    leaf hashes (default: all), leaf's sibling first."""
    size = len(leaves) if size is None else size
    if not 0 <= index < size <= len(leaves):
        raise ValueError(f"no leaf {index} in a tree of {size} leaves")

    def path(m: int, lo: int, hi: int) -> list[bytes]:
        if hi - lo == 1:
            return []
        k = _split(hi - lo)
        if m < k:
            return [*path(m, lo, lo + k), tree_hash(leaves, lo + k, hi)]
        return [*path(m - k, lo + k, hi), tree_hash(leaves, lo, lo + k)]

    return path(index, 0, size)


def consistency_proof(leaves: Sequence[bytes], size1: int, size2: int | None = None) -> list[bytes]:
    """PROOF(size1, D[size2]): what shows the tree of ``size1`` leaves is a prefix of the
    tree of ``size2`` (default: all). Empty for ``size1 == 0`` or ``size1 == size2``."""
    size2 = len(leaves) if size2 is None else size2
    if not 0 <= size1 <= size2 <= len(leaves):
        raise ValueError(f"no consistency proof from {size1} to {size2} leaves")
    if size1 in (0, size2):
        return []

    def subproof(m: int, lo: int, hi: int, whole: bool) -> list[bytes]:
        n = hi - lo
        if m == n:
            return [] if whole else [tree_hash(leaves, lo, hi)]
        k = _split(n)
        if m <= k:
            return [*subproof(m, lo, lo + k, whole), tree_hash(leaves, lo + k, hi)]
        return [*subproof(m - k, lo + k, hi, False), tree_hash(leaves, lo, lo + k)]

    return subproof(size1, 0, size2, True)


def _sized(*hashes: bytes) -> bool:
    return all(len(h) == HASH_SIZE for h in hashes)


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 2.1.3.2: leaf hash ``leaf`` is entry ``index`` of the tree of ``size`` whose
    root is ``root``."""
    if not 0 <= index < size or not _sized(leaf, root, *proof):
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_consistency(size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes) -> bool:
    """RFC 9162 2.1.4.2: the tree of ``size1`` with root ``root1`` is a prefix of the tree of
    ``size2`` with root ``root2``."""
    if not 0 <= size1 <= size2 or not _sized(*proof):
        return False
    if size1 == size2:
        return not proof and root1 == root2
    if size1 == 0:
        return not proof
    if not proof or not _sized(root1, root2):
        return False
    path = [root1, *proof] if size1 & (size1 - 1) == 0 else list(proof)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == root1 and sr == root2 and sn == 0
