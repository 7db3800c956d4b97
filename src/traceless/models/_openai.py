"""Backend for any OpenAI-compatible chat completions endpoint: OpenAI, Ollama
(``http://localhost:11434/v1``), vLLM, llama.cpp's server (see ``LlamaCppServer``).

One ``POST {base_url}/chat/completions`` per conversation, non-streaming. Connection
errors, 429 and 5xx are retried a few times with exponential backoff; every other
failure becomes a :class:`~traceless.errors.BackendError` that says what the server
said and what to check. The API key is sent as a bearer token and never appears in
``repr``, ``describe()``, logs or error messages.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
from pydantic import SecretStr

from traceless.errors import BackendError
from traceless.models._base import ChatMessage, Generation, GenerationConfig, ModelBackend
from traceless.models._embedder import Embedder, FloatArray

if TYPE_CHECKING:
    from traceless.models._options import Endpoint

__all__ = ["OpenAIBackend", "OpenAIEmbedder"]

log = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def _server_message(resp: httpx.Response) -> str:
    """The error text a server put in its body (OpenAI, llama.cpp, Ollama, vLLM shapes)."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str) and err:
            return err
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    text = resp.text.strip()
    if len(text) > 500:
        text = text[:500] + "…"
    return text or "(empty body)"


def _hint(status: int) -> str:
    if status in (401, 403):
        return "Check the API key (api_key=...) and that it may use this model."
    if status == 404:
        return (
            "Check the base URL (OpenAI-compatible servers usually serve under /v1, e.g. "
            "http://localhost:11434/v1) and the model name (GET {base}/models lists them)."
        )
    if status == 413:
        return "The request is too large; shorten the conversation or max_new_tokens."
    if status == 429:
        return "The server is rate limiting; lower max_concurrency or wait."
    return "Check the base URL, the model name and the API key, and the request settings (max_new_tokens vs context size)."


class _HTTP:
    """Shared POST-with-retries and error mapping for the backend and the embedder."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout: float,
        max_connections: int,
        max_retries: int,
        backoff: float,
        transport: httpx.BaseTransport | None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise BackendError(
                f"base_url must start with http:// or https://, got {base_url!r} "
                "(e.g. http://localhost:11434/v1 for Ollama, https://api.openai.com/v1 for OpenAI)"
            )
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.backoff = max(0.0, backoff)
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            headers=headers,
            limits=httpx.Limits(
                max_connections=max(max_connections, 1), max_keepalive_connections=max(max_connections, 1)
            ),
            transport=transport,
            # Proxy settings from the environment apply to remote servers, never to loopback.
            trust_env=httpx.URL(self.base_url).host not in _LOOPBACK_HOSTS,
        )

    def get_json(self, url: str) -> dict[str, Any] | None:
        """One GET of server metadata; None when the server does not serve it (best effort:
        metadata only adds to the identity, it never stops generation)."""
        try:
            resp = self.client.get(url)
            data = resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def post(self, path: str, payload: dict[str, Any], what: str) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                resp = self.client.post(url, json=payload)
            except httpx.ConnectError as e:
                if attempt >= self.max_retries:
                    raise BackendError(
                        f"cannot connect to {self.base_url} ({e}); is the server running at {self.base_url}? "
                        "Start it (e.g. `ollama serve`, `vllm serve MODEL`, or traceless' LlamaCppServer) "
                        "or fix base_url."
                    ) from e
                problem = f"connection error: {e}"
            except httpx.TimeoutException as e:
                # Connect timeouts are retried; a read timeout means the request itself is slow.
                if not isinstance(e, httpx.ConnectTimeout) or attempt >= self.max_retries:
                    raise BackendError(
                        f"{what} at {url} timed out after {self.timeout:g}s ({type(e).__name__}); "
                        "is the server overloaded? Raise timeout=... (for a llamacpp: model, --timeout or $TRACELESS_LLAMACPP_TIMEOUT) "
                        "or lower max_new_tokens / max_concurrency."
                    ) from e
                problem = f"connect timeout: {e}"
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
                if attempt >= self.max_retries:
                    raise BackendError(
                        f"{what} at {url} failed: the connection broke ({type(e).__name__}: {e}); "
                        f"is the server at {self.base_url} healthy?"
                    ) from e
                problem = f"{type(e).__name__}: {e}"
            except httpx.HTTPError as e:
                raise BackendError(f"{what} at {url} failed: {type(e).__name__}: {e}") from e
            else:
                if resp.status_code < 400:
                    return self._json(resp, url, what)
                msg = _server_message(resp)
                if resp.status_code not in _RETRY_STATUS or attempt >= self.max_retries:
                    kind = "server error" if resp.status_code >= 500 else "rejected the request"
                    raise BackendError(
                        f"{what} at {url} {kind}: HTTP {resp.status_code} {resp.reason_phrase}: {msg}. "
                        + _hint(resp.status_code).replace("{base}", self.base_url)
                    )
                problem = f"HTTP {resp.status_code}: {msg}"
                ra = resp.headers.get("retry-after")
                if ra:
                    try:
                        retry_after = min(float(ra), 30.0)
                    except ValueError:
                        retry_after = None
            delay = retry_after if retry_after is not None else self.backoff * (2**attempt)
            attempt += 1
            log.warning(
                "%s at %s: %s; retry %d/%d in %.1fs", what, url, problem, attempt, self.max_retries, delay
            )
            time.sleep(delay)

    @staticmethod
    def _json(resp: httpx.Response, url: str, what: str) -> dict[str, Any]:
        try:
            data = resp.json()
        except ValueError as e:
            raise BackendError(
                f"{what} at {url} returned HTTP {resp.status_code} but not JSON "
                f"({resp.text[:200]!r}); is base_url an OpenAI-compatible API (usually ending in /v1)?"
            ) from e
        if not isinstance(data, dict):
            raise BackendError(f"{what} at {url} returned JSON that is not an object: {str(data)[:200]}")
        return data

    def close(self) -> None:
        self.client.close()


_VOLATILE_MODEL_FIELDS = frozenset({"created", "object", "permission"})
"""Fields of a ``/v1/models`` entry that change per request or per server start (llama.cpp
and vLLM stamp ``created`` with the current time), so they are not part of the identity."""


def _served_identity(http: _HTTP, model: str) -> dict[str, Any] | None:
    """What the server says about the weights it serves: its ``/models`` entry for ``model``
    (llama.cpp: ``meta`` with n_params, size, n_vocab …; vLLM: ``root``, ``max_model_len``)
    and, from llama.cpp's ``/props``, the model file name and a digest of the chat template."""
    out: dict[str, Any] = {}
    listing = http.get_json(f"{http.base_url}/models")
    items = listing.get("data") if listing else None
    if isinstance(items, list):
        entries = [it for it in items if isinstance(it, dict)]
        match = [it for it in entries if it.get("id") == model] or (entries if len(entries) == 1 else [])
        if match:
            out["models_entry"] = {k: v for k, v in match[0].items() if k not in _VOLATILE_MODEL_FIELDS}
    root = http.base_url[: -len("/v1")] if http.base_url.endswith("/v1") else http.base_url
    props = http.get_json(f"{root}/props")
    if props and isinstance(props.get("model_path"), str):
        template = props.get("chat_template")
        out["props"] = {
            "model_file": props["model_path"].replace("\\", "/").rsplit("/", 1)[-1],
            "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest() if isinstance(template, str) else None,
        }
    return out or None


class _Endpoint:
    """One server of a backend, with its own connection pool and concurrency cap."""

    def __init__(self, http: _HTTP, limit: int) -> None:
        self.http, self.limit = http, limit
        self.slots = threading.Semaphore(limit)
        self.in_flight = 0
        self.requests = 0


def _int(x: Any) -> int | None:
    return int(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


class OpenAIBackend(ModelBackend):
    """Chat completions over HTTP against one or several OpenAI-compatible servers.

    ``base_url`` may list several servers of the same weights, comma-separated
    (``openai:MODEL@URL1,URL2``): each request goes to the server with the fewest requests
    in flight, at most ``max_concurrency`` at a time per server (so the backend serves
    ``max_concurrency`` × servers at once). ``describe()`` records every URL and what the
    servers report about the weights they serve (``/models``, llama.cpp's ``/props``), and
    refuses servers that report different weights.

    ``temperature == 0`` is sent as ``temperature: 0`` (greedy on llama.cpp, vLLM and
    Ollama; near-greedy on OpenAI). ``seed`` is sent when set. Token counts come from the
    response's ``usage``; when a server omits it they are 0, a warning is logged once and
    :attr:`usage_missing` counts such replies. ``prompt_tokens`` excludes prompt tokens
    the server reports as served from its prefix cache (``cached_prompt_tokens``).
    Prefill/decode seconds are filled from llama.cpp's ``timings`` when present.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_concurrency: int = 4,
        *,
        max_retries: int = 3,
        backoff: float = 0.5,
        name: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not model:
            raise BackendError(
                f"model name is empty; pass the model id the server serves (GET {base_url.rstrip('/')}/models lists them)"
            )
        self.model = model
        self.name = name or model
        urls = [u.strip() for u in base_url.split(",") if u.strip()]
        if not urls:
            raise BackendError("base_url is empty; pass http://HOST:PORT/v1 (several: URL1,URL2)")
        per = max(1, max_concurrency)
        self.endpoint_concurrency = per
        """Requests in flight per server."""
        self._endpoints = [
            _Endpoint(_HTTP(u, api_key, timeout, per, max_retries, backoff, transport), per) for u in urls
        ]
        self.base_urls = [e.http.base_url for e in self._endpoints]
        if len(set(self.base_urls)) != len(self.base_urls):
            raise BackendError(f"base_url lists a server twice ({base_url}); list each server once")
        self.base_url = self.base_urls[0]
        self.max_concurrency = per * len(self._endpoints)
        """Requests in flight at once, over every server (``concurrency()``)."""
        self._api_key = SecretStr(api_key) if api_key else None  # for endpoint(); hidden in repr/vars
        self.usage_missing = 0
        self._lock = threading.Lock()
        self._identity: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model!r}, base_url={','.join(self.base_urls)!r})"

    def concurrency(self) -> int:
        return max(1, self.max_concurrency)

    def endpoint(self) -> Endpoint:
        """The first server's URL and the model id (a memory system calling the model over
        HTTP itself talks to one server), with this backend's key."""
        from traceless.models._options import Endpoint

        return Endpoint(base_url=self.base_url, model=self.model, api_key=self._api_key)

    @property
    def requests_per_endpoint(self) -> dict[str, int]:
        """Requests sent to each server so far."""
        return {e.http.base_url: e.requests for e in self._endpoints}

    def describe(self) -> dict[str, Any]:
        """Name, model, URL(s) and the served weights' metadata (asked once)."""
        with self._lock:
            if self._identity is None:
                served = [_served_identity(e.http, self.model) for e in self._endpoints]
                for url, other in zip(self.base_urls[1:], served[1:], strict=True):
                    if other != served[0]:
                        raise BackendError(
                            f"the servers of {self.model!r} report different weights: {self.base_url} serves "
                            f"{served[0]}, {url} serves {other}; list only servers of the same weights"
                        )
                where: dict[str, Any] = (
                    {"base_url": self.base_url} if len(self.base_urls) == 1 else {"base_urls": self.base_urls}
                )
                self._identity = {"name": self.name, "backend": "openai", **where, "model": self.model,
                                  "served": served[0]}
            return dict(self._identity)

    def _acquire(self) -> _Endpoint:
        """The server with the fewest requests in flight (then the fewest sent), its slot taken."""
        with self._lock:
            ep = min(self._endpoints, key=lambda e: (e.in_flight / e.limit, e.requests))
            ep.in_flight += 1
        ep.slots.acquire()
        return ep

    def _release(self, ep: _Endpoint) -> None:
        ep.slots.release()
        with self._lock:
            ep.in_flight -= 1
            ep.requests += 1

    def _payload(self, messages: list[ChatMessage], cfg: GenerationConfig) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": cfg.max_new_tokens,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "stream": False,
        }
        if cfg.seed is not None:
            payload["seed"] = cfg.seed
        if cfg.stop:
            payload["stop"] = list(cfg.stop)
        return payload

    def generate(self, messages: list[ChatMessage], config: GenerationConfig | None = None) -> Generation:
        cfg = config or GenerationConfig.model_validate({})
        if not messages:
            raise BackendError("generate() needs at least one chat message")
        ep = self._acquire()
        try:
            t0 = time.perf_counter()
            data = ep.http.post(
                "/chat/completions", self._payload(messages, cfg), f"chat completion for {self.model!r}"
            )
            total = time.perf_counter() - t0
        finally:
            self._release(ep)
        return self._parse(data, cfg, total, ep.http.base_url)

    def _parse(self, data: dict[str, Any], cfg: GenerationConfig, total: float, url: str) -> Generation:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise BackendError(
                f"response from {url}/chat/completions has no choices "
                f"({str(data)[:300]}); is this an OpenAI-compatible chat completions endpoint?"
            )
        choice = choices[0]
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        text = content if isinstance(content, str) else ""
        for s in cfg.stop:  # servers strip the stop string; make sure of it
            if s and s in text:
                text = text[: text.index(s)]
        finish = choice.get("finish_reason") or "stop"

        usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
        prompt = _int(usage.get("prompt_tokens")) if usage else None
        completion = _int(usage.get("completion_tokens")) if usage else None
        if prompt is None or completion is None:
            with self._lock:
                self.usage_missing += 1
                first = self.usage_missing == 1
            if first:
                log.warning(
                    "%s returned no usage token counts; prompt/completion tokens are recorded as 0", url
                )
        cached = 0
        details = usage.get("prompt_tokens_details") if usage else None
        if isinstance(details, dict):
            cached = _int(details.get("cached_tokens")) or 0
        prompt_seconds = decode_seconds = 0.0
        timings = data.get("timings")
        if isinstance(timings, dict):  # llama.cpp server extension
            prompt_seconds = float(timings.get("prompt_ms") or 0.0) / 1000.0
            decode_seconds = float(timings.get("predicted_ms") or 0.0) / 1000.0
        return Generation(
            text=text,
            prompt_tokens=max(0, (prompt or 0) - cached),
            completion_tokens=completion or 0,
            prompt_seconds=prompt_seconds,
            decode_seconds=decode_seconds,
            total_seconds=total,
            finish_reason=str(finish),
            model=str(data.get("model") or self.model),
            cached_prompt_tokens=cached,
        )

    def generate_batch(
        self, batch: list[list[ChatMessage]], config: GenerationConfig | None = None
    ) -> list[Generation]:
        """Up to ``max_concurrency`` requests in flight; results in input order.

        If any request fails, the first failure (in input order) is raised after the
        in-flight requests finish.
        """
        if len(batch) <= 1 or self.max_concurrency == 1:
            return [self.generate(m, config) for m in batch]
        ex = ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(batch)), thread_name_prefix="openai")
        try:
            return list(ex.map(lambda m: self.generate(m, config), batch))
        except BaseException:
            # Ctrl-C / a failure: requests in flight finish, queued ones never start
            ex.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            ex.shutdown(wait=True)

    def close(self) -> None:
        for e in self._endpoints:
            e.http.close()

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OpenAIEmbedder(Embedder):
    """``POST {base_url}/embeddings``; rows are L2-normalised float32.

    ``dim`` is learned from the first response unless given.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        *,
        dim: int = 0,
        batch_size: int = 64,
        max_retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = model
        self.name = f"openai:{model}"
        self.dim = dim
        self.batch_size = max(1, batch_size)
        self._http = _HTTP(base_url, api_key, timeout, 1, max_retries, backoff, transport)
        self.base_url = self._http.base_url

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "dim": self.dim,
            "backend": "openai",
            "base_url": self.base_url,
            "model": self.model,
        }

    def embed(self, texts: list[str]) -> FloatArray:
        rows: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            chunk = texts[i : i + self.batch_size]
            data = self._http.post(
                "/embeddings", {"model": self.model, "input": chunk}, f"embeddings for {self.model!r}"
            )
            items = data.get("data")
            if not isinstance(items, list) or len(items) != len(chunk):
                raise BackendError(
                    f"embeddings response from {self.base_url} has {len(items) if isinstance(items, list) else 'no'} "
                    f"rows for {len(chunk)} inputs; is {self.model!r} an embedding model?"
                )
            ordered = sorted(items, key=lambda it: int(it.get("index", 0)) if isinstance(it, dict) else 0)
            for it in ordered:
                vec = it.get("embedding") if isinstance(it, dict) else None
                if not isinstance(vec, list) or not vec:
                    raise BackendError(
                        f"embeddings response from {self.base_url} has a row without an embedding"
                    )
                rows.append([float(v) for v in vec])
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len({len(r) for r in rows}) != 1:
            raise BackendError(f"embeddings from {self.base_url} have differing lengths")
        out = np.asarray(rows, dtype=np.float32)
        if self.dim and out.shape[1] != self.dim:
            raise BackendError(
                f"embeddings from {self.base_url} have dim {out.shape[1]}, expected {self.dim}"
            )
        self.dim = int(out.shape[1])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        result: FloatArray = (out / norms).astype(np.float32)
        return result

    def close(self) -> None:
        self._http.close()
