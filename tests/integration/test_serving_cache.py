"""The serving cache as a tier (issue 38.3) on a real llama.cpp server (smollm2-135m, prompt
caching on): after the conversation that carried a record, prompts that start with it reach
their first token much faster than matched controls (two-sample KS, n fixed in advance: 10
per group); with the cache cleared (a restart on the same port) before every pair, the
difference is gone. Timings are the client's wall clock, never the server's own numbers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_openai_backend import smollm2_gguf  # noqa: E402

from traceless.audit import serving_cache_check  # noqa: E402

pytestmark = pytest.mark.integration
N = 10  # per group and phase: fixed before the first run (KS p for a full separation: 1.1e-5)
ALPHA = 1e-3
RECORD = ("Memory: the user's IBAN is DE89 3704 0044 0532 0130 00, they live at 12 Elm Street, Leeds, and their "
          "daughter's school is St Mary's. " + " ".join(["They prefer morning appointments and tea over coffee."] * 20))


@pytest.fixture(scope="module")
def server() -> Iterator[object]:
    pytest.importorskip("xllamacpp")
    from traceless.models._llamacpp_server import LlamaCppServer

    with LlamaCppServer(smollm2_gguf(), ctx=2048, threads=1, cache_prompt=True) as srv:
        yield srv


def test_the_record_is_in_the_serving_cache_until_it_is_cleared(server: object) -> None:
    tier = serving_cache_check(server, RECORD, n=N, alpha=ALPHA)
    assert tier.tokens > 200
    b, a = tier.before, tier.after
    assert b.verdict == "cached" and b.ks_p < ALPHA and b.median_ratio < 0.5, b
    assert a.verdict == "not detected" and a.ks_p > ALPHA and 0.5 < a.median_ratio < 2.0, a
