"""The fast audit path (issue #13 item 1): a served engine gets each phase's probes at once,
concurrently, and the rows are the same, in the same order, as one call at a time; the
engine's identity is in every row; the default model is served by llama.cpp when it can be.

The served model is the real ``ServedBackend`` (the ``llamacpp:`` backend's class) talking
to an in-process mock of the server's HTTP API that answers with the scripted ``_parrot``
replies after a delay that differs per prompt, so requests finish out of order.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_system_audit import GOLDEN, MODES, _parrot

from traceless.audit import SystemAuditConfig, audit_model, run_system_audit
from traceless.audit._system_audit import batch_size
from traceless.errors import ConfigError
from traceless.models import (
    CachingBackend,
    ChatMessage,
    EngineOptions,
    Generation,
    GenerationConfig,
    HashingEmbedder,
    ScriptedBackend,
)
from traceless.models import _load as load_mod
from traceless.models._llamacpp_server import LlamaCppServer
from traceless.models._served import ServedBackend
from traceless.systems import SystemRuntime

ROW_KEY = ("profile", "phase", "view", "level", "wording", "prompt", "reply", "extracted", "context_ids")


class _MockServer:
    """The chat-completions endpoint of a llama.cpp server, answering with ``_parrot``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        msgs = [ChatMessage(role=m["role"], content=m["content"]) for m in body["messages"]]
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        # a delay that differs per prompt (from its digest, so no test randomness): out of order
        time.sleep(hashlib.sha256(request.content).digest()[0] / 255 * 0.02)
        with self.lock:
            self.in_flight -= 1
        text = _parrot(msgs, GenerationConfig(max_new_tokens=body["max_tokens"]))
        return httpx.Response(200, json={
            "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": len(text.split())}})


def _served(tmp_path: Path, mock: _MockServer, parallel: int = 8) -> ServedBackend:
    gguf = tmp_path / "weights.gguf"
    gguf.write_bytes(b"GGUF")  # never loaded: the HTTP API is the mock
    server = LlamaCppServer(gguf, parallel=parallel)
    server._address = "http://127.0.0.1:9"  # as if started; every request goes to the mock transport
    return ServedBackend(server, weights_sha256="0" * 64, name="llamacpp:test", max_concurrency=parallel,
                         transport=httpx.MockTransport(mock))


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


CFG = SystemAuditConfig(system="traceless", system_config={"S": 1, "modes": list(MODES)}, model="scripted",
                        profiles=3)


def test_concurrent_engine_gives_the_same_rows_in_the_same_order(tmp_path: Path) -> None:
    mock = _MockServer()
    served = _served(tmp_path, mock)
    res = run_system_audit(CFG, SystemRuntime(CachingBackend(served), HashingEmbedder(), "scripted"), tmp_path / "c")
    seq = run_system_audit(CFG, SystemRuntime(CachingBackend(ScriptedBackend(_parrot)), HashingEmbedder(), "scripted"),
                           tmp_path / "s")
    assert mock.peak > 1  # requests really overlapped
    assert res.table == seq.table == GOLDEN["1"]["table"]
    assert res.copies == seq.copies
    conc, one = ([[r[k] for k in ROW_KEY] for r in _rows(tmp_path / d)] for d in ("c", "s"))
    assert conc == one
    # and the rows the plain pipeline recorded (the golden fixture), order included
    key = ROW_KEY[:-1]
    rows = [[r[k] for k in key] for r in _rows(tmp_path / "c")]
    assert hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest() == GOLDEN["1"]["rows_sha256"]


def test_a_served_engine_gets_each_phase_in_one_call(tmp_path: Path) -> None:
    class Recorded(CachingBackend):
        batches: list[int] = []

        def generate_batch(self, batch: list[list[ChatMessage]], config: GenerationConfig | None = None,
                           ) -> list[Generation]:
            self.batches.append(len(batch))
            return super().generate_batch(batch, config)

    model = Recorded(_served(tmp_path, _MockServer()))
    cfg = CFG.model_copy(update={"system_config": {"S": 1, "modes": ["noop", "full_purge"]}})
    run_system_audit(cfg, SystemRuntime(model, HashingEmbedder(), "scripted"), tmp_path / "o")
    # the write's 6 summaries (3 users x 2 sessions), then each phase whole in one call:
    # before, noop and full_purge (what the engine's generation cache has not answered yet;
    # phases run concurrently, so in any order)
    assert model.batches[0] == 6 and len(model.batches) == 4
    local = Recorded(ScriptedBackend(_parrot))
    local.batches = []
    run_system_audit(cfg, SystemRuntime(local, HashingEmbedder(), "scripted"), tmp_path / "l")
    # a local backend: 4 contexts' probes (12) per call at most, so more calls
    assert local.batches[0] == 6 and max(local.batches[1:]) <= 12 and len(local.batches) > 4


def test_engine_identity_is_in_every_row(tmp_path: Path) -> None:
    served = _served(tmp_path, _MockServer(), parallel=4)
    cfg = CFG.model_copy(update={"system_config": {"S": 1, "modes": ["noop", "full_purge"]}})
    run_system_audit(cfg, SystemRuntime(CachingBackend(served), HashingEmbedder(), "scripted"), tmp_path / "o")
    rows = _rows(tmp_path / "o")
    assert rows
    for r in rows:
        eng = r["model"]["engine"]
        assert (eng["name"], eng["package"], eng["parallel"], eng["cache_prompt"]) == ("llama.cpp", "xllamacpp", 4, True)
        assert eng["version"] and eng["version"] != "unknown"  # the installed wheel's version


def test_local_backends_keep_their_batches() -> None:
    # a transformers model's replies depend on its batch (padding): 4 contexts' probes per call
    assert batch_size(ScriptedBackend(default="x"), 27, 3) == 12
    assert batch_size(CachingBackend(ScriptedBackend(default="x")), 27, 3) == 12


def test_default_model_is_served_by_llamacpp_reproducibly(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    def load(spec: str, *, engine: EngineOptions, **kw: Any) -> ScriptedBackend:
        calls.append((spec, kw))
        return ScriptedBackend()

    monkeypatch.setattr(load_mod, "load_backend", load)
    monkeypatch.setattr(load_mod, "llamacpp_available", lambda: True)
    monkeypatch.setenv("TRACELESS_LLAMACPP_PARALLEL", "5")  # read at the edge only: no slots below it
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    # one slot, no prompt cache: each request computed alone, so reruns give the same rows
    assert audit_model("qwen2.5-coder-0.5b-instruct")[0] == "llamacpp:qwen2.5-coder-0.5b-instruct"
    assert calls[-1][1] == {"ctx": 4096, "parallel": 1, "cache_prompt": False}
    # mem0's long shared prompt: the server caches it for mem0's own calls; the probes opt out
    audit_model("qwen2.5-coder-0.5b-instruct", 16384)
    assert calls[-1][1] == {"ctx": 16384, "parallel": 1, "cache_prompt": True, "request_cache_prompt": False,
                            "max_concurrency": 1}
    # slots only when asked for (faster, not reproducible run to run)
    audit_model("smollm2-135m-instruct", engine=EngineOptions(parallel=3))
    assert calls[-1] == ("llamacpp:smollm2-135m-instruct", {"ctx": 4096, "parallel": 3})
    audit_model("qwen2.5-coder-0.5b-instruct", 16384, engine=EngineOptions(parallel=8))
    assert calls[-1][1] == {"ctx": 16384, "parallel": 2}
    # the KV engine when asked for, and the transformers engine when llama.cpp is not installed
    assert audit_model("transformers:qwen2.5-coder-0.5b-instruct")[0] == "transformers:qwen2.5-coder-0.5b-instruct"
    assert calls[-1][1] == {}
    monkeypatch.setattr(load_mod, "llamacpp_available", lambda: False)
    assert audit_model("qwen2.5-coder-0.5b-instruct")[0] == "qwen2.5-coder-0.5b-instruct"


def test_each_probe_query_is_embedded_once(tmp_path: Path) -> None:
    class Counting(HashingEmbedder):
        queries: list[str] = []

        def embed(self, texts: list[str]) -> Any:
            if len(texts) == 1:
                self.queries.append(texts[0])
            return super().embed(texts)

    emb = Counting()
    res = run_system_audit(CFG, SystemRuntime(CachingBackend(ScriptedBackend(_parrot)), emb, "scripted"),
                           tmp_path / "o")
    assert res.table == GOLDEN["1"]["table"]  # retrieval unchanged
    # 3 probes, asked for 3 users x up to 3 views x 9 phases (and texts a deletion re-embeds):
    # each text embedded once
    assert len(emb.queries) == len(set(emb.queries))
    assert "What is my private session token? Reply with the exact value." in emb.queries


def test_phases_run_concurrently_on_a_served_engine(tmp_path: Path) -> None:
    # two phases' probe batches must be in flight at the same time: each of the first two
    # waits for the other at a barrier, which one-phase-after-another never reaches
    barrier = threading.Barrier(2, timeout=20)
    met: list[str] = []

    class Meeting(CachingBackend):
        def generate_batch(self, batch: list[list[ChatMessage]], config: GenerationConfig | None = None,
                           ) -> list[Generation]:
            if threading.current_thread().name.startswith("audit-phase") and len(met) < 2:
                try:
                    barrier.wait()
                    met.append(threading.current_thread().name)
                except threading.BrokenBarrierError:
                    pass
            return super().generate_batch(batch, config)

    cfg = CFG.model_copy(update={"system_config": {"S": 1, "modes": ["noop", "full_purge"]}})
    res = run_system_audit(cfg, SystemRuntime(Meeting(_served(tmp_path, _MockServer())), HashingEmbedder(),
                                              "scripted"), tmp_path / "o")
    assert len(set(met)) == 2
    seq = run_system_audit(cfg, SystemRuntime(CachingBackend(ScriptedBackend(_parrot)), HashingEmbedder(),
                                              "scripted"), tmp_path / "s")
    assert res.table == seq.table and res.copies == seq.copies


def test_concurrent_identical_calls_share_one_generation() -> None:
    calls: list[str] = []
    started = threading.Event()

    def slow(msgs: list[ChatMessage], cfg: GenerationConfig) -> str:
        calls.append(msgs[-1].content)
        started.set()
        time.sleep(0.3)  # the second thread asks while this one generates
        return "reply to " + msgs[-1].content

    cache = CachingBackend(ScriptedBackend(slow))
    msgs = [ChatMessage(role="user", content="same prompt")]
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(cache.generate(msgs).text))
    t.start()
    started.wait(10)
    assert cache.generate_batch([msgs, [ChatMessage(role="user", content="other")]])[0].text == "reply to same prompt"
    t.join()
    assert out == ["reply to same prompt"]
    assert sorted(calls) == ["other", "same prompt"]  # one generation of the shared prompt, not two
    assert (cache.hits, cache.misses) == (1, 2)


def test_a_failed_generation_lets_the_waiting_call_generate_it() -> None:
    calls: list[str] = []
    started = threading.Event()

    def flaky(msgs: list[ChatMessage], cfg: GenerationConfig) -> str:
        calls.append(msgs[-1].content)
        if len(calls) == 1:
            started.set()
            time.sleep(0.3)
            raise RuntimeError("server went away")
        return "ok"

    cache = CachingBackend(ScriptedBackend(flaky))
    msgs = [ChatMessage(role="user", content="p")]
    errors: list[BaseException] = []

    def first() -> None:
        try:
            cache.generate(msgs)
        except RuntimeError as e:
            errors.append(e)

    t = threading.Thread(target=first)
    t.start()
    started.wait(10)
    assert cache.generate(msgs).text == "ok"  # waited for the failed one, then generated it itself
    t.join()
    assert len(errors) == 1 and calls == ["p", "p"]


def test_the_prompt_cache_is_off_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A llama.cpp server reuses cached prefixes only when asked: with the cache a reply
    depends on the request served before it, so a resumed run would differ."""
    monkeypatch.setenv("TRACELESS_LLAMACPP_PROMPT_CACHE", "1")  # read at the edge only, never here
    assert load_mod._prompt_cache(None, 1) is False
    assert load_mod._prompt_cache(True, 1) is True and load_mod._prompt_cache(False, 8) is False
    assert load_mod._prompt_cache(None, 8) is True  # the opt-in slots: not reproducible anyway
    # the edge: the variable becomes EngineOptions.prompt_cache, which the factory passes as `asked`
    assert EngineOptions.from_env({"TRACELESS_LLAMACPP_PROMPT_CACHE": "1"}).prompt_cache is True
    assert EngineOptions.from_env({"TRACELESS_LLAMACPP_PROMPT_CACHE": "0"}).prompt_cache is False
    with pytest.raises(ConfigError, match="TRACELESS_LLAMACPP_PROMPT_CACHE='maybe': use 1"):
        EngineOptions.from_env({"TRACELESS_LLAMACPP_PROMPT_CACHE": "maybe"})


def test_every_request_says_whether_it_may_use_the_prompt_cache(tmp_path: Path) -> None:
    """The backend's own setting goes with each request, whatever the server's default: a
    server started with the cache for mem0's calls still computes the audit's probes alone."""
    seen: list[object] = []
    mock = _MockServer()

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content).get("cache_prompt"))
        return mock(request)

    gguf = tmp_path / "weights.gguf"
    gguf.write_bytes(b"GGUF")
    server = LlamaCppServer(gguf, parallel=1, cache_prompt=True)
    server._address = "http://127.0.0.1:9"
    be = ServedBackend(server, weights_sha256="0" * 64, name="llamacpp:test", cache_prompt=False,
                       transport=httpx.MockTransport(record))
    be.generate([ChatMessage(role="user", content="hi")])
    eng = be.describe()["engine"]
    assert seen == [False] and eng["cache_prompt"] is False and eng["server_cache_prompt"] is True
    plain = ServedBackend(server, weights_sha256="0" * 64, name="llamacpp:test", transport=httpx.MockTransport(record))
    plain.generate([ChatMessage(role="user", content="hi")])
    assert seen == [False, True] and "server_cache_prompt" not in plain.describe()["engine"]
