"""Local transformers backend (CPU, float32) with a prefix KV cache and the KV-state API
of paper 002 (execution-state unlearning).

* ``generate``: chat template → prefill (reusing the longest cached prompt prefix) → own
  decode loop: greedy at ``temperature == 0``, otherwise sampling from a private
  ``torch.Generator`` seeded with ``config.seed`` (reproducible, independent of the global
  RNG). Stops at the end of turn, at ``config.stop`` strings, or at ``max_new_tokens``.
* ``generate_batch``: real batching for greedy decoding. The prompts' common prefix is
  prefilled once and shared; the differing suffixes are padded *between* the prefix and the
  suffix (attention mask 0 there, position ids continuous), so each row sees exactly the
  positions it would see alone.
* Prefix cache: an LRU of prefilled prompts. A new prompt sharing a long token prefix with a
  cached one copies those keys/values (cropped to the common prefix) and prefills only the
  rest; ``Generation.cached_prompt_tokens`` reports the reuse.
* KV API (``KVBackend``): ``chat_token_ids``, ``prefill``, ``decode``, ``crop``,
  ``next_token_logits``, ``encode``, ``decode_tokens``, plus ``fork`` and
  ``kv_storage_report`` for introspection. ``crop`` scrubs: the cropped keys/values are
  zeroed in the old storage and the kept part is a fresh contiguous copy, so no storage
  reachable from the state holds data of cropped tokens.

States are updated in place by ``prefill``/``decode``/``crop`` (and returned); use ``fork``
to branch.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import io
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from traceless.errors import BackendError, ConfigError, ModelNotAvailableError
from traceless.models._base import ChatMessage, Generation, GenerationConfig, ModelBackend

log = logging.getLogger(__name__)

__all__ = ["TransformersBackend", "TransformersKVState", "KVLayerStorage", "load_gguf_model", "load_pretrained"]

_HF_MARKER = "traceless-source.json"
_EOT_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>")

KV = list[tuple[torch.Tensor, torch.Tensor]]


def _quiet_transformers() -> None:
    from transformers.utils import logging as tlog

    tlog.disable_progress_bar()
    tlog.set_verbosity_error()


# ----------------------------------------------------------------------------------- loading


@dataclass
class _Loaded:
    model: Any
    tokenizer: Any
    source: str
    """'gguf' (dequantized now), 'converted-cache' (safetensors copy) or 'pretrained'."""
    seconds: float


def _read_marker(d: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((d / _HF_MARKER).read_text())
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _from_dir(d: Path, *, local_files_only: bool = True, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(d), local_files_only=local_files_only)
    model = AutoModelForCausalLM.from_pretrained(str(d), dtype=dtype, local_files_only=local_files_only)
    return model, tok


def load_gguf_model(
    gguf: Path, *, sha256: str | None = None, hf_dir: Path | None = None, marker: dict[str, Any] | None = None
) -> _Loaded:
    """Load a GGUF file into transformers (dequantized to float32).

    With ``hf_dir``, the converted model is saved there as safetensors (plus tokenizer and a
    marker naming the GGUF's sha256) and later loads read that copy instead (seconds, not a
    minute). A copy whose marker names another sha256 is rebuilt.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _quiet_transformers()
    t0 = time.perf_counter()
    if hf_dir is not None and sha256 is not None:
        marker = _read_marker(hf_dir)
        if marker is not None and marker.get("sha256") == sha256:
            try:
                model, tok = _from_dir(hf_dir)
                return _Loaded(model, tok, "converted-cache", time.perf_counter() - t0)
            except Exception:  # noqa: BLE001 - a broken copy is rebuilt below
                shutil.rmtree(hf_dir, ignore_errors=True)
    if not gguf.is_file():
        raise ModelNotAvailableError(f"GGUF file {gguf} does not exist; check the path")
    if hf_dir is not None:
        log.warning("converting %s to float32 safetensors for the transformers engine (once, about a "
                    "minute per 0.5B parameters) …", gguf.name)
    try:
        # transformers' GGUF converter draws its own tqdm bar on stderr; keep the library quiet
        with contextlib.redirect_stderr(io.StringIO()):
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    except Exception as e:  # noqa: BLE001
        raise BackendError(f"transformers could not load GGUF {gguf}: {type(e).__name__}: {e}") from e
    # The weights are plain dequantized float32 now; drop the GGUF quantizer so the model
    # can be saved (transformers refuses to serialize "gguf-quantized" models).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if hf_dir is not None and sha256 is not None:
        _save_converted(model, tok, hf_dir, {**(marker or {}), "sha256": sha256, "gguf": str(gguf)})
    return _Loaded(model, tok, "gguf", time.perf_counter() - t0)


def _save_converted(model: Any, tok: Any, hf_dir: Path, marker: dict[str, Any]) -> None:
    """Write model + tokenizer to a temp folder next to ``hf_dir``, marker last, then rename."""
    hf_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{hf_dir.name}.", dir=hf_dir.parent))
    os.chmod(tmp, 0o755)
    try:
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        (tmp / _HF_MARKER).write_text(json.dumps(marker))
        if hf_dir.exists():
            shutil.rmtree(hf_dir, ignore_errors=True)
        try:
            os.replace(tmp, hf_dir)
        except OSError:  # another process won the race; keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError:
        # A cache we cannot write (read-only, disk full) only costs speed next time.
        shutil.rmtree(tmp, ignore_errors=True)


def load_pretrained(
    path_or_repo: str, *, local_files_only: bool | None = None, dtype: torch.dtype = torch.float32
) -> _Loaded:
    """Load a safetensors folder or a Hugging Face Hub repo id (``AutoModelForCausalLM``) in
    ``dtype`` (loading a 7B model as bfloat16 directly, not float32 first, halves peak memory)."""
    _quiet_transformers()
    t0 = time.perf_counter()
    is_dir = Path(path_or_repo).is_dir()
    from huggingface_hub import is_offline_mode

    offline = is_offline_mode()  # the Hub's own reading of $HF_HUB_OFFLINE (what its downloads obey)
    lfo = is_dir or offline if local_files_only is None else local_files_only
    try:
        model, tok = (
            _from_dir(Path(path_or_repo), local_files_only=lfo, dtype=dtype)
            if is_dir
            else _hub(path_or_repo, lfo, dtype)
        )
    except (OSError, ValueError) as e:
        if is_dir:
            raise ModelNotAvailableError(
                f"{path_or_repo} is not a loadable transformers model folder ({type(e).__name__}: {e}); "
                "it needs config.json, the safetensors weights and the tokenizer files"
            ) from e
        why = (
            "HF_HUB_OFFLINE is set and it is not in the local Hugging Face cache"
            if offline
            else "it could not be downloaded"
        )
        raise ModelNotAvailableError(
            f"cannot load model {path_or_repo!r} from the Hugging Face Hub: {why} ({type(e).__name__}). "
            f"Download it once with network access (`hf download {path_or_repo}`), point to a local folder "
            "with `transformers:/path/to/dir`, or use an embedded model (`traceless models list`)"
        ) from e
    return _Loaded(model, tok, "pretrained", time.perf_counter() - t0)


def _hub(repo: str, local_files_only: bool, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(repo, local_files_only=local_files_only)
    model = AutoModelForCausalLM.from_pretrained(repo, dtype=dtype, local_files_only=local_files_only)
    return model, tok


# ----------------------------------------------------------------------------------- KV state


class TransformersKVState:
    """A prefilled KV cache (``DynamicCache``), the token ids it covers, and the logits for the
    next token (``None`` after a crop; recomputed on demand)."""

    def __init__(self, cache: Any, token_ids: list[int], last_logits: torch.Tensor | None) -> None:
        self.cache = cache
        self.token_ids = token_ids
        self.last_logits = last_logits

    @property
    def length(self) -> int:
        return len(self.token_ids)

    def __repr__(self) -> str:
        return f"TransformersKVState(length={self.length})"


@dataclass(frozen=True)
class KVLayerStorage:
    """What one cached key or value tensor holds (for scrub checks)."""

    layer: int
    kind: str
    """'keys' or 'values'."""
    shape: tuple[int, ...]
    seq_len: int
    storage_bytes: int
    """Bytes of the underlying storage (everything reachable through this tensor)."""
    expected_bytes: int
    """``seq_len`` × bytes per position: what the storage holds if nothing else is kept."""
    contiguous: bool

    @property
    def exact(self) -> bool:
        return self.storage_bytes == self.expected_bytes


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    # compare in blocks first (fast path for long shared prefixes)
    step = 256
    while i + step <= n and list(a[i : i + step]) == list(b[i : i + step]):
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _layer_kv(cache: Any) -> Iterator[tuple[int, Any]]:
    yield from enumerate(cache.layers)


def _scrub_replace(old: torch.Tensor, length: int) -> torch.Tensor:
    """Fresh contiguous copy of ``old[..., :length, :]``; then zero everything of ``old``
    from position ``length`` on (the whole storage when ``old`` is a view of a larger one)."""
    kept = old[..., :length, :].clone(memory_format=torch.contiguous_format)
    st = old.untyped_storage()
    if old.is_contiguous() and st.nbytes() == old.numel() * old.element_size():
        old[..., length:, :].zero_()
    else:
        st.fill_(0)  # type: ignore[attr-defined]
    return kept


# ----------------------------------------------------------------------------------- backend

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
"""The weight/KV dtypes the backend runs in, by the name ``--dtype`` takes."""


def placement(device: str = "cpu", dtype: str = "float32") -> tuple[torch.device, torch.dtype]:
    """Validate ``device`` (cpu, cuda, cuda:N) and ``dtype`` (a key of ``DTYPES``) before any
    model is loaded; a CUDA device that torch cannot see is refused here, not mid-run."""
    if dtype not in DTYPES:
        raise ConfigError(f"dtype {dtype!r} is not supported by the transformers backend; use one of "
                          f"{', '.join(DTYPES)}")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"device {device!r} is not a torch device; use cpu, cuda or cuda:N") from None
    if dev.type not in ("cpu", "cuda"):
        raise ConfigError(f"device {device!r} is not supported by the transformers backend; use cpu, cuda or cuda:N")
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0 or (dev.index or 0) >= n:
            raise ConfigError(
                f"device {device!r}: torch sees {n} CUDA device(s) (torch {torch.__version__}); install a CUDA "
                "build of torch on a machine with a GPU, or use --device cpu"
            )
    return dev, DTYPES[dtype]



class TransformersBackend(ModelBackend):
    """A causal LM run by transformers, on the CPU in float32 unless ``device``/``dtype`` say
    otherwise (``cuda``, ``bfloat16``: the replay study's 7-8B runs). Keys/values live on the
    model's device in its dtype; logits come back to the CPU as float32, so sampling and greedy
    picks are the same code everywhere.

    Uses as many torch threads as CPUs are free when it is built (``free_cpus``: idle CPUs of
    the affinity mask, so a busy machine gets fewer) unless ``num_threads`` (from
    ``EngineOptions.threads``) says otherwise.
    The prefix cache holds copies of up to ``prefix_cache_entries`` recent prompts' keys/values
    (at most ``prefix_cache_bytes`` in all; 0 entries turns it off): call
    ``evict_prefix_cache(token_ids)`` or ``clear_prefix_cache()`` when such content is forgotten.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str = "transformers",
        weights_sha256: str | None = None,
        source: str = "",
        prefix_cache_entries: int = 8,
        prefix_cache_bytes: int = 512 * 2**20,
        min_prefix_reuse: int = 4,
        num_threads: int | None = None,
        device: str = "cpu",
        dtype: str = "float32",
    ) -> None:
        if num_threads:  # EngineOptions.threads (--threads, TRACELESS_NUM_THREADS), given by load_backend
            torch.set_num_threads(num_threads)
        elif device == "cpu":  # the CPUs free now: an oversubscribed thread stalls each step's sync
            from traceless.models._cpu import free_cpus

            torch.set_num_threads(free_cpus())
        self.device, self.dtype = placement(device, dtype)
        if model.dtype != self.dtype or model.device != self.device:
            model = model.to(device=self.device, dtype=self.dtype)
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.weights_sha256 = weights_sha256
        self.source = source
        self.load_seconds = 0.0
        self.load_source = ""
        self.prefix_cache_entries = prefix_cache_entries
        self.prefix_cache_bytes = prefix_cache_bytes
        self.min_prefix_reuse = min_prefix_reuse
        self._prefix: OrderedDict[tuple[int, ...], KV] = OrderedDict()
        self._lock = threading.RLock()
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._stop_ids = self._end_of_turn_ids()
        pad = tokenizer.pad_token_id
        self._pad_id: int = int(pad if pad is not None else min(self._stop_ids))

    # ---- construction

    @classmethod
    def from_gguf(
        cls,
        path: str | Path,
        *,
        name: str | None = None,
        sha256: str | None = None,
        hf_cache_dir: Path | None = None,
        **kw: Any,
    ) -> TransformersBackend:
        """Load a GGUF file. Without ``sha256`` it is hashed (memoised by size+mtime in the
        model cache) so that ``describe()`` names the exact weights and the converted copy is
        keyed by content."""
        from traceless.models._catalog import models_dir, sha256_file

        placement(kw.get("device", "cpu"), kw.get("dtype", "float32"))  # refuse before a long load
        gguf = Path(path).expanduser().resolve()
        if not gguf.is_file():
            raise ModelNotAvailableError(f"GGUF file {gguf} does not exist; check the path")
        st = gguf.stat()
        key = hashlib.sha256(f"{gguf}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
        if hf_cache_dir is None or sha256 is None:
            if hf_cache_dir is None:
                hf_cache_dir = models_dir() / f"gguf-{gguf.stem}-{key}-hf"
            if sha256 is None:
                marker = _read_marker(hf_cache_dir)
                sha256 = str(marker["sha256"]) if marker and marker.get("key") == key else sha256_file(gguf)
        loaded = load_gguf_model(gguf, sha256=sha256, hf_dir=hf_cache_dir, marker={"key": key})
        be = cls(loaded.model, loaded.tokenizer, name=name or gguf.stem, weights_sha256=sha256, source=str(gguf), **kw)
        be.load_seconds, be.load_source = loaded.seconds, loaded.source
        return be

    @classmethod
    def from_pretrained(cls, path_or_repo: str, *, name: str | None = None, **kw: Any) -> TransformersBackend:
        """A safetensors folder, or a Hub repo id (fails clearly under ``HF_HUB_OFFLINE=1``)."""
        _, dtype = placement(kw.get("device", "cpu"), kw.get("dtype", "float32"))  # refuse before a long load
        loaded = load_pretrained(path_or_repo, dtype=dtype)
        sha = _dir_digest(Path(path_or_repo)) if Path(path_or_repo).is_dir() else None
        be = cls(
            loaded.model,
            loaded.tokenizer,
            name=name or Path(path_or_repo).name or path_or_repo,
            weights_sha256=sha,
            source=path_or_repo,
            **kw,
        )
        be.load_seconds, be.load_source = loaded.seconds, loaded.source
        return be

    @classmethod
    def from_catalog(cls, name: str, **kw: Any) -> TransformersBackend:
        """A catalog model: assembled + verified GGUF, converted once to a safetensors copy."""
        from traceless.models._catalog import assemble, get_spec, gguf_path, hf_cache_path

        spec = get_spec(name)
        placement(kw.get("device", "cpu"), kw.get("dtype", "float32"))  # refuse before a long load
        hf_dir = hf_cache_path(spec.name)
        marker = _read_marker(hf_dir)
        t0 = time.perf_counter()
        gguf = gguf_path(spec.name)
        if marker is not None and marker.get("sha256") == spec.sha256:
            try:  # the converted copy alone is enough
                loaded = load_gguf_model(gguf, sha256=spec.sha256, hf_dir=hf_dir)
            except ModelNotAvailableError:
                loaded = load_gguf_model(assemble(spec.name), sha256=spec.sha256, hf_dir=hf_dir)
        else:
            loaded = load_gguf_model(assemble(spec.name), sha256=spec.sha256, hf_dir=hf_dir)
        be = cls(
            loaded.model, loaded.tokenizer, name=spec.name, weights_sha256=spec.sha256, source=str(gguf), **kw
        )
        be.load_seconds, be.load_source = time.perf_counter() - t0, loaded.source
        return be

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": "transformers",
            "weights_sha256": self.weights_sha256,
            "dtype": str(self.model.dtype).replace("torch.", ""),
            # absent means cpu (identities of CPU runs stay as they were); another device's
            # kernels give other numerics, so it is part of the identity
            **({"device": str(self.device)} if self.device.type != "cpu" else {}),
        }

    def close(self) -> None:
        self.clear_prefix_cache()

    # ---- tokens

    def _end_of_turn_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        tok = self.tokenizer
        if tok.eos_token_id is not None:
            ids.add(int(tok.eos_token_id))
        gc = getattr(self.model, "generation_config", None)
        eos = getattr(gc, "eos_token_id", None)
        if isinstance(eos, int):
            ids.add(eos)
        elif isinstance(eos, list | tuple):
            ids.update(int(e) for e in eos)
        vocab = tok.get_vocab()
        for t in _EOT_TOKENS:
            if t in vocab:
                ids.add(int(vocab[t]))
        if not ids:
            raise BackendError("the tokenizer defines no end-of-sequence token; cannot tell when a reply ends")
        return frozenset(ids)

    @property
    def stop_token_ids(self) -> frozenset[int]:
        return self._stop_ids

    def chat_token_ids(self, messages: list[ChatMessage], add_generation_prompt: bool = True) -> list[int]:
        """Token ids of the chat template rendering."""
        conv = [{"role": m.role, "content": m.content} for m in messages]
        out = self.tokenizer.apply_chat_template(
            conv, add_generation_prompt=add_generation_prompt, tokenize=True, return_dict=False
        )
        if isinstance(out, dict) or hasattr(out, "keys"):
            out = out["input_ids"]
        if isinstance(out, torch.Tensor):
            out = out.tolist()
        if out and isinstance(out[0], list):
            out = out[0]
        return [int(x) for x in out]

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text (no special tokens added)."""
        return [int(x) for x in self.tokenizer.encode(text, add_special_tokens=False)]

    def decode_tokens(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens))

    # ---- model calls

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def _cache_from_kv(self, kv: KV, n: int, batch: int = 1) -> Any:
        """A new cache holding fresh copies of the first ``n`` positions of ``kv``."""
        data = []
        for k, v in kv:
            k2, v2 = k[..., :n, :], v[..., :n, :]
            if batch != 1:
                k2 = k2.expand(batch, -1, -1, -1)
                v2 = v2.expand(batch, -1, -1, -1)
            data.append((k2.contiguous().clone(), v2.contiguous().clone()))
        return self._cache_holding(data)

    def _cache_holding(self, kv: KV) -> Any:
        """A new cache whose layers hold exactly the given keys/values (no copy)."""
        from transformers import DynamicCache

        cache: Any = DynamicCache(config=self.model.config)
        for layer, (k, v) in zip(cache.layers, kv, strict=True):
            layer.lazy_initialization(k, v)
            layer.keys, layer.values = k, v
        return cache

    @staticmethod
    def _kv_of(cache: Any) -> KV:
        return [(layer.keys, layer.values) for _, layer in _layer_kv(cache)]

    def _forward(
        self,
        ids: torch.Tensor,
        cache: Any,
        *,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Run ``ids`` ([B, T]) through the model, extending ``cache``; logits [B, V] of the last position."""
        kwargs: dict[str, Any] = {self._cache_kw: cache, "use_cache": True, "logits_to_keep": 1}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        if position_ids is not None:
            kwargs["position_ids"] = position_ids
        if self.device.type != "cpu":
            ids = ids.to(self.device)
            for key in ("attention_mask", "position_ids"):
                if key in kwargs:
                    kwargs[key] = kwargs[key].to(self.device)
        with torch.no_grad():
            out = self.model(input_ids=ids, **kwargs)
        logits: torch.Tensor = out.logits[:, -1, :].float().cpu()
        return logits

    def _run(self, token_ids: Sequence[int], cache: Any) -> torch.Tensor:
        return self._forward(torch.tensor([list(token_ids)], dtype=torch.long), cache)[0]

    # ---- prefix cache

    def clear_prefix_cache(self) -> None:
        """Drop (and zero) every cached prompt prefix."""
        self.evict_prefix_cache()

    def evict_prefix_cache(self, containing: Sequence[int] | None = None) -> int:
        """Drop cached prompt prefixes whose token ids contain ``containing`` as a contiguous run
        (all of them when ``None``); their keys/values are zeroed first. Call this when content
        that may sit in a cached prompt is forgotten. Returns how many entries were dropped."""
        with self._lock:
            if containing is None:
                victims = list(self._prefix)
            else:
                needle = list(containing)
                victims = [k for k in self._prefix if _contains_run(k, needle)]
            for key in victims:
                self._drop(key)
            return len(victims)

    @property
    def prefix_cache_size(self) -> int:
        return len(self._prefix)

    def _lookup_prefix(self, ids: Sequence[int], limit: int) -> tuple[int, KV | None]:
        best, best_kv, best_key = 0, None, None
        for key, kv in self._prefix.items():
            n = min(_lcp(key, ids), limit)
            if n > best:
                best, best_kv, best_key = n, kv, key
        if best < self.min_prefix_reuse or best_kv is None or best_key is None:
            return 0, None
        self._prefix.move_to_end(best_key)
        return best, best_kv

    def _remember(self, ids: Sequence[int], cache: Any) -> None:
        if self.prefix_cache_entries <= 0 or len(ids) < self.min_prefix_reuse:
            return
        key = tuple(ids)
        # An entry that is a prefix of this one is covered by it.
        for old in [k for k in self._prefix if len(k) <= len(key) and key[: len(k)] == k]:
            self._drop(old)
        self._prefix[key] = [(k.clone(), v.clone()) for k, v in self._kv_of(cache)]
        total = sum(_kv_nbytes(kv) for kv in self._prefix.values())
        while self._prefix and (len(self._prefix) > self.prefix_cache_entries or total > self.prefix_cache_bytes):
            total -= self._drop(next(iter(self._prefix)))

    def _drop(self, key: tuple[int, ...]) -> int:
        """Remove one prefix entry, zeroing its tensors; returns the bytes it held."""
        kv = self._prefix.pop(key)
        for k, v in kv:
            k.zero_()
            v.zero_()
        return _kv_nbytes(kv)

    def _prefill_prompt(self, ids: list[int], use_prefix_cache: bool = True) -> tuple[Any, torch.Tensor, int]:
        """Cache + next-token logits for ``ids``, reusing a cached prefix; returns (cache, logits, reused)."""
        reused, kv = self._lookup_prefix(ids, len(ids) - 1) if use_prefix_cache else (0, None)
        cache = self._cache_from_kv(kv, reused) if kv is not None else self._new_cache()
        logits = self._run(ids[reused:], cache)
        if use_prefix_cache:
            self._remember(ids, cache)
        return cache, logits, reused

    # ---- decoding

    def _pick(self, logits: torch.Tensor, cfg: GenerationConfig, gen: torch.Generator | None) -> int:
        if cfg.temperature == 0 or gen is None:
            return int(torch.argmax(logits).item())
        probs = torch.softmax(logits.double() / cfg.temperature, dim=-1)
        if cfg.top_p < 1.0:
            sp, si = torch.sort(probs, descending=True)
            cum = torch.cumsum(sp, dim=-1)
            keep = (cum - sp) < cfg.top_p
            keep[0] = True
            sp = torch.where(keep, sp, torch.zeros_like(sp))
            j = int(torch.multinomial(sp / sp.sum(), 1, generator=gen).item())
            return int(si[j].item())
        return int(torch.multinomial(probs, 1, generator=gen).item())

    @staticmethod
    def _generator(cfg: GenerationConfig) -> torch.Generator | None:
        if cfg.temperature == 0:
            return None
        g = torch.Generator(device="cpu")
        seed = cfg.seed if cfg.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
        g.manual_seed(seed)
        return g

    def _stop_cut(self, ids: list[int], cfg: GenerationConfig) -> tuple[str, bool]:
        text = self.decode_tokens([i for i in ids if i not in self._stop_ids], skip_special_tokens=True)
        cut = [text.index(s) for s in cfg.stop if s and s in text]
        if cut:
            return text[: min(cut)], True
        return text, False

    def _decode_loop(
        self, cache: Any, logits: torch.Tensor, cfg: GenerationConfig, *, feed_last: bool
    ) -> tuple[list[int], str, str, torch.Tensor | None]:
        """Generate from ``logits`` onwards; returns (token ids, text, finish reason, logits after
        the last fed token). Every generated token but the last is fed to the cache; with
        ``feed_last`` the last one is too (so the cache covers all of them)."""
        gen = self._generator(cfg)
        out: list[int] = []
        finish = "length"
        text = ""
        fed_logits: torch.Tensor | None = logits
        for step in range(cfg.max_new_tokens):
            tok = self._pick(logits, cfg, gen)
            out.append(tok)
            if tok in self._stop_ids:
                finish = "stop"
                break
            if cfg.stop:
                text, hit = self._stop_cut(out, cfg)
                if hit:
                    finish = "stop"
                    break
            if step == cfg.max_new_tokens - 1:
                break
            logits = self._run([tok], cache)
            fed_logits = logits
        if feed_last and out:
            fed_logits = self._run([out[-1]], cache)
        elif out:
            fed_logits = None
        text, _ = self._stop_cut(out, cfg)
        return out, text, finish, fed_logits

    def generate(
        self, messages: list[ChatMessage], config: GenerationConfig | None = None, *, use_prefix_cache: bool = True
    ) -> Generation:
        cfg = config or GenerationConfig()
        with self._lock:
            t0 = time.perf_counter()
            ids = self.chat_token_ids(messages)
            if not ids:
                raise BackendError("the chat template rendered no tokens")
            cache, logits, reused = self._prefill_prompt(ids, use_prefix_cache)
            t1 = time.perf_counter()
            out, text, finish, _ = self._decode_loop(cache, logits, cfg, feed_last=False)
            t2 = time.perf_counter()
        return self._generation(text, len(ids) - reused, reused, out, finish, (t0, t1, t2))

    def generate_batch(
        self,
        batch: list[list[ChatMessage]],
        config: GenerationConfig | None = None,
        *,
        use_prefix_cache: bool = True,
        max_batch: int = 16,
        share_prefix: bool = True,
        ragged: bool | None = None,
    ) -> list[Generation]:
        """Greedy: one batched prefill and decode per ``max_batch`` conversations. Sampling: one
        conversation at a time, each seeded with ``config.seed`` (same result as ``generate``).

        Two prefill layouts, then one batched decode:

        * shared: the rows' common prefix is prefilled once, the suffixes together (padded
          between prefix and suffix) — best when the rows differ only in a short tail;
        * ragged: every row is prefilled on its own (reusing the prefix cache, so rows that
          share a long prefix with an earlier row or prompt pay only for their own tail) and
          the caches are stacked right-aligned for decoding — best when the rows have
          different contexts or lengths, where the shared layout would pad every row to the
          longest one.

        ``ragged=None`` picks ragged when the shared layout would spend more than a fifth of
        its prefill on padding. Per-row ``prompt_seconds``/``decode_seconds``/``total_seconds``
        are equal shares of the batch's wall time. ``share_prefix=False`` pads on the left
        instead of prefilling the common prefix once (for testing the padded path)."""
        cfg = config or GenerationConfig()
        if cfg.temperature > 0 or len(batch) <= 1:
            return [self.generate(m, cfg, use_prefix_cache=use_prefix_cache) for m in batch]
        results: list[Generation] = []
        for i in range(0, len(batch), max_batch):
            results.extend(self._greedy_batch(batch[i : i + max_batch], cfg, use_prefix_cache, share_prefix, ragged))
        return results

    def _stack_right_aligned(self, caches: list[Any], lengths: list[int]) -> tuple[Any, torch.Tensor]:
        """One batch cache from per-row caches, each row right-aligned (left padding masked)."""
        m = max(lengths)
        per_row = [self._kv_of(c) for c in caches]
        stacked: KV = []
        for li in range(len(per_row[0])):
            pads = [(0, 0, m - n, 0) for n in lengths]  # zeros before each row's positions (dim -2)
            stacked.append((torch.cat([F.pad(kv[li][0], p) for kv, p in zip(per_row, pads, strict=True)]),
                            torch.cat([F.pad(kv[li][1], p) for kv, p in zip(per_row, pads, strict=True)])))
        cache = self._cache_holding(stacked)
        mask = torch.zeros((len(lengths), m), dtype=torch.long)
        for i, n in enumerate(lengths):
            mask[i, m - n :] = 1
        return cache, mask

    def _greedy_batch(
        self, batch: list[list[ChatMessage]], cfg: GenerationConfig, use_prefix_cache: bool, share_prefix: bool,
        ragged: bool | None = None,
    ) -> list[Generation]:
        with self._lock:
            t0 = time.perf_counter()
            rows = [self.chat_token_ids(m) for m in batch]
            if any(not r for r in rows):
                raise BackendError("the chat template rendered no tokens")
            b = len(rows)
            # shared prefix: computed once (and remembered), then copied to every row
            k = min(min(len(r) for r in rows) - 1, min(_lcp(rows[0], r) for r in rows[1:])) if share_prefix else 0
            if ragged is None:
                tails = [len(r) - k for r in rows]
                ragged = share_prefix and b * max(tails) - sum(tails) > 0.2 * sum(tails)
            if ragged:
                return self._ragged_batch(rows, k, cfg, use_prefix_cache, t0)
            reused, kv = self._lookup_prefix(rows[0], k) if use_prefix_cache else (0, None)
            cache1 = self._cache_from_kv(kv, reused) if kv is not None else self._new_cache()
            if k > reused:
                self._run(rows[0][reused:k], cache1)
                if use_prefix_cache:
                    self._remember(rows[0][:k], cache1)
            cache = self._cache_from_kv(self._kv_of(cache1), k, batch=b) if k > 0 else self._new_cache()
            del cache1
            # suffixes padded between prefix and suffix
            suffixes = [r[k:] for r in rows]
            m = max(len(s) for s in suffixes)
            ids = torch.full((b, m), self._pad_id, dtype=torch.long)
            mask = torch.zeros((b, k + m), dtype=torch.long)
            mask[:, :k] = 1
            pos = torch.zeros((b, m), dtype=torch.long)
            for i, s in enumerate(suffixes):
                ids[i, m - len(s) :] = torch.tensor(s, dtype=torch.long)
                mask[i, k + m - len(s) :] = 1
                pos[i, m - len(s) :] = torch.arange(k, k + len(s))
                pos[i, : m - len(s)] = k  # padding: masked out as keys; any position works
            logits = self._forward(ids, cache, attention_mask=mask, position_ids=pos)
            next_pos = torch.tensor([len(r) for r in rows], dtype=torch.long)
            t1 = time.perf_counter()
            outs, finish = self._batch_decode(cache, mask, logits, next_pos, cfg)
            t2 = time.perf_counter()
        share_p, share_d = (t1 - t0) / b, (t2 - t1) / b
        cached = [reused + (k - reused if i > 0 else 0) for i in range(b)]
        return self._batch_results(rows, outs, finish, cached, share_p, share_d, cfg)

    def _ragged_batch(
        self, rows: list[list[int]], k: int, cfg: GenerationConfig, use_prefix_cache: bool, t0: float
    ) -> list[Generation]:
        """Prefill each row alone, then decode all rows together. With the prefix cache, a row
        reuses the longest prefix any earlier row or prompt left there; without it, only the
        batch's common prefix (``k`` tokens) is computed once."""
        caches, firsts, cached = [], [], []
        base = None
        if not use_prefix_cache and k > 0:
            base = self._new_cache()
            self._run(rows[0][:k], base)
        for i, r in enumerate(rows):
            if base is not None:
                c = self._cache_from_kv(self._kv_of(base), k)
                lg, reused = self._run(r[k:], c), (k if i > 0 else 0)
            else:
                c, lg, reused = self._prefill_prompt(r, use_prefix_cache)
            caches.append(c)
            firsts.append(lg)
            cached.append(reused)
        del base
        cache, mask = self._stack_right_aligned(caches, [len(r) for r in rows])
        del caches
        logits = torch.stack(firsts)
        next_pos = torch.tensor([len(r) for r in rows], dtype=torch.long)
        t1 = time.perf_counter()
        outs, finish = self._batch_decode(cache, mask, logits, next_pos, cfg)
        t2 = time.perf_counter()
        b = len(rows)
        return self._batch_results(rows, outs, finish, cached, (t1 - t0) / b, (t2 - t1) / b, cfg)

    def _batch_decode(
        self, cache: Any, mask: torch.Tensor, logits: torch.Tensor, next_pos: torch.Tensor, cfg: GenerationConfig
    ) -> tuple[list[list[int]], list[str]]:
        """Greedy decode of a batch whose prompts are in ``cache`` (``mask`` marks real positions)."""
        b = logits.shape[0]
        outs: list[list[int]] = [[] for _ in range(b)]
        finish = ["length"] * b
        active = list(range(b))  # row index of each cache row
        for step in range(cfg.max_new_tokens):
            picks = torch.argmax(logits, dim=-1).tolist()
            keep: list[int] = []
            for j, row in enumerate(active):
                tok = int(picks[j])
                outs[row].append(tok)
                if tok in self._stop_ids:
                    finish[row] = "stop"
                    continue
                if cfg.stop and self._stop_cut(outs[row], cfg)[1]:
                    finish[row] = "stop"
                    continue
                keep.append(j)
            if not keep or step == cfg.max_new_tokens - 1:
                break
            if len(keep) < len(active):
                sel = torch.tensor(keep, dtype=torch.long)
                cache.batch_select_indices(sel.to(self.device))
                mask = mask[sel]
                next_pos = next_pos[sel]
                active = [active[j] for j in keep]
            step_ids = torch.tensor([[outs[row][-1]] for row in active], dtype=torch.long)
            mask = torch.cat([mask, torch.ones((len(active), 1), dtype=torch.long)], dim=1)
            logits = self._forward(step_ids, cache, attention_mask=mask, position_ids=next_pos[:, None])
            next_pos = next_pos + 1
        return outs, finish

    def _batch_results(
        self, rows: list[list[int]], outs: list[list[int]], finish: list[str], cached: list[int],
        share_p: float, share_d: float, cfg: GenerationConfig,
    ) -> list[Generation]:
        res = []
        for i in range(len(rows)):
            res.append(
                Generation(
                    text=self._stop_cut(outs[i], cfg)[0],
                    prompt_tokens=len(rows[i]) - cached[i],
                    completion_tokens=len(outs[i]),
                    prompt_seconds=share_p,
                    decode_seconds=share_d,
                    total_seconds=share_p + share_d,
                    finish_reason=finish[i],
                    model=self.name,
                    cached_prompt_tokens=cached[i],
                )
            )
        return res

    # ---- KV API (paper 002)

    def _as_state(self, state: Any) -> TransformersKVState:
        if not isinstance(state, TransformersKVState):
            raise BackendError(f"expected a TransformersKVState from this backend, got {type(state).__name__}")
        return state

    def prefill(self, token_ids: list[int], state: Any = None) -> TransformersKVState:
        """Extend ``state`` (in place) or a fresh cache with ``token_ids``."""
        with self._lock:
            st = self._as_state(state) if state is not None else TransformersKVState(self._new_cache(), [], None)
            if token_ids:
                st.last_logits = self._run(token_ids, st.cache)
                st.token_ids.extend(int(t) for t in token_ids)
            return st

    def _ensure_logits(self, st: TransformersKVState) -> tuple[torch.Tensor, int]:
        """Next-token logits of ``st``; after a crop they are recomputed by re-running the last token."""
        if st.last_logits is not None:
            return st.last_logits, 0
        if st.length == 0:
            raise BackendError("the KV state is empty; prefill some tokens before decoding or scoring")
        last = st.token_ids[-1]
        self._crop_in_place(st, st.length - 1)
        st.last_logits = self._run([last], st.cache)
        st.token_ids.append(last)
        return st.last_logits, 1

    def next_token_logits(self, state: Any) -> torch.Tensor:
        """Float32 logits [vocab] for the token after ``state``."""
        with self._lock:
            return self._ensure_logits(self._as_state(state))[0].clone()

    def decode(self, state: Any, config: GenerationConfig | None = None) -> tuple[TransformersKVState, Generation]:
        """Continue from ``state``; every generated token (end-of-turn included) is appended to it."""
        cfg = config or GenerationConfig()
        with self._lock:
            st = self._as_state(state)
            t0 = time.perf_counter()
            logits, recomputed = self._ensure_logits(st)
            t1 = time.perf_counter()
            out, text, finish, last = self._decode_loop(st.cache, logits, cfg, feed_last=True)
            st.token_ids.extend(out)
            st.last_logits = last
            t2 = time.perf_counter()
        return st, self._generation(text, recomputed, st.length - len(out) - recomputed, out, finish, (t0, t1, t2))

    def _generation(self, text: str, prompt: int, cached: int, out: list[int], finish: str,
                    times: tuple[float, float, float]) -> Generation:
        """One reply: ``prompt`` tokens computed, ``cached`` reused, ``out`` generated; ``times``:
        the start, the end of the prompt and the end of decoding (``perf_counter``)."""
        t0, t1, t2 = times
        return Generation(text=text, prompt_tokens=prompt, completion_tokens=len(out), prompt_seconds=t1 - t0,
                          decode_seconds=t2 - t1, total_seconds=t2 - t0, finish_reason=finish, model=self.name,
                          cached_prompt_tokens=cached)

    def _crop_in_place(self, st: TransformersKVState, length: int) -> None:
        for _, layer in _layer_kv(st.cache):
            if getattr(layer, "is_sliding", False):
                raise BackendError("crop is not supported on sliding-window cache layers")
            if layer.keys is None or layer.keys.numel() == 0:
                continue
            layer.keys = _scrub_replace(layer.keys, length)
            layer.values = _scrub_replace(layer.values, length)
        del st.token_ids[length:]
        st.last_logits = None

    def crop(self, state: Any, length: int) -> TransformersKVState:
        """Cut ``state`` back to its first ``length`` tokens, in place. The cropped keys/values are
        zeroed in the old storage and the kept ones copied to fresh contiguous tensors."""
        with self._lock:
            st = self._as_state(state)
            if not 0 <= length <= st.length:
                raise BackendError(f"cannot crop a KV state of length {st.length} to {length}")
            if length < st.length:
                self._crop_in_place(st, length)
            return st

    def fork(self, state: Any) -> TransformersKVState:
        """An independent deep copy of ``state``."""
        with self._lock:
            st = self._as_state(state)
            cache = self._cache_from_kv(self._kv_of(st.cache), st.length) if st.length else self._new_cache()
            logits = st.last_logits.clone() if st.last_logits is not None else None
            return TransformersKVState(cache, list(st.token_ids), logits)

    def kv_storage_report(self, state: Any) -> list[KVLayerStorage]:
        """Per layer and tensor: sequence length, storage bytes, and what they should be."""
        st = self._as_state(state)
        rep = []
        for i, layer in _layer_kv(st.cache):
            for kind in ("keys", "values"):
                t = getattr(layer, kind)
                if t is None or t.numel() == 0:
                    rep.append(KVLayerStorage(i, kind, (), 0, 0, 0, True))
                    continue
                row = t.numel() // t.shape[-2] * t.element_size()
                rep.append(
                    KVLayerStorage(
                        i,
                        kind,
                        tuple(t.shape),
                        int(t.shape[-2]),
                        t.untyped_storage().nbytes(),
                        int(t.shape[-2]) * row,
                        t.is_contiguous(),
                    )
                )
        return rep

    def kv_tensors(self, state: Any) -> KV:
        """The (keys, values) tensors of each layer (references, for inspection only)."""
        return self._kv_of(self._as_state(state).cache)


def _kv_nbytes(kv: KV) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)


def _contains_run(hay: Sequence[int], needle: Sequence[int]) -> bool:
    n = len(needle)
    if n == 0:
        return True
    first = needle[0]
    return any(hay[i] == first and list(hay[i : i + n]) == list(needle) for i in range(len(hay) - n + 1))


def _dir_digest(d: Path) -> str | None:
    """Digest of a model folder's weights: the GGUF sha256 for a folder traceless converted,
    else sha256 over (file name, file sha256) of the weight files, memoised by size+mtime in
    the model cache. None when the folder has no weight files."""
    marker = _read_marker(d)
    if marker is not None and isinstance(marker.get("sha256"), str):
        return str(marker["sha256"])
    files = sorted(p for p in d.glob("*") if p.suffix in (".safetensors", ".bin", ".gguf") and p.is_file())
    if not files:
        return None
    from traceless.models._catalog import models_dir, sha256_file

    stats = [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files]
    key = hashlib.sha256(json.dumps([str(d.resolve()), stats]).encode()).hexdigest()[:24]
    memo = models_dir() / f".digest-{key}.json"
    try:
        return str(json.loads(memo.read_text())["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0" + sha256_file(p).encode() + b"\n")
    digest = h.hexdigest()
    with contextlib.suppress(OSError):
        memo.write_text(json.dumps({"sha256": digest, "path": str(d)}))
    return digest
