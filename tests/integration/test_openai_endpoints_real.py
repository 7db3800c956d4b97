"""``openai:MODEL@URL1,URL2`` against two real llama.cpp servers (xllamacpp) serving
SmolLM2-135M on loopback: requests land on both, greedy replies equal one server's, and
the identity records both URLs and what llama.cpp reports about the weights."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from traceless.models import GenerationConfig, load_backend, messages
from traceless.models._llamacpp_server import LlamaCppServer

pytestmark = pytest.mark.integration

SMOL = "smollm2-135m-instruct"
PROMPTS = ["Name three colors.", "What is 12 times 7?", "Say hello in Spanish.", "Who wrote Hamlet?"]


@pytest.fixture(scope="module")
def two_servers() -> Iterator[tuple[LlamaCppServer, LlamaCppServer]]:
    pytest.importorskip("xllamacpp")
    from traceless.models._catalog import gguf_path, model_status

    if model_status(SMOL).state != "ready":
        pytest.skip(f"{SMOL} is not pulled (traceless models pull {SMOL})")
    with LlamaCppServer(gguf_path(SMOL), ctx=1024, threads=1) as a, LlamaCppServer(gguf_path(SMOL), ctx=1024,
                                                                                     threads=1) as b:
        yield a, b


def test_two_llamacpp_servers(two_servers: tuple[LlamaCppServer, LlamaCppServer]) -> None:
    a, b = two_servers
    cfg = GenerationConfig(max_new_tokens=12)
    batch = [messages(("user", p)) for p in PROMPTS]
    both = load_backend(f"openai:{a.model}@{a.base_url},{b.base_url}", max_concurrency=1)
    one = load_backend(f"openai:{a.model}@{a.base_url}", max_concurrency=1)
    try:
        t0 = time.perf_counter()
        spread = both.generate_batch(batch, cfg)
        t_both = time.perf_counter() - t0
        t0 = time.perf_counter()
        single = one.generate_batch(batch, cfg)
        t_one = time.perf_counter() - t0
        print(f"4 prompts x 12 tokens: two servers {t_both:.2f}s, one server {t_one:.2f}s")
        assert [g.text for g in spread] == [g.text for g in single]
        assert list(both.requests_per_endpoint.values()) == [2, 2]  # type: ignore[attr-defined]
        d = both.describe()
        assert d["base_urls"] == [a.base_url, b.base_url]
        served = d["served"]
        assert served["models_entry"]["meta"]["n_params"] > 100_000_000
        assert served["props"]["model_file"] == a.gguf_path.name
        assert one.describe()["served"] == served
    finally:
        both.close()
        one.close()
