"""``provider/model`` names → the OpenAI-compatible backend (resolution only, no network:
requests go to an in-process httpx.MockTransport)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from traceless.errors import ConfigError, UnknownNameError
from traceless.models import ChatMessage, Credentials, EngineOptions
from traceless.models._load import load_backend
from traceless.models._openai import OpenAIBackend
from traceless.models._providers import PROVIDERS, resolve_provider, split_provider


def creds(**env: str) -> Credentials:
    """The credentials an edge reads from an environment holding ``env``."""
    return Credentials.from_env(env)


def engine(**env: str) -> EngineOptions:
    return EngineOptions(credentials=creds(**env))


KEYS = [p.key_env for p in (PROVIDERS.get(n) for n in PROVIDERS.names()) if p.key_env]
URLS = ["OPENAI_BASE_URL", "OLLAMA_HOST", "VLLM_BASE_URL", "AZURE_OPENAI_ENDPOINT"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for v in [*KEYS, *URLS]:
        monkeypatch.delenv(v, raising=False)


@pytest.mark.parametrize(("spec", "model", "url", "key_env"), [
    ("openai/gpt-4o-mini", "gpt-4o-mini", "https://api.openai.com/v1", "OPENAI_API_KEY"),
    ("ollama/llama3", "llama3", "http://localhost:11434/v1", "OLLAMA_API_KEY"),
    ("openrouter/meta-llama/llama-3.1-8b-instruct", "meta-llama/llama-3.1-8b-instruct",
     "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    ("groq/llama-3.1-8b-instant", "llama-3.1-8b-instant", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    ("mistral/mistral-small-latest", "mistral-small-latest", "https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
    ("together/Qwen/Qwen2.5-7B-Instruct-Turbo", "Qwen/Qwen2.5-7B-Instruct-Turbo", "https://api.together.xyz/v1",
     "TOGETHER_API_KEY"),
    ("vllm/Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", "http://localhost:8000/v1", "VLLM_API_KEY"),
])
def test_resolution(spec: str, model: str, url: str, key_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = resolve_provider(spec, creds(**{key_env: "k-123"}))
    assert (t.model, t.base_url, t.key_env, t.api_key) == (model, url, key_env, "k-123")
    seen: list[httpx.Request] = []

    def listing(req: httpx.Request) -> httpx.Response:  # describe() asks the server what it serves
        seen.append(req)
        return httpx.Response(200, json={"object": "list", "data": [{"id": model, "object": "model"}]})

    b = load_backend(spec, engine=engine(**{key_env: "k-123"}), transport=httpx.MockTransport(listing))
    assert isinstance(b, OpenAIBackend) and (b.model, b.base_url, b.name) == (model, url, spec)
    ident = json.dumps(b.describe())
    assert "k-123" not in ident and model in ident  # the key never reaches a manifest
    assert str(seen[0].url) == f"{url}/models" and seen[0].headers["authorization"] == "Bearer k-123"


def test_local_servers_need_no_key_and_honour_host(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_provider("ollama/llama3").api_key is None
    assert resolve_provider("ollama/llama3", creds(OLLAMA_HOST="10.1.2.3:11434")).base_url == "http://10.1.2.3:11434/v1"
    c = creds(OPENAI_BASE_URL="http://127.0.0.1:8080/v1/", OPENAI_API_KEY="x")
    assert resolve_provider("openai/gpt-4o-mini", c).base_url == "http://127.0.0.1:8080/v1"


def test_credentials_are_read_at_the_edge_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the edge the environment is not consulted: a key in the environment reaches the
    backend through the edge's ``Credentials`` (the API's ``engine_options``), never by itself."""
    from traceless._api import engine_options

    monkeypatch.setenv("GROQ_API_KEY", "gsk-env")
    with pytest.raises(ConfigError, match="GROQ_API_KEY is not set"):
        resolve_provider("groq/llama-3.1-8b-instant")
    e = engine_options()
    assert resolve_provider("groq/llama-3.1-8b-instant", e.credentials).api_key == "gsk-env"
    shown = f"{e!r} {e} {e.model_dump_json()} {e.credentials!r}"
    assert "gsk-env" not in shown and "credentials" not in e.model_dump()


def test_errors_say_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"\$OPENAI_API_KEY is not set; export OPENAI_API_KEY="):
        load_backend("openai/gpt-4o-mini")
    with pytest.raises(ConfigError, match="the model is missing"):
        resolve_provider("ollama/")
    with pytest.raises(ConfigError, match="AZURE_OPENAI_ENDPOINT"):
        resolve_provider("azure/gpt-4o", creds(AZURE_OPENAI_API_KEY="x"))
    with pytest.raises(UnknownNameError, match="PROVIDER/MODEL .*ollama"):
        load_backend("nosuchprovider/model")
    assert split_provider("hf:Qwen/Qwen2.5-0.5B") is None and split_provider("gpt-4o-mini") is None


def test_key_sent_as_bearer_to_the_conventional_url(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": "hi"},
                                                      "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 3, "completion_tokens": 1}})

    b = load_backend("groq/llama-3.1-8b-instant", engine=engine(GROQ_API_KEY="gsk-test"),
                     transport=httpx.MockTransport(handler))
    assert b.generate([ChatMessage(role="user", content="hello")]).text == "hi"
    (req,) = seen
    assert str(req.url) == "https://api.groq.com/openai/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer gsk-test"
    assert json.loads(req.content)["model"] == "llama-3.1-8b-instant"
