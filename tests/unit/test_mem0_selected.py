"""``selected`` (mem0 on qdrant local: the points a scan decodes) picks exactly the points
``may_hold`` picks, however the batch is made: points pickled with every protocol, points of
0 and 1 bytes, a needle across two points' joint, a needle inside a point's floats, a user id
that prefixes another (issue 39: one Aho–Corasick pass over the joined batch)."""

from __future__ import annotations

import pickle
import random
import struct

import pytest

from traceless.systems._mem0_qdrant import may_hold, pickled_str, point_needles, selected

LITERALS = ["CANARY-sel-4410", "Ñandú-77"]


def _point(i: int, user: str | None, text: str, protocol: int, floats: list[float]) -> bytes:
    payload = {"data": text, "hash": f"h{i}", **({"user_id": user} if user is not None else {})}
    return pickle.dumps({"id": f"00000000-0000-4000-8000-{i:012d}", "vector": {"": floats}, "payload": payload},
                        protocol=protocol)


def _batch(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    needle = point_needles(LITERALS)[0]
    # floats whose raw bytes spell a needle and the pickled user id: found by the byte pass, refused by ``may_hold``
    sneaky = [struct.unpack("<d", (needle + b"\0" * 8)[k:k + 8][::-1])[0] for k in range(0, len(needle), 8)]
    blobs = []
    for i in range(200):
        user = rng.choice(["u1", "u10", "u100", "u2", None])
        text = rng.choice(["plain", f"holds {LITERALS[0]}", f"holds {LITERALS[1]}", "u1 mentioned"])
        floats = sneaky if rng.random() < 0.1 else [rng.random() for _ in range(4)]
        blobs.append(_point(i, user, text, rng.choice([0, 1, 2, 3, 4, 5]), floats))
    blobs += [b"", b"\x80", b"\x8c\x02u", b"1" + bytes(needle[:5]), bytes(needle[5:]) + b".", needle + b"!"]
    # tiny points, a needle split across two, a point that starts with one
    rng.shuffle(blobs)
    return blobs


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("user", ["u1", "u10", None, "nobody"])
@pytest.mark.parametrize("literals", [LITERALS, LITERALS[:1], []])
def test_selected_is_what_may_hold_picks(seed: int, user: str | None, literals: list[str]) -> None:
    blobs = _batch(seed)
    mine = pickled_str(user) if user is not None else None
    needles = point_needles(literals) or []
    want = [i for i, b in enumerate(blobs) if may_hold(b, mine, needles)]
    assert selected(blobs, mine, needles) == want
    if user is not None:  # the points of protocol 0 and 1 and the tiny ones are always decoded
        assert {i for i, b in enumerate(blobs) if len(b) < 2 or b[1] < 2} <= set(want)


def test_a_point_holding_the_user_only_inside_its_floats_is_not_selected() -> None:
    mine = pickled_str("u1")
    inside = struct.unpack(">d", (mine[0] + b"\0" * 8)[:8])[0]  # BINFLOAT: big-endian
    blob = _point(1, "u2", "plain", 4, [inside, 0.5])
    assert mine[0] in blob
    assert selected([blob], mine, []) == [] and selected([blob, _point(2, "u1", "x", 4, [0.1])], mine, []) == [1]


@pytest.mark.parametrize("size", [36, 5, 8])
@pytest.mark.parametrize("weak", [False, True])
def test_absent_is_what_a_set_says(size: int, weak: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The orphan check's id comparison (``absent``) equals a set's, also when the 64-bit mix
    collides everywhere (a mix of 2 bits: every lookup is decided by the bytes or the set)."""
    from traceless.systems import _mem0_qdrant

    if weak:
        real = _mem0_qdrant._mix
        monkeypatch.setattr(_mem0_qdrant, "_mix", lambda w: real(w) & 3)
    rng = random.Random(size)
    pool = [bytes(rng.randrange(3) for _ in range(size)) for _ in range(60)]  # few byte values: near twins
    ids, among = [rng.choice(pool) for _ in range(120)], [rng.choice(pool) for _ in range(40)]
    want = [i for i, x in enumerate(ids) if x not in set(among)]
    assert 0 < len(want) < len(ids)
    assert _mem0_qdrant.absent(b"".join(ids), b"".join(among), size) == want
    assert _mem0_qdrant.absent(b"".join(ids), b"", size) == list(range(len(ids)))
    assert _mem0_qdrant.absent(b"", b"".join(among), size) == []
