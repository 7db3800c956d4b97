"""Local transformers backend on the embedded smollm2-135m-instruct model (and one test on
the default Qwen model): determinism, seeded sampling, batching, prefix cache, KV crop
scrubbing, and the MiniLM embedder.

The model cache is the user's (``cache_dir()``) so the converted copy is built once.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
import torch

from traceless.models import GenerationConfig, load_backend, load_embedder, messages
from traceless.models._base import KVBackend

pytestmark = [pytest.mark.heavy(65), pytest.mark.integration]

SMOL = "smollm2-135m-instruct"
GREEDY = GenerationConfig(max_new_tokens=24)
MEMORY = (
    "You are a helpful assistant with a memory of the user.\n"
    "Memory:\n- The user's name is Dana and she lives in Lisbon.\n"
    "- Dana works as a marine biologist studying octopus behaviour.\n"
    "- Her favourite food is grilled sardines; she is allergic to peanuts.\n"
    "- She has a cat called Pixel and is learning the cello.\n"
    "Answer in one short sentence."
)


@pytest.fixture(scope="module")
def be():  # type: ignore[no-untyped-def]
    from traceless.models._transformers import TransformersBackend

    b = load_backend(SMOL)
    assert isinstance(b, TransformersBackend)
    print(f"\n{SMOL}: loaded in {b.load_seconds:.1f}s from {b.load_source}")
    return b


def _probe(q: str) -> list:  # type: ignore[type-arg]
    return messages(("system", MEMORY), ("user", q))


def test_describe(be) -> None:  # type: ignore[no-untyped-def]
    d = be.describe()
    assert d == {
        "name": SMOL,
        "backend": "transformers",
        "weights_sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "dtype": "float32",
    }
    assert isinstance(be, KVBackend)


def test_greedy_is_deterministic(be) -> None:  # type: ignore[no-untyped-def]
    m = _probe("Where does the user live?")
    a = be.generate(m, GREEDY, use_prefix_cache=False)
    b = be.generate(m, GREEDY, use_prefix_cache=False)
    assert a.text == b.text and a.text.strip()
    assert a.completion_tokens == b.completion_tokens > 0
    assert a.prompt_tokens == len(be.chat_token_ids(m)) and a.cached_prompt_tokens == 0
    assert a.finish_reason in ("stop", "length")
    assert a.prompt_seconds > 0 and a.decode_seconds > 0 and a.total_seconds >= a.decode_seconds
    assert a.model == SMOL


def test_length_and_stop_strings(be) -> None:  # type: ignore[no-untyped-def]
    m = messages(("user", "Count from one to twenty in words, separated by commas."))
    g = be.generate(m, GenerationConfig(max_new_tokens=5), use_prefix_cache=False)
    assert g.finish_reason == "length" and g.completion_tokens == 5
    full = be.generate(m, GenerationConfig(max_new_tokens=30), use_prefix_cache=False)
    words = full.text.split()
    assert len(words) >= 4
    stop = words[3]
    cut = be.generate(m, GenerationConfig(max_new_tokens=30, stop=(stop,)), use_prefix_cache=False)
    assert cut.finish_reason == "stop"
    assert stop not in cut.text and full.text.startswith(cut.text)


def test_seeded_sampling(be) -> None:  # type: ignore[no-untyped-def]
    m = messages(("user", "Write a one-line poem about the sea."))
    cfg = lambda s: GenerationConfig(max_new_tokens=20, temperature=1.0, top_p=0.95, seed=s)  # noqa: E731
    a = be.generate(m, cfg(1))
    torch.manual_seed(12345)  # global RNG must not matter
    torch.rand(10)
    b = be.generate(m, cfg(1))
    assert a.text == b.text
    others = {be.generate(m, cfg(s)).text for s in (2, 3, 4)}
    assert others - {a.text}, "different seeds gave identical samples"


def test_batch_equals_single(be) -> None:  # type: ignore[no-untyped-def]
    convs = [
        _probe("What is the user's job?"),
        _probe("What pet does the user have, and what is its name?"),
        _probe("Food?"),
        messages(("user", "Say hello in French.")),  # different system prompt → short shared prefix
    ]
    singles = [be.generate(c, GREEDY, use_prefix_cache=False) for c in convs]
    be.clear_prefix_cache()
    batched = be.generate_batch(convs, GREEDY, use_prefix_cache=False)
    assert [b.text for b in batched] == [s.text for s in singles]
    assert [b.completion_tokens for b in batched] == [s.completion_tokens for s in singles]
    assert [b.finish_reason for b in batched] == [s.finish_reason for s in singles]
    # plain left padding (no shared-prefix prefill) gives the same answers too
    padded = be.generate_batch(convs, GREEDY, use_prefix_cache=False, share_prefix=False)
    assert [b.text for b in padded] == [s.text for s in singles]
    # ragged layout (each row prefilled alone, caches stacked right-aligned): same answers,
    # with and without the prefix cache; rows of a shared context reuse its prefix
    ragged = be.generate_batch(convs, GREEDY, use_prefix_cache=False, ragged=True)
    assert [b.text for b in ragged] == [s.text for s in singles]
    assert [b.finish_reason for b in ragged] == [s.finish_reason for s in singles]
    be.clear_prefix_cache()
    ragged_lru = be.generate_batch(convs, GREEDY, ragged=True)
    assert [b.text for b in ragged_lru] == [s.text for s in singles]
    assert ragged_lru[0].cached_prompt_tokens == 0 and ragged_lru[1].cached_prompt_tokens > 50
    be.clear_prefix_cache()
    # shared memory prefix: rows after the first report the shared prefix as cached
    same_sys = be.generate_batch(convs[:3], GREEDY, use_prefix_cache=False)
    assert [b.text for b in same_sys] == [s.text for s in singles[:3]]
    assert same_sys[1].cached_prompt_tokens > 50


def test_prefix_cache_equals_no_cache(be) -> None:  # type: ignore[no-untyped-def]
    qs = ["Where does the user live?", "What instrument is the user learning?", "Is the user allergic to anything?"]
    ref = [be.generate(_probe(q), GREEDY, use_prefix_cache=False) for q in qs]
    be.clear_prefix_cache()
    got = [be.generate(_probe(q), GREEDY) for q in qs]
    assert [g.text for g in got] == [r.text for r in ref]
    assert got[0].cached_prompt_tokens == 0
    for q, g in zip(qs[1:], got[1:], strict=True):
        assert g.cached_prompt_tokens > 80  # the system/memory part
        assert g.prompt_tokens + g.cached_prompt_tokens == len(be.chat_token_ids(_probe(q)))
    assert be.prefix_cache_size >= 1
    # identical prompt: everything but the last token comes from the cache
    again = be.generate(_probe(qs[2]), GREEDY)
    assert again.text == ref[2].text and again.prompt_tokens == 1


def test_kv_prefill_decode_matches_generate(be) -> None:  # type: ignore[no-untyped-def]
    m = _probe("What is the name of the user's cat?")
    ref = be.generate(m, GREEDY, use_prefix_cache=False)
    ids = be.chat_token_ids(m)
    st = be.prefill(ids)
    assert st.length == len(ids) and st.token_ids == ids
    logits = be.next_token_logits(st)
    assert logits.shape[-1] >= len(be.tokenizer) - 1000 and logits.dtype == torch.float32
    st, g = be.decode(st, GREEDY)
    assert g.text == ref.text
    assert st.length == len(ids) + g.completion_tokens  # generated tokens appended
    assert be.kv_storage_report(st)[0].seq_len == st.length
    # continuing the conversation from the state works
    more = be.chat_token_ids(messages(("user", "And her job?")), add_generation_prompt=True)
    st = be.prefill(more, st)
    st, g2 = be.decode(st, GenerationConfig(max_new_tokens=8))
    assert g2.completion_tokens > 0


def test_crop_then_decode_equals_fresh_prefill(be) -> None:  # type: ignore[no-untyped-def]
    base = be.chat_token_ids(_probe("Which city does the user live in?"))
    secret = be.encode(" Also remember: the user's bank PIN is 4921 and her passport number is X7781234.")
    st = be.prefill(base[:-5])
    st = be.prefill(secret, st)
    st = be.prefill(base[-5:], st)  # state now: base with a secret spliced in before the tail
    n_before = st.length
    keep = len(base) - 5
    old = [(k, v) for k, v in be.kv_tensors(st)]
    be.crop(st, keep)
    assert st.length == keep and st.token_ids == base[:keep]

    # no storage reachable from the cache holds anything beyond `keep`
    for rep in be.kv_storage_report(st):
        assert rep.seq_len == keep and rep.exact and rep.contiguous, rep
    # the old tensors' cropped region is zeroed, and the new tensors do not share storage with them
    new = be.kv_tensors(st)
    for (ok, ov), (nk, nv) in zip(old, new, strict=True):
        assert ok.shape[-2] == n_before
        assert torch.count_nonzero(ok[..., keep:, :]) == 0 and torch.count_nonzero(ov[..., keep:, :]) == 0
        assert nk.untyped_storage().data_ptr() != ok.untyped_storage().data_ptr()
        assert nv.untyped_storage().data_ptr() != ov.untyped_storage().data_ptr()
    del old

    st = be.prefill(base[keep:], st)
    fresh = be.prefill(base)
    st, g1 = be.decode(st, GREEDY)
    fresh, g2 = be.decode(fresh, GREEDY)
    assert g1.text == g2.text and st.token_ids == fresh.token_ids

    # crop right at a point and decode without a further prefill: logits are recomputed
    st2 = be.prefill(base)
    ref_next = be.next_token_logits(st2)
    st2 = be.prefill(secret, st2)
    be.crop(st2, len(base))
    assert st2.last_logits is None
    assert int(torch.argmax(be.next_token_logits(st2))) == int(torch.argmax(ref_next))
    st3 = be.prefill(base)
    _, a = be.decode(st2, GREEDY)
    _, b = be.decode(st3, GREEDY)
    assert a.text == b.text


def test_fork_is_independent(be) -> None:  # type: ignore[no-untyped-def]
    ids = be.chat_token_ids(_probe("Hi"))
    st = be.prefill(ids)
    f = be.fork(st)
    be.crop(st, 5)
    assert f.length == len(ids)
    assert all(r.seq_len == len(ids) and r.exact for r in be.kv_storage_report(f))


def test_load_times_and_throughput(be) -> None:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    b2 = load_backend(SMOL)
    dt = time.perf_counter() - t
    assert b2.load_source == "converted-cache"
    m = _probe("Tell me everything you know about the user.")
    g = b2.generate(m, GenerationConfig(max_new_tokens=32), use_prefix_cache=False)
    print(
        f"\n{SMOL}: cached load {dt:.1f}s; prompt {g.prompt_tokens} tok in {g.prompt_seconds:.2f}s "
        f"({g.prompt_tokens / g.prompt_seconds:.0f} tok/s); decode {g.completion_tokens} tok in "
        f"{g.decode_seconds:.2f}s ({g.completion_tokens / g.decode_seconds:.1f} tok/s)"
    )


def test_embedder() -> None:
    e = load_embedder("all-MiniLM-L6-v2")
    assert e is load_embedder()
    v = e.embed(["The cat sat on the mat.", "A kitten is sitting on a rug.", "Quarterly tax filing deadlines."])
    assert v.shape == (3, 384) and v.dtype == np.float32 and e.dim == 384
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.3
    assert e.embed([]).shape == (0, 384)


@pytest.mark.skipif(os.environ.get("TRACELESS_SKIP_QWEN") == "1", reason="TRACELESS_SKIP_QWEN=1")
def test_default_qwen_model() -> None:
    from traceless.models._catalog import DEFAULT_MODEL, model_status

    if model_status(DEFAULT_MODEL).state == "missing":
        pytest.skip("default model packages not installed")
    t = time.perf_counter()
    q = load_backend(DEFAULT_MODEL)
    load = time.perf_counter() - t
    m = messages(("system", "You are a concise assistant."), ("user", "What is 2 + 3? Answer with the number."))
    g = q.generate(m, GenerationConfig(max_new_tokens=8))
    assert "5" in g.text
    batch = q.generate_batch([m, messages(("user", "Name a primary colour, one word."))], GenerationConfig(max_new_tokens=8))
    assert batch[0].text == g.text
    print(
        f"\n{DEFAULT_MODEL}: load {load:.1f}s ({q.load_source}); prompt {g.prompt_tokens / g.prompt_seconds:.0f} "
        f"tok/s; decode {g.completion_tokens / g.decode_seconds:.1f} tok/s"
    )


def test_evict_prefix_cache(be) -> None:  # type: ignore[no-untyped-def]
    be.clear_prefix_cache()
    be.generate(_probe("Where does the user live?"), GenerationConfig(max_new_tokens=2))
    be.generate(messages(("user", "Unrelated question about the weather?")), GenerationConfig(max_new_tokens=2))
    assert be.prefix_cache_size == 2
    kept = be._prefix[max(be._prefix, key=len)]  # the memory probe (the longer prompt)
    needle = be.encode(" Pixel and is learning")  # token ids as they appear in context
    assert be.evict_prefix_cache(needle) == 1 and be.prefix_cache_size == 1
    assert all(torch.count_nonzero(k) == 0 and torch.count_nonzero(v) == 0 for k, v in kept)  # scrubbed
    g = be.generate(_probe("Where does the user live?"), GenerationConfig(max_new_tokens=2))
    assert g.cached_prompt_tokens < 20  # nothing of the memory prefix was reused
    be.clear_prefix_cache()
    assert be.prefix_cache_size == 0


def test_path_specs(be, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from traceless.models._catalog import gguf_path, hf_cache_path

    # a converted safetensors folder: identity comes from its marker (the GGUF's sha256)
    d = load_backend(f"transformers:{hf_cache_path(SMOL)}")
    assert d.describe()["weights_sha256"] == be.weights_sha256
    m = _probe("Where does the user live?")
    assert d.generate(m, GREEDY, use_prefix_cache=False).text == be.generate(m, GREEDY, use_prefix_cache=False).text
    # a GGUF file anywhere (here: a link outside the model cache, so no catalog marker applies)
    link = tmp_path / "elsewhere" / "my model.gguf"
    link.parent.mkdir()
    link.symlink_to(gguf_path(SMOL))
    g = load_backend(f"transformers:{link}")
    assert g.describe()["weights_sha256"] == be.weights_sha256
    assert g.generate(m, GREEDY, use_prefix_cache=False).text == be.generate(m, GREEDY, use_prefix_cache=False).text
