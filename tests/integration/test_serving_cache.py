"""The serving cache as a tier (issue 38.3) on a real llama.cpp server (smollm2-135m, prompt
caching on): after the conversation that carried a record, prompts that start with it reach
their first token much faster than matched controls (two-sample KS, n fixed in advance: 10
per group); with the cache cleared (a restart on the same port) before every pair, the
difference is gone. Timings are the client's wall clock, never the server's own numbers.

traceless's erasure clears it when traceless serves the system's model: records carrying the
users' canaries served, then the system's native deletion (the server untouched: still
cached) or traceless's erasure (``erase_system``: its receipt names the tier, and the test no
longer sees the records); and the audit records the tier per deletion in its residue cell,
its table and the scorecard's column."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_openai_backend import smollm2_gguf  # noqa: E402

from traceless.audit import (  # noqa: E402
    SystemAuditConfig,
    audit_records,
    plant_canaries,
    run_system_audit,
    serving_cache_check,
    serving_cache_tier,
)
from traceless.datasets import canary_sentence  # noqa: E402
from traceless.models import HashingEmbedder  # noqa: E402
from traceless.systems import DeletionTarget, SystemRuntime, erase_system, load_system_config, open_system  # noqa: E402

pytestmark = [pytest.mark.heavy(150), pytest.mark.integration]
N = 10  # per group and phase: fixed before the first run (KS p for a full separation: 1.1e-5)
N_AUDIT = 8  # per group in the audit test: fixed before its first run (full separation: p 1.6e-4)
ALPHA = 1e-3
RECORD = ("Memory: the user's IBAN is DE89 3704 0044 0532 0130 00, they live at 12 Elm Street, Leeds, and their "
          "daughter's school is St Mary's. " + " ".join(["They prefer morning appointments and tea over coffee."] * 8))
# ~130 tokens (was ~250: an uncached probe took 2.2-3.9 s on one thread, a cached one 0.12-0.22 s;
# half the prefix halves the test, the two groups stay apart by an order of magnitude)


@pytest.fixture(scope="module")
def server() -> Iterator[object]:
    pytest.importorskip("xllamacpp")
    from traceless.models._llamacpp_server import LlamaCppServer

    with LlamaCppServer(smollm2_gguf(), ctx=2048, threads=1, cache_prompt=True) as srv:
        yield srv


def _runtime(server: object) -> SystemRuntime:
    from traceless.models._served import ServedBackend

    return SystemRuntime(ServedBackend(server, name="llamacpp:smollm2-135m-instruct"), HashingEmbedder(),  # type: ignore[arg-type]
                         "llamacpp:smollm2-135m-instruct")


def test_the_record_is_in_the_serving_cache_until_it_is_cleared(server: object) -> None:
    tier = serving_cache_check(server, RECORD, n=N, alpha=ALPHA)
    assert tier.tokens > 100
    b, a = tier.before, tier.after
    assert b.verdict == "cached" and b.ks_p < ALPHA and b.median_ratio < 0.5, b
    assert a.verdict == "not detected" and a.ks_p > ALPHA and 0.5 < a.median_ratio < 2.0, a


def test_traceless_erasure_clears_the_served_models_prompt_cache(server: object, tmp_path: Path) -> None:
    me, other = plant_canaries(SystemAuditConfig(profiles=2))
    system = open_system("traceless", tmp_path / "memory", load_system_config("traceless", {"S": 0}), _runtime(server))
    try:
        system.write([*me.sessions, *other.sessions])
        records = audit_records([me.canary, other.canary], 2 * N, canary_sentence)
        # the system's own deletion of one user: the server keeps what it served
        native = serving_cache_tier(server, records[:N], lambda: system.delete(
            "full_purge", DeletionTarget(other.owner, other.canary, other.session_id)), alpha=ALPHA)
        receipts = []
        erased = serving_cache_tier(server, records[N:], lambda: receipts.append(erase_system(
            system, me.owner, [me.canary], state_dir=tmp_path / "state", key=b"k" * 32)), alpha=ALPHA, seed=39)
    finally:
        system.close()
    assert native.verdict == "cached" and native.ks_p < ALPHA and native.median_ratio < 0.5, native
    assert erased.verdict == "not detected" and erased.ks_p > ALPHA and 0.5 < erased.median_ratio < 2.0, erased
    (receipt,) = receipts
    assert "serving cache=clear" in receipt.guarantee and receipt.verification.checks["store_clean:serving cache"]
    assert any(n.startswith("serving cache: the llama.cpp server traceless serves the model from (cache_prompt on) "
                            "was restarted") for n in receipt.notes), receipt.notes
    assert "out of scope: the model server's caches" not in receipt.notes
    assert "out of scope: the caches of model servers traceless did not start" in receipt.notes


def test_the_audit_reports_the_tier_per_deletion(server: object, tmp_path: Path) -> None:
    from traceless.report._systems import SCORECARD_HEAD, _load, _markdown

    cfg = SystemAuditConfig(system="traceless", system_config={"S": 0, "modes": ["full_purge"]},
                            model="llamacpp:smollm2-135m-instruct", profiles=2, max_new_tokens=4,
                            serving_cache_n=N_AUDIT, inversion_decoys=0)
    result = run_system_audit(cfg, _runtime(server), tmp_path / "audit")
    tier = result.serving_cache["full_purge"]
    assert tier is not None and tier.n == N_AUDIT and tier.cache_prompt is True
    assert tier.before.verdict == "cached" and tier.before.ks_p < ALPHA, tier.before
    assert tier.after.verdict == "not detected" and tier.after.ks_p > ALPHA, tier.after
    assert result.erasure["full_purge"]["claims"]["serving cache"] == "clear"
    md = _markdown(_load(tmp_path / "audit"))
    row = next(ln for ln in md.splitlines() if ln.startswith("| traceless | `full_purge`"))
    cell = row.split(" | ")[SCORECARD_HEAD.index("served model's prompt cache")]
    assert cell.startswith("cached (KS p ") and "after traceless's erasure not detected" in cell, cell
    assert cell.endswith(f"n {N_AUDIT} per group"), cell
