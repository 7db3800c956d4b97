"""`forget --certify` on a real small model (smollm2-135m-instruct) and the real MiniLM
embedder: the certificate's probes run on real generations, and its verdict follows the
store (a noop forget leaves copies: fails; full_purge: no copy left)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from traceless import Memory
from traceless.forget import verify_receipt
from traceless.models import CachingBackend, load_backend

pytestmark = pytest.mark.integration
SECRET = "HV6-AMBER-3941"


def test_certify_on_smollm2(tmp_path: Path) -> None:
    os.environ.setdefault("TRACELESS_NUM_THREADS", "1")
    model = CachingBackend(load_backend("smollm2-135m-instruct"))
    certs = {}
    for mode in ("noop", "full_purge"):
        with Memory(tmp_path / f"{mode}.db") as mem:  # all-MiniLM-L6-v2, raw turns (S=0)
            mem.add(f"My private session token is {SECRET}. I swim on Mondays.", user="ana")
            mem.add("I keep bees in the garden.", user="ana")
            r = mem.forget(SECRET, user="ana", mode=mode, certify=True, model=model)
        assert r.certificate is not None
        certs[mode] = (r, verify_receipt(r)[0])
    noop, noop_check = certs["noop"]
    purge, purge_check = certs["full_purge"]
    assert noop.certificate is not None and purge.certificate is not None
    # real generations, probed under the agent and raw views (S=0 has no summary tier)
    assert {p.view for p in purge.certificate.probes} == {"agent", "raw"} and len(purge.certificate.probes) == 6
    assert purge.certificate.model["name"] == "smollm2-135m-instruct"
    assert noop.certificate.store_copies["raw"] == 1 and not noop.verification.passed and not noop_check.ok
    assert not any(purge.certificate.store_copies.values())
    # the agent cannot say what no store holds: full_purge certifies (a 135M model never guesses it)
    assert purge.certificate.failures() == [] and purge.verification.passed and purge_check.ok
    assert SECRET not in purge.model_dump_json() and SECRET not in noop.model_dump_json()
