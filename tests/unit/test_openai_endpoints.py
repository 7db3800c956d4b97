"""``openai:MODEL@URL1,URL2``: requests spread over two real loopback HTTP servers (stdlib
``http.server`` speaking the OpenAI chat API), a concurrency cap per server, and the
served weights' metadata in the identity; servers of different weights are refused."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _http import JsonHandler
from test_runner import ToyStudy  # noqa: F401  (registers the toy study)

from traceless.errors import BackendError
from traceless.models import GenerationConfig, load_backend, messages
from traceless.studies import read_manifest, read_rows, run_study

META = {"vocab_type": 2, "n_vocab": 49152, "n_ctx_train": 8192, "n_embd": 576, "n_params": 134515008,
        "size": 270274816}


class FakeServer:
    """A llama.cpp-shaped server: /v1/models (with ``meta`` and a fresh ``created``), /props,
    /v1/chat/completions echoing the last user message after ``delay`` seconds."""

    def __init__(self, meta: dict[str, Any], delay: float = 0.05) -> None:
        self.meta, self.delay = meta, delay
        self.chat_requests = 0
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(JsonHandler):

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if self.path == "/v1/models":
                    self._send({"object": "list", "data": [{"id": "smol", "object": "model", "created": time.time(),
                                                            "owned_by": "llamacpp", "meta": outer.meta}]})
                elif self.path == "/props":
                    self._send({"model_path": "/models/smol.gguf", "chat_template": "{{ messages }}",
                                "total_slots": 1})
                else:
                    self.send_error(404)

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer._lock:
                    outer.chat_requests += 1
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                time.sleep(outer.delay)
                with outer._lock:
                    outer.in_flight -= 1
                text = "value " + body["messages"][-1]["content"].split()[-1]
                self._send({"model": "smol", "choices": [{"message": {"role": "assistant", "content": text},
                                                          "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 2}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[FakeServer, FakeServer]]:
    a, b = FakeServer(META), FakeServer(META)
    yield a, b
    a.close()
    b.close()


def test_requests_spread_over_both_servers_within_the_cap(servers: tuple[FakeServer, FakeServer]) -> None:
    a, b = servers
    be = load_backend(f"openai:smol@{a.url},{b.url}", max_concurrency=2)
    assert be.max_concurrency == 4
    batch = [messages(("user", f"echo {i}")) for i in range(12)]
    gens = be.generate_batch(batch, GenerationConfig(max_new_tokens=4))
    assert [g.text for g in gens] == [f"value {i}" for i in range(12)]
    assert a.chat_requests + b.chat_requests == 12
    assert a.chat_requests >= 4 and b.chat_requests >= 4  # least-loaded: both take a fair share
    assert be.requests_per_endpoint == {a.url: a.chat_requests, b.url: b.chat_requests}  # type: ignore[attr-defined]
    assert a.max_in_flight <= 2 and b.max_in_flight <= 2
    be.close()


def test_identity_records_both_servers_and_the_served_weights(servers: tuple[FakeServer, FakeServer]) -> None:
    a, b = servers
    be = load_backend(f"openai:smol@{a.url},{b.url}")
    d = be.describe()
    assert d["base_urls"] == [a.url, b.url]
    assert d["served"]["models_entry"] == {"id": "smol", "owned_by": "llamacpp", "meta": META}
    assert d["served"]["props"]["model_file"] == "smol.gguf"
    assert len(d["served"]["props"]["chat_template_sha256"]) == 64
    assert be.describe() == d  # stable: `created` (the time of the request) is not part of it
    be.close()


def test_servers_of_different_weights_are_refused(servers: tuple[FakeServer, FakeServer]) -> None:
    a, _ = servers
    other = FakeServer({**META, "n_params": 360000000})
    try:
        be = load_backend(f"openai:smol@{a.url},{other.url}")
        with pytest.raises(BackendError, match="report different weights.*list only servers of the same weights"):
            be.describe()
        with pytest.raises(BackendError, match="lists a server twice"):
            load_backend(f"openai:smol@{a.url},{a.url}/")
    finally:
        other.close()


def test_a_study_run_on_two_servers_records_both(servers: tuple[FakeServer, FakeServer], tmp_path: Path) -> None:
    a, b = servers
    out = tmp_path / "run"
    s = run_study("toy-runner-test", out, model=f"openai:smol@{a.url},{b.url}", model_tag="smol", progress=False)
    assert s.finished and s.cells_run == 20
    assert a.chat_requests > 0 and b.chat_requests > 0
    ident = read_manifest(out).runs["smol"].identity
    assert ident["base_urls"] == [a.url, b.url] and ident["served"]["models_entry"]["meta"] == META
    assert {r.reply for r in read_rows(out)} == {f"value {r.seed % 1000}" for r in read_rows(out)}
