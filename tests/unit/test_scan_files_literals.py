"""``scan_files`` with several literals reads each file once and counts exactly what one scan
per literal sums to (the byte scan of ``scan_system``), also across the reader's chunk
boundary and for repeated, overlapping, non-ASCII and UTF-16 literals."""

from __future__ import annotations

from pathlib import Path

from traceless.forget import scan_files

CHUNK = 1 << 24  # the reader's chunk (forget._erasure._CHUNK)


def test_several_literals_count_what_one_scan_each_sums_to(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    data = bytearray(b"x" * (CHUNK + 4096))
    data[CHUNK - 5:CHUNK + 8] = b"TOKEN-AB12-CD"  # across the first chunk's end
    data[100:113] = b"TOKEN-AB12-CD"
    data[200:200 + 26] = "TOKEN-AB12-CD".encode("utf-16-le")
    big.write_bytes(bytes(data))
    small = tmp_path / "small.json"
    small.write_text('{"a": "caf\\u00e9-77 and café-77", "b": "TOKEN-AB12-CDTOKEN-AB12-CD"}', encoding="utf-8")
    files = [big, small, tmp_path / "gone.db"]
    literals = ["TOKEN-AB12-CD", "AB12", "café-77", "TOKEN-AB12-CD", "KEN-AB"]
    one_each: dict[str, int] = {}
    for lit in literals:
        for path, n in scan_files(files, lit).items():
            one_each[path] = one_each.get(path, 0) + n
    assert scan_files(files, literals) == one_each
    assert scan_files(files, "TOKEN-AB12-CD") == {str(big): 3, str(small): 2}  # 2 UTF-8 (one across), 1 UTF-16
    assert scan_files(files, "café-77") == {str(big): 0, str(small): 2}  # UTF-8 and its JSON escape


def test_scan_bytes_counts_each_needle_apart_across_the_chunk_boundary(tmp_path: Path) -> None:
    """``scan_bytes`` (the chroma vector check: a vector's float32 bytes hold no literal) counts
    each needle on its own, in the order given, once across the reader's chunk end."""
    import random

    import pytest

    from traceless.forget import scan_bytes

    vec = random.Random(38).randbytes(1536)  # a 384-d float32 vector
    other = bytes(reversed(vec))
    big = tmp_path / "data_level0.bin"
    data = bytearray(CHUNK + 4096)
    data[CHUNK - 700:CHUNK - 700 + len(vec)] = vec  # across the first chunk's end
    data[10:10 + len(vec)] = vec
    big.write_bytes(bytes(data))
    assert scan_bytes([big, tmp_path / "gone"], [vec, other, vec[:8]]) == {str(big): [2, 0, 2]}
    with pytest.raises(ValueError, match="empty needle"):
        scan_bytes([big], [b""])


def test_one_pass_scan_counts_what_a_count_per_form_does(tmp_path: Path) -> None:
    """The one-pass reader (a chunk without NUL skips the UTF-16 forms; a chunk where the regex
    of all forms finds none is not counted form by form) counts exactly ``bytes.count`` per form:
    chunks with and without NUL, with and without a hit, overlapping and repeated forms."""
    import random

    from traceless.forget import encodings_of, scan_bytes

    rng = random.Random(39)
    literals = ["QZ7-KIWI-1234", "KIWI-12", "ZZZ", "ünï-42"]
    forms = [f for lit in literals for f in encodings_of(lit)]
    alphabet = b"abcdefgh ,:[]{}0123456789"  # no NUL: the random text is a chunk without it
    text = bytearray(rng.randbytes(3 * CHUNK + 777).translate(bytes(alphabet[i % len(alphabet)] for i in range(256))))
    for pos in (5, CHUNK - 3, 3 * CHUNK + 100):  # UTF-8 hits in chunks 1 (one across its end) and 4; none in 2
        form = rng.choice([f for f in forms if b"\0" not in f])
        text[pos:pos + len(form)] = form
    text[2 * CHUNK + 9:2 * CHUNK + 9 + 26] = "QZ7-KIWI-1234".encode("utf-16-le")  # a NUL only in chunk 2
    text[2 * CHUNK + 90:2 * CHUNK + 96] = b"ZZZZZZ"
    f = tmp_path / "store.json"
    f.write_bytes(bytes(text))
    data = bytes(text)
    assert scan_bytes([f], forms) == {str(f): [data.count(x) for x in forms]}
    assert scan_files([f], literals) == {str(f): sum(data.count(x) for x in forms)}


def test_many_needles_count_what_a_count_per_needle_does(tmp_path: Path) -> None:
    """Past a few forms (an erasure's vectors: hundreds of needles) the reader finds them by
    their first 4 bytes (NumPy, every alignment): still exactly ``bytes.count`` per needle,
    for needles across the chunk end, repeated, overlapping themselves, shorter than 4 bytes,
    sharing their first 4 bytes, and ones that are absent."""
    import random

    from traceless.forget import scan_bytes

    rng = random.Random(391)
    vecs = [rng.randbytes(1536) for _ in range(40)]
    needles = [*vecs, b"abab" * 3, b"xy", vecs[0][:4] + b"tail", b"\x00\x00\x00\x00\x00"]
    data = bytearray(rng.randbytes(2 * CHUNK + 5000))
    for k, pos in enumerate([3, CHUNK - 700, CHUNK + 2000, 2 * CHUNK + 1000, 2 * CHUNK + 2600]):
        data[pos:pos + 1536] = vecs[k % 3]  # one across the first chunk's end
    data[77_001:77_001 + 13] = b"abababababab" + b"a"  # overlapping self-matches
    data[90_000:90_008] = vecs[0][:4] + b"tail"
    data[91_000:91_009] = b"\x00" * 9
    f = tmp_path / "data.lance"
    f.write_bytes(bytes(data))
    raw = bytes(data)
    expected = [raw.count(x) for x in needles]
    assert expected[0] == 2 and expected[1] == 2 and expected[-1] == 1  # the planted copies (and the test's own claim)
    assert scan_bytes([f], needles) == {str(f): expected}


def test_sparse_needles_in_a_file_of_zeros_count_what_a_count_per_needle_does(tmp_path: Path) -> None:
    """Sparse vectors (runs of zero floats, as a hashing embedder writes them) in a file mostly of
    zero bytes: each needle anchored by a window of its own (not a run of zeros), and past too
    many marked positions the chunk counted form by form; both exactly ``bytes.count``."""
    import random

    from traceless.forget import scan_bytes

    rng = random.Random(392)

    def sparse() -> bytes:
        v = bytearray(1536)
        for _ in range(3):
            k = rng.randrange(0, 1536 // 4) * 4
            v[k:k + 4] = rng.randbytes(4)
        return bytes(v)

    vecs = [sparse() for _ in range(30)]
    data = bytearray(CHUNK + 3000)
    for k, pos in enumerate([40, 9000, CHUNK - 100, CHUNK + 1440]):
        data[pos:pos + 1536] = vecs[k % 2]
    f = tmp_path / "zeros.lance"
    f.write_bytes(bytes(data))
    raw = bytes(data)
    expected = [raw.count(x) for x in vecs]
    assert expected[:3] == [2, 2, 0]
    assert scan_bytes([f], vecs) == {str(f): expected}
    crowded = [*vecs, *(bytes(8 + k) for k in range(20))]  # runs of zeros: marked everywhere
    assert scan_bytes([f], crowded) == {str(f): [raw.count(x) for x in crowded]}
