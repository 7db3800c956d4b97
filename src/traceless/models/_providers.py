"""Model names as people write them: ``provider/model`` (``openai/gpt-4o-mini``,
``ollama/llama3``, ``openrouter/meta-llama/llama-3.1-8b-instruct``).

Each provider maps onto the OpenAI-compatible backend with its conventional base URL and
API-key variable (the names LiteLLM and the providers' own docs use). ``resolve_provider``
only resolves (no network); ``load_backend`` builds the backend from the result. The key
and any base-URL override come from the ``Credentials`` the edge read from the environment
(``EngineOptions.credentials``); the key is never printed or stored in a results dir.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceless.errors import ConfigError
from traceless.registry import Registry

if TYPE_CHECKING:
    from traceless.models._options import Credentials

__all__ = ["Provider", "PROVIDERS", "ProviderTarget", "provider_variables", "resolve_provider", "split_provider"]


@dataclass(frozen=True)
class Provider:
    """An OpenAI-compatible API by its conventional name."""

    base_url: str
    """Default base URL (ends in the API version path, e.g. ``/v1``)."""
    key_env: str | None
    """Environment variable holding the API key (None: the server takes no key)."""
    key_required: bool = True
    """Whether a missing key is an error (hosted APIs) or fine (local servers)."""
    url_env: str | None = None
    """Environment variable that overrides the base URL, when the provider has one."""
    url_suffix: str = ""
    """Appended to ``url_env``'s value (``OLLAMA_HOST`` is a host, the API is under /v1)."""


PROVIDERS: Registry[Provider] = Registry("model provider", hint="write models as PROVIDER/MODEL, e.g. openai/gpt-4o-mini")


def _p(name: str, help: str, **kw: object) -> None:
    PROVIDERS.register(name, help=help)(Provider(**kw))  # type: ignore[arg-type]


_p("openai", "OpenAI API", base_url="https://api.openai.com/v1", key_env="OPENAI_API_KEY", url_env="OPENAI_BASE_URL")
_p("azure", "Azure OpenAI (set AZURE_OPENAI_ENDPOINT to .../openai/v1)", base_url="",
   key_env="AZURE_OPENAI_API_KEY", url_env="AZURE_OPENAI_ENDPOINT")
_p("anthropic", "Anthropic's OpenAI-compatible endpoint", base_url="https://api.anthropic.com/v1",
   key_env="ANTHROPIC_API_KEY")
_p("gemini", "Google Gemini's OpenAI-compatible endpoint",
   base_url="https://generativelanguage.googleapis.com/v1beta/openai", key_env="GEMINI_API_KEY")
_p("mistral", "Mistral AI", base_url="https://api.mistral.ai/v1", key_env="MISTRAL_API_KEY")
_p("groq", "Groq", base_url="https://api.groq.com/openai/v1", key_env="GROQ_API_KEY")
_p("together", "Together AI", base_url="https://api.together.xyz/v1", key_env="TOGETHER_API_KEY")
_p("fireworks", "Fireworks AI", base_url="https://api.fireworks.ai/inference/v1", key_env="FIREWORKS_API_KEY")
_p("deepseek", "DeepSeek", base_url="https://api.deepseek.com/v1", key_env="DEEPSEEK_API_KEY")
_p("openrouter", "OpenRouter (model ids contain a slash)", base_url="https://openrouter.ai/api/v1",
   key_env="OPENROUTER_API_KEY")
_p("ollama", "local Ollama server", base_url="http://localhost:11434/v1", key_env="OLLAMA_API_KEY",
   key_required=False, url_env="OLLAMA_HOST", url_suffix="/v1")
_p("lmstudio", "local LM Studio server", base_url="http://localhost:1234/v1", key_env="LM_STUDIO_API_KEY",
   key_required=False)
_p("vllm", "local vLLM server", base_url="http://localhost:8000/v1", key_env="VLLM_API_KEY", key_required=False,
   url_env="VLLM_BASE_URL")


@dataclass(frozen=True)
class ProviderTarget:
    """What a ``provider/model`` name resolves to (the key itself is not part of it)."""

    provider: str
    """Provider name."""
    model: str
    """Model id sent to the server (may contain slashes)."""
    base_url: str
    """Base URL of the OpenAI-compatible API."""
    key_env: str | None
    """Environment variable the key was read from."""
    api_key: str | None
    """The key (from the edge's ``Credentials``), or None."""


def split_provider(spec: str) -> tuple[str, str] | None:
    """``(provider, model)`` when ``spec`` is ``PROVIDER/MODEL`` with a known provider, else None."""
    head, sep, model = spec.partition("/")
    if not sep or head not in PROVIDERS:
        return None
    return head, model


def provider_variables() -> list[str]:
    """Every environment variable a registered provider reads (keys and base-URL overrides):
    what ``Credentials.from_env`` takes from the edge's environment."""
    names = [v for e in PROVIDERS.entries() for v in (e.obj.key_env, e.obj.url_env) if v]
    return list(dict.fromkeys(names))


def _base_url(p: Provider, name: str, credentials: Credentials) -> str:
    env = credentials.get(p.url_env)
    if env:
        url = env.rstrip("/")
        if not url.startswith(("http://", "https://")):
            url = f"http://{url}"  # OLLAMA_HOST is often host:port
        return url + (p.url_suffix if p.url_suffix and not url.endswith(p.url_suffix) else "")
    if not p.base_url:
        raise ConfigError(f"{name}/...: set ${p.url_env} to the API base URL")
    return p.base_url


def resolve_provider(spec: str, credentials: Credentials | None = None) -> ProviderTarget:
    """Resolve ``PROVIDER/MODEL`` (no network) with the key and base URL ``credentials`` hold.
    Fails with the fix when the model is empty or a hosted provider's key variable is unset."""
    from traceless.models._options import Credentials

    credentials = credentials or Credentials()
    split = split_provider(spec)
    if split is None:
        raise ConfigError(f"{spec!r} is not PROVIDER/MODEL; known providers: {', '.join(PROVIDERS.names())}")
    name, model = split
    if not model:
        raise ConfigError(f"{spec}: the model is missing; write {name}/MODEL, e.g. openai/gpt-4o-mini")
    p = PROVIDERS.get(name)
    key = credentials.get(p.key_env)
    if p.key_required and not key:
        raise ConfigError(f"{spec}: ${p.key_env} is not set; export {p.key_env}=... (the key is read from the "
                          "environment only and never written to results)")
    return ProviderTarget(provider=name, model=model, base_url=_base_url(p, name, credentials), key_env=p.key_env,
                          api_key=key or None)
