"""The append-only receipt log (issue 38.4): RFC 9162 Merkle proofs against the RFC 6962 test
vectors of transparency-dev/merkle, C2SP signed notes against Go's sumdb/note vector, and a
log that rejects a removed, reordered or altered receipt and a swapped checkpoint."""

from __future__ import annotations

import base64
import shutil
import time
from pathlib import Path

import pytest
from _cli import cli
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from traceless.errors import ReceiptLogError
from traceless.forget import (
    Receipt,
    TargetRef,
    Verification,
    append_receipt,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    load_receipt,
    open_note,
    sign,
    sign_note,
    tree_hash,
    verify_consistency,
    verify_inclusion,
    verify_log,
    write_receipt,
)
from traceless.keys import public_key_bytes

pytestmark = pytest.mark.usefixtures("_home")

H = bytes.fromhex
LEAVES = [H(x) for x in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                         "606162636465666768696a6b6c6d6e6f")]
ROOTS = [H(x) for x in (
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")]
INCLUSION = [(1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                     "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                     "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
             (6, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                     "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                     "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
             (3, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
             (2, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                     "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                     "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"])]
CONSISTENCY = [(1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                       "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                       "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
               (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                       "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                       "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
               (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                       "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
               (6, 7, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                       "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
                       "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"])]
L = [leaf_hash(x) for x in LEAVES]


def test_rfc6962_hashes_and_roots() -> None:
    assert tree_hash([]).hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert leaf_hash(b"L123456").hex() == "395aa064aa4c29f7010acfe3f25db9485bbd4b91897b6ad7ad547639252b4d56"
    assert [tree_hash(L[:n]) for n in range(1, 9)] == ROOTS


@pytest.mark.parametrize(("leaf", "size", "proof"), INCLUSION)
def test_inclusion_vectors_are_built_and_verified_and_every_corruption_fails(leaf: int, size: int,
                                                                              proof: list[str]) -> None:
    want = [H(x) for x in proof]
    i, root = leaf - 1, ROOTS[size - 1]
    assert inclusion_proof(L, i, size) == want
    assert verify_inclusion(i, size, L[i], want, root)
    bad = [(i + 1, size, L[i], want, root), (i, size * 2, L[i], want, root), (i, size, L[i], want[:-1], root),
           (i, size, L[i], [*want, root], root), (i, size, L[i], [root, *want], root),
           (i, size, leaf_hash(b"x"), want, root), (i, size, L[i], want, ROOTS[0] if size > 1 else ROOTS[1])]
    bad += [(i, size, L[i], [bytes([p[0] ^ 8]) + p[1:] if j == k else p for j, p in enumerate(want)], root)
            for k in range(len(want))]
    assert not any(verify_inclusion(*b) for b in bad)


@pytest.mark.parametrize(("size1", "size2", "proof"), CONSISTENCY)
def test_consistency_vectors_are_built_and_verified_and_every_corruption_fails(size1: int, size2: int,
                                                                               proof: list[str]) -> None:
    want = [H(x) for x in proof]
    r1, r2 = ROOTS[size1 - 1], ROOTS[size2 - 1]
    assert consistency_proof(L, size1, size2) == want
    assert verify_consistency(size1, size2, want, r1, r2)
    bad = [(size1 + 1, size2, want, r1, r2), (size1, size2 * 2, want, r1, r2), (size1, size2, want, r2, r1),
           (size1, size2, [], r1, r2), (size1, size2, want[:-1], r1, r2), (size1, size2, [*want, r1], r1, r2),
           (size1, size2, [want[0], *want], r1, r2)]
    bad += [(size1, size2, [bytes([p[0] ^ 16]) + p[1:] if j == k else p for j, p in enumerate(want)], r1, r2)
            for k in range(len(want))]
    assert not any(verify_consistency(*b) for b in bad)


def test_every_proof_of_every_size_up_to_8_verifies() -> None:
    for n in range(1, 9):
        assert all(verify_inclusion(i, n, L[i], inclusion_proof(L, i, n), ROOTS[n - 1]) for i in range(n))
        for m in range(n + 1):
            assert verify_consistency(m, n, consistency_proof(L, m, n), tree_hash(L[:m]), ROOTS[n - 1])


def test_signed_note_matches_go_sumdb_note_vector() -> None:
    raw = base64.b64decode("AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz")
    key = Ed25519PrivateKey.from_private_bytes(raw[1:])
    text = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
    note = sign_note(text, "PeterNeumann", key)
    assert note == text + "\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
    pub = base64.b64decode("ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW")[1:]
    assert public_key_bytes(key) == pub and open_note(note, "PeterNeumann", pub) == text
    with pytest.raises(ReceiptLogError):
        open_note(note.replace("cryptography", "cryptographY"), "PeterNeumann", pub)


def _receipt(n: int) -> Receipt:
    v = Verification(claims=[], sources_removed=[], sources_gone=True, surviving_descendants=[], closure_clean=True,
                     literal_scan={}, passed=True)
    return sign(Receipt(receipt_id=f"rcpt-{n}", created_at=time.time(), mode="full_purge", matched=True,
                        target=TargetRef(kind="record", ref=f"r{n}", owner="u:0"), tiers={}, verification=v,
                        seconds=0.0, code_version="test"))


@pytest.fixture
def logged(tmp_path: Path) -> tuple[Path, list[Path]]:
    log, files = tmp_path / "log", []
    for n in range(3):
        r = _receipt(n)
        assert append_receipt(log, r).index == n
        files.append(write_receipt(r, tmp_path / f"r{n}.json"))
    return log, files


def _run(*args: str) -> int:
    return cli("log", "verify", *args)


def test_inclusion_and_consistency_verify_with_the_public_key_alone(logged: tuple[Path, list[Path]],
                                                                      tmp_path: Path) -> None:
    log, files = logged
    pub = tmp_path / "pub.txt"
    assert cli("keys", "export", "--out", str(pub)) == 0
    for f in files:
        assert _run("--log", str(log), "--public-key", str(pub), "--receipt", str(f)) == 0
    assert _run("--log", str(log), "--public-key", str(pub), "--old", str(log / "checkpoints" / "1")) == 0
    assert cli("forget", "verify", str(files[1]), "--log", str(log), "--public-key", str(pub)) == 0
    assert verify_log(log).checkpoint.size == 3
    other = Ed25519PrivateKey.generate()
    assert _run("--log", str(log), "--public-key", public_key_bytes(other).hex()) == 9


def _lines(log: Path) -> list[bytes]:
    return (log / "entries.jsonl").read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("tamper", ["delete", "reorder", "alter", "swap_checkpoint", "alter_checkpoint"])
def test_a_tampered_log_fails_with_one_line(logged: tuple[Path, list[Path]], tamper: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    log, files = logged
    lines, entries = _lines(log), log / "entries.jsonl"
    if tamper == "delete":
        entries.write_bytes(lines[0] + lines[2])
    elif tamper == "reorder":
        entries.write_bytes(lines[1] + lines[0] + lines[2])
    elif tamper == "alter":
        entries.write_bytes(lines[0] + lines[1].replace(b"full_purge", b"full_purgf") + lines[2])
    elif tamper == "swap_checkpoint":
        shutil.copy(log / "checkpoints" / "2", log / "checkpoint")
    else:
        text = (log / "checkpoint").read_text(encoding="utf-8").split("\n")
        text[1] = "4"
        (log / "checkpoint").write_text("\n".join(text), encoding="utf-8")
    capsys.readouterr()
    assert _run("--log", str(log), "--receipt", str(files[0])) == 9
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    with pytest.raises(ReceiptLogError):  # and the log is never extended over the tampering
        append_receipt(log, _receipt(9))


def test_a_receipt_dropped_and_the_log_re_signed_fails_consistency(logged: tuple[Path, list[Path]],
                                                                     tmp_path: Path) -> None:
    log, files = logged
    kept = (log / "checkpoint").read_text(encoding="utf-8")
    shutil.rmtree(log)
    for f in (files[0], files[2]):  # the key's holder rebuilds the log without receipt 1
        append_receipt(log, load_receipt(f))
    old = tmp_path / "kept.checkpoint"
    old.write_text(kept, encoding="utf-8")
    assert _run("--log", str(log), "--receipt", str(files[1])) == 9
    assert _run("--log", str(log), "--old", str(old)) == 9
