"""OpenAIBackend request building, response parsing, retries and error messages,
against httpx.MockTransport (the real-server evidence is tests/integration)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest

from traceless.errors import BackendError
from traceless.models._base import GenerationConfig, messages
from traceless.models._openai import OpenAIBackend, OpenAIEmbedder

KEY = "sk-test-SECRET-123"
BASE = "http://llm.test:8000/v1"
MSG = messages(("system", "be brief"), ("user", "hi"))

Handler = Callable[[httpx.Request], httpx.Response]


def ok(content: str | None = "hello", usage: dict[str, Any] | None = None, **extra: Any) -> httpx.Response:
    body: dict[str, Any] = {
        "id": "x",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
    }
    if usage is not None:
        body["usage"] = usage
    body.update(extra)
    return httpx.Response(200, json=body)


def backend(handler: Handler, **kw: Any) -> OpenAIBackend:
    kw.setdefault("backoff", 0.0)
    return OpenAIBackend("m", BASE, api_key=KEY, transport=httpx.MockTransport(handler), **kw)


def test_request_shape_and_parse() -> None:
    seen: list[httpx.Request] = []

    def h(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return ok(
            "Hello there",
            usage={
                "prompt_tokens": 20,
                "completion_tokens": 3,
                "prompt_tokens_details": {"cached_tokens": 8},
            },
            timings={"prompt_ms": 120.0, "predicted_ms": 30.0},
        )

    b = backend(h)
    g = b.generate(MSG, GenerationConfig(max_new_tokens=7, temperature=0.5, top_p=0.9, seed=3, stop=("END",)))
    req = seen[0]
    assert str(req.url) == BASE + "/chat/completions"
    assert req.method == "POST"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(req.content)
    assert body == {
        "model": "m",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "max_tokens": 7,
        "temperature": 0.5,
        "top_p": 0.9,
        "stream": False,
        "seed": 3,
        "stop": ["END"],
    }
    assert g.text == "Hello there"
    assert (g.prompt_tokens, g.cached_prompt_tokens, g.completion_tokens) == (12, 8, 3)
    assert g.prompt_seconds == pytest.approx(0.12) and g.decode_seconds == pytest.approx(0.03)
    assert g.total_seconds > 0 and g.finish_reason == "stop" and g.model == "m"
    assert b.usage_missing == 0


def test_greedy_default_omits_seed_and_stop() -> None:
    bodies: list[dict[str, Any]] = []

    def h(req: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(req.content))
        return ok(usage={"prompt_tokens": 1, "completion_tokens": 1})

    backend(h).generate(MSG)
    assert bodies[0]["temperature"] == 0.0 and "seed" not in bodies[0] and "stop" not in bodies[0]


def test_missing_usage_falls_back_to_zero_and_is_marked(caplog: pytest.LogCaptureFixture) -> None:
    b = backend(lambda req: ok("x"))
    with caplog.at_level(logging.WARNING, logger="traceless.models._openai"):
        g1 = b.generate(MSG)
        g2 = b.generate(MSG)
    assert (g1.prompt_tokens, g1.completion_tokens, g2.completion_tokens) == (0, 0, 0)
    assert b.usage_missing == 2
    assert sum("no usage token counts" in r.message for r in caplog.records) == 1


def test_null_content_stop_string_and_length() -> None:
    b = backend(lambda req: ok(None, usage={"prompt_tokens": 1, "completion_tokens": 0}))
    assert b.generate(MSG).text == ""

    def h(req: httpx.Request) -> httpx.Response:
        r = ok("abc STOP def", usage={"prompt_tokens": 1, "completion_tokens": 4})
        body = json.loads(r.content)
        body["choices"][0]["finish_reason"] = "length"
        return httpx.Response(200, json=body)

    g = backend(h).generate(MSG, GenerationConfig(stop=("STOP",)))
    assert g.text == "abc " and g.finish_reason == "length"


def test_describe_and_repr_never_show_the_key() -> None:
    b = backend(lambda req: ok())
    d = b.describe()
    assert d == {"name": "m", "backend": "openai", "base_url": BASE, "model": "m", "served": None}
    assert KEY not in repr(b) and KEY not in json.dumps(d) and KEY not in str(vars(b))


@pytest.mark.parametrize(
    ("status", "body", "server_msg", "hint"),
    [
        (
            401,
            {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}},
            "Incorrect API key provided",
            "API key",
        ),
        (404, {"error": {"message": "model 'nope' not found"}}, "model 'nope' not found", "base URL"),
        (
            404,
            {"error": 'model "nope" not found, try pulling it first'},
            "try pulling it first",
            "model name",
        ),
        (
            400,
            {"object": "error", "message": "max_tokens is too large", "type": "BadRequestError"},
            "max_tokens is too large",
            "model name",
        ),
        (
            422,
            {"detail": [{"loc": ["body", "messages"], "msg": "field required"}]},
            "field required",
            "API key",
        ),
        (400, "plain text failure", "plain text failure", "base URL"),
    ],
)
def test_4xx_errors_show_status_server_message_and_fix(
    status: int, body: Any, server_msg: str, hint: str
) -> None:
    calls = []

    def h(req: httpx.Request) -> httpx.Response:
        calls.append(1)
        if isinstance(body, str):
            return httpx.Response(status, text=body)
        return httpx.Response(status, json=body)

    with pytest.raises(BackendError) as ei:
        backend(h).generate(MSG)
    msg = str(ei.value)
    assert f"HTTP {status}" in msg and server_msg in msg and hint in msg
    assert BASE in msg and KEY not in msg
    assert len(calls) == 1  # 4xx (other than 429) is never retried


def test_5xx_is_retried_then_succeeds(caplog: pytest.LogCaptureFixture) -> None:
    n = {"calls": 0}

    def h(req: httpx.Request) -> httpx.Response:
        n["calls"] += 1
        if n["calls"] < 3:
            return httpx.Response(503, json={"error": {"message": "Loading model"}})
        return ok("fine", usage={"prompt_tokens": 1, "completion_tokens": 1})

    with caplog.at_level(logging.WARNING):
        assert backend(h, max_retries=3).generate(MSG).text == "fine"
    assert n["calls"] == 3
    assert all(KEY not in r.getMessage() for r in caplog.records)


def test_5xx_retries_are_bounded() -> None:
    n = {"calls": 0}

    def h(req: httpx.Request) -> httpx.Response:
        n["calls"] += 1
        return httpx.Response(500, json={"error": {"message": "boom"}})

    with pytest.raises(BackendError, match=r"server error: HTTP 500 .*boom"):
        backend(h, max_retries=2).generate(MSG)
    assert n["calls"] == 3


def test_backoff_grows() -> None:
    times: list[float] = []

    def h(req: httpx.Request) -> httpx.Response:
        times.append(time.perf_counter())
        return httpx.Response(502, text="bad gateway")

    with pytest.raises(BackendError, match="HTTP 502"):
        backend(h, max_retries=2, backoff=0.05).generate(MSG)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps[0] >= 0.045 and gaps[1] >= 0.095


def test_connection_refused_message() -> None:
    def h(req: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=req)

    with pytest.raises(BackendError, match=r"is the server running at http://llm\.test:8000/v1\?"):
        backend(h, max_retries=1).generate(MSG)


def test_read_timeout_is_not_retried() -> None:
    n = {"calls": 0}

    def h(req: httpx.Request) -> httpx.Response:
        n["calls"] += 1
        raise httpx.ReadTimeout("timed out", request=req)

    with pytest.raises(BackendError, match="timed out after .*Raise timeout"):
        backend(h).generate(MSG)
    assert n["calls"] == 1


def test_non_json_and_shapeless_responses() -> None:
    with pytest.raises(BackendError, match="not JSON.*OpenAI-compatible"):
        backend(lambda req: httpx.Response(200, text="<html>welcome</html>")).generate(MSG)
    with pytest.raises(BackendError, match="no choices"):
        backend(lambda req: httpx.Response(200, json={"foo": 1})).generate(MSG)


def test_bad_base_url() -> None:
    with pytest.raises(BackendError, match="must start with http"):
        OpenAIBackend("m", "localhost:8080/v1")


def test_generate_batch_is_concurrent_bounded_and_ordered() -> None:
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def h(req: httpx.Request) -> httpx.Response:
        text = json.loads(req.content)["messages"][-1]["content"]
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.02 * (int(text) % 3))  # finish out of order
        with lock:
            state["now"] -= 1
        return ok(f"echo {text}", usage={"prompt_tokens": 1, "completion_tokens": 2})

    b = backend(h, max_concurrency=3)
    batch = [messages(("user", str(i))) for i in range(10)]
    out = b.generate_batch(batch)
    assert [g.text for g in out] == [f"echo {i}" for i in range(10)]
    assert 1 < state["peak"] <= 3


def test_generate_batch_raises_first_failure() -> None:
    def h(req: httpx.Request) -> httpx.Response:
        text = json.loads(req.content)["messages"][-1]["content"]
        if text == "2":
            return httpx.Response(400, json={"error": {"message": "bad prompt 2"}})
        return ok(text)

    with pytest.raises(BackendError, match="bad prompt 2"):
        backend(h).generate_batch([messages(("user", str(i))) for i in range(4)])


def test_embedder() -> None:
    def h(req: httpx.Request) -> httpx.Response:
        assert str(req.url) == BASE + "/embeddings"
        body = json.loads(req.content)
        data = [{"index": i, "embedding": [float(len(t)), 0.0, 0.0]} for i, t in enumerate(body["input"])]
        return httpx.Response(200, json={"data": list(reversed(data)), "model": "e"})

    e = OpenAIEmbedder("e", BASE, api_key=KEY, batch_size=2, transport=httpx.MockTransport(h))
    v = e.embed(["a", "bb", "ccc"])
    assert v.shape == (3, 3) and v.dtype == np.float32 and e.dim == 3
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0)
    assert KEY not in repr(e) and KEY not in json.dumps(e.describe())
