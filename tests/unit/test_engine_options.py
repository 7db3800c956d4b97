"""Engine options as one typed value (issue #25 item 3): the CLI's options and their environment
bindings become one ``EngineOptions`` at the edge, which reaches the backend factory; the
options that change a reply are in the model identity, the defaults leave it as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from traceless.errors import ConfigError
from traceless.models import (
    BACKENDS,
    ENGINE_ENV,
    CachingBackend,
    Credentials,
    EngineOptions,
    ModelBackend,
    ScriptedBackend,
    call_key,
    load_backend,
    messages,
)
from traceless.models._llamacpp_server import LlamaCppServer


class _Reached(ConfigError):
    """Raised by the recording factory: the command got as far as building the backend."""


SEEN: list[EngineOptions] = []


@BACKENDS.register("engine-probe", help="test only: records the engine options it is built with")
def _probe(arg: str, *, engine: EngineOptions, **kw: Any) -> ModelBackend:
    SEEN.append(engine)
    raise _Reached("engine-probe: built")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    SEEN.clear()
    for var in ENGINE_ENV.values():
        monkeypatch.delenv(var, raising=False)


def _cli(*args: str) -> EngineOptions:
    from traceless.cli import main

    SEEN.clear()
    with pytest.raises(SystemExit) as e:
        main(list(args))
    assert e.value.code == 2 and len(SEEN) == 1  # stopped by the factory, after it got the options
    return SEEN[0]


def _audit(tmp_path: Path, *opts: str) -> EngineOptions:
    return _cli("audit", "--model", "engine-probe:x", "--embedder", "hashing", "--out", str(tmp_path / "a"), *opts)


def test_cli_options_reach_the_backend_as_engine_options(tmp_path: Path) -> None:
    e = _audit(tmp_path, "--parallel", "3", "--no-prompt-cache", "--threads", "2", "--timeout", "60",
               "--context", "2048", "--speculation", "ngram-map-k:8")
    assert e == EngineOptions(parallel=3, prompt_cache=False, threads=2, timeout=60.0, context=2048,
                              speculation="ngram-map-k:8")
    assert _audit(tmp_path) == EngineOptions()  # nothing given, nothing set: every engine default


def test_environment_bindings_reach_the_backend_and_an_option_wins(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELESS_LLAMACPP_PARALLEL", "5")
    monkeypatch.setenv("TRACELESS_NUM_THREADS", "3")
    monkeypatch.setenv("TRACELESS_LLAMACPP_PROMPT_CACHE", "1")
    monkeypatch.setenv("TRACELESS_LLAMACPP_TIMEOUT", "30")
    monkeypatch.setenv("GROQ_API_KEY", "gsk-edge")
    e = _audit(tmp_path)
    assert (e.parallel, e.threads, e.prompt_cache, e.timeout) == (5, 3, True, 30.0)
    assert e.credentials.get("GROQ_API_KEY") == "gsk-edge"  # the provider key, read at the edge too
    assert _audit(tmp_path, "--parallel", "2").parallel == 2


def test_study_run_passes_the_same_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import test_runner  # noqa: F401 - registers the toy study

    monkeypatch.setenv("TRACELESS_LLAMACPP_PARALLEL", "4")
    e = _cli("study", "run", "toy-runner-test", "--model", "engine-probe:x", "--out", str(tmp_path / "s"),
             "--no-progress", "--threads", "1")
    assert (e.parallel, e.threads) == (4, 1)


def test_a_bad_environment_value_is_named_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.cli import main

    monkeypatch.setenv("TRACELESS_LLAMACPP_PARALLEL", "many")
    with pytest.raises(SystemExit) as e:
        main(["audit", "--model", "engine-probe:x", "--embedder", "hashing", "--out", str(tmp_path / "a")])
    assert e.value.code == 2 and not SEEN and not (tmp_path / "a").exists()
    assert "TRACELESS_LLAMACPP_PARALLEL" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"TRACELESS_LLAMACPP_TIMEOUT='soon': use seconds"):
        EngineOptions.from_env({"TRACELESS_LLAMACPP_TIMEOUT": "soon"})
    with pytest.raises(ConfigError, match=r"parallel \(\$TRACELESS_LLAMACPP_PARALLEL\)"):
        EngineOptions.from_env({"TRACELESS_LLAMACPP_PARALLEL": "0"})


def _served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine: EngineOptions) -> ModelBackend:
    """``load_backend('llamacpp:FILE', engine=...)`` with the server's start faked (no process)."""
    gguf = tmp_path / "w.gguf"
    gguf.write_bytes(b"GGUF")

    def start(self: LlamaCppServer) -> LlamaCppServer:
        self._address = "http://127.0.0.1:9"
        return self

    monkeypatch.setattr(LlamaCppServer, "start", start)
    monkeypatch.setattr(LlamaCppServer, "stop", lambda self: None)
    return load_backend(f"llamacpp:{gguf}", engine=engine)


def test_the_identity_records_non_default_options_and_not_the_defaults(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    plain = _served(monkeypatch, tmp_path, EngineOptions(threads=1, timeout=5.0)).describe()
    # the defaults: the identity as before these options existed (one slot, no cache, no extras)
    assert set(plain) == {"name", "backend", "weights_sha256", "gguf", "engine"}
    assert set(plain["engine"]) == {"name", "package", "version", "parallel", "cache_prompt"}
    assert (plain["engine"]["parallel"], plain["engine"]["cache_prompt"]) == (1, False)
    assert plain == _served(monkeypatch, tmp_path, EngineOptions(threads=2)).describe()  # threads change no reply

    tuned = _served(monkeypatch, tmp_path, EngineOptions(parallel=3, prompt_cache=False, context=2048,
                                                         speculation="ngram-map-k:8")).describe()
    assert tuned["parallel"] == 3 and tuned["engine"]["parallel"] == 3
    assert tuned["engine"]["cache_prompt"] is False and tuned["engine"]["context"] == 2048
    assert tuned["engine"]["speculation"] == {"type": "ngram-map-k", "draft_max": 8, "ngram_size": 3}
    msgs = messages(("user", "hi"))
    assert call_key(plain, msgs, _cfg()) != call_key(tuned, msgs, _cfg())  # another generation-cache key


def _cfg() -> Any:
    from traceless.models import GenerationConfig

    return GenerationConfig()


def test_served_capabilities_pass_through_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    be = _served(monkeypatch, tmp_path, EngineOptions(parallel=2))
    for m in (be, CachingBackend(be), CachingBackend(CachingBackend(be))):
        assert (m.slots(), m.concurrency(), m.uncached()) == (2, 4, be)
        ep = m.endpoint()
        assert ep is not None and ep.base_url == "http://127.0.0.1:9/v1" and ep.model == "w"
    local = ScriptedBackend(default="x")
    assert (CachingBackend(local).slots(), CachingBackend(local).endpoint(), CachingBackend(local).concurrency()) == (
        None, None, 1)


def test_the_api_reads_the_environment_at_its_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    from traceless._api import engine_options

    monkeypatch.setenv("TRACELESS_LLAMACPP_PARALLEL", "6")
    assert engine_options().parallel == 6
    assert engine_options(parallel=2).parallel == 2
    given = EngineOptions(parallel=1)
    assert engine_options(given) is given


def test_mem0_finds_the_served_model_through_the_caches_by_its_declared_endpoint(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from traceless.models._openai import OpenAIBackend
    from traceless.systems._mem0 import _openai_endpoint

    be = _served(monkeypatch, tmp_path, EngineOptions())
    assert _openai_endpoint(CachingBackend(CachingBackend(be))) == ("http://127.0.0.1:9/v1", "w", "local")
    remote = OpenAIBackend("gpt-x", "http://127.0.0.1:8/v1", api_key="sk-real")
    assert _openai_endpoint(CachingBackend(remote)) == ("http://127.0.0.1:8/v1", "gpt-x", "sk-real")
    assert "sk-real" not in repr(remote.endpoint())
    with pytest.raises(ConfigError, match="calls its LLM over the OpenAI API"):
        _openai_endpoint(CachingBackend(ScriptedBackend(default="x")))


def test_a_studys_own_models_get_the_engine_options_of_the_edge(tmp_path: Path) -> None:
    """A judge or selector the study loads itself (``load_backend(cfg.judge, engine=ctx.engine)``)
    gets the run's engine options, credentials included (before: ``ctx`` had none, so a hosted
    judge found no API key although the CLI had read it)."""
    from pydantic import BaseModel

    from traceless.models import ChatMessage, GenerationConfig, ScriptedBackend
    from traceless.studies import Cell, CellResult, RunContext, Study, run_study

    seen: list[object] = []

    class _Cfg(BaseModel):
        """One cell."""

        seed: int = 0
        """Seed."""

    class _EngineStudy(Study[_Cfg]):
        name = "engine-ctx-test"
        version = "1"
        config_cls = _Cfg

        def cells(self, config: _Cfg) -> list[Cell]:
            return [Cell(key="only", group="g", params={}, seed=0)]

        def run_group(self, ctx: RunContext[_Cfg], cells: list[Cell]):  # type: ignore[no-untyped-def]
            seen.append(ctx.engine)
            g = ctx.generate_batch([[ChatMessage(role="user", content="hi")]], GenerationConfig(max_new_tokens=4))[0]
            yield CellResult(key="only", reply=g.text, metrics={"n": 1})

    engine = EngineOptions(threads=1, credentials=Credentials.from_env({"OPENAI_API_KEY": "sk-test-not-a-key"}))
    run_study(_EngineStudy(), tmp_path / "run", backend=ScriptedBackend(["ok"]), model_tag="s", progress=False,
              backend_options={"engine": engine})
    assert seen == [engine]


def test_the_audit_server_is_a_preset_of_the_engine_options() -> None:
    """The audit's engine policy (slot context, KV budget, slots and prompt cache) is one
    declared preset of ``EngineOptions``, the settings ``audit_model`` starts the server with."""
    from traceless.models import ServerPreset
    from traceless.models._options import AUDIT_KV_TOKENS, AUDIT_SLOT_CONTEXT

    assert EngineOptions().audit_server() == ServerPreset(AUDIT_SLOT_CONTEXT, 1, cache_prompt=False)
    assert EngineOptions(prompt_cache=True).audit_server(100).kwargs() == {"ctx": 4096, "parallel": 1,
                                                                           "cache_prompt": True}
    assert EngineOptions().audit_server(16384) == ServerPreset(16384, 1, cache_prompt=True,
                                                               request_cache_prompt=False, max_concurrency=1)
    assert EngineOptions(parallel=8).audit_server(16384).kwargs() == {"ctx": 16384, "parallel": AUDIT_KV_TOKENS // 16384}
    assert EngineOptions(parallel=3, context=2048).audit_server().kwargs() == {"ctx": 2048, "parallel": 3}
