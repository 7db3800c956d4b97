"""The serving cache as a tier (issue 38.3): a llama.cpp server with prompt caching keeps the
KV of recent prompts, so a deleted memory that was in a prompt is still on the server, and
its presence shows in time-to-first-token (the timing side channel of "Auditing Prompt
Caching in Language Model APIs", ICML 2025, arXiv 2502.07776).

The check, with ``n`` fixed before it runs: the conversation that carried the record goes
through the server once; then ``n`` probes whose prompt starts with that record and ``n``
matched controls (the same token count, filler the server never saw) are timed from the
client (wall clock to the first token, ``n_predict = 1``; never the server's own timings),
interleaved, and compared by a two-sample Kolmogorov–Smirnov test. Then the same after the
cache is cleared (``LlamaCppServer.clear_prompt_cache``, before every pair: a probe would
otherwise cache the record again). Verdict per phase: ``cached`` when p < ``alpha`` and the
record's median is the faster, else ``not detected``.

``serving_cache_tier`` is the same test around a deletion step (the erasure path's clear, or
nothing): ``n`` distinct records (each differs from its first token on, so one record's
probe cannot warm another's) go through the server first, then the step runs once, then each
record is probed once against its matched control. Nothing re-caches a record before it is
probed, so the test sees the server exactly as the step left it. ``audit_serving_cache`` runs
it twice per deletion phase of an audit whose model traceless serves: as the native deletion
leaves the server (nothing of the system touches it) and after traceless's erasure clears it.
"""

from __future__ import annotations

import json
import random
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["CachePhase", "ServingCacheTier", "audit_serving_cache", "serving_cache_check", "serving_cache_tier"]

_FILLER = ["river", "stone", "lamp", "cloud", "table", "green", "seven", "honey", "window", "garden", "paper", "silver", "morning", "quiet", "forest", "bridge", "orange", "candle", "winter", "harbor", "meadow", "pencil", "thunder"]
_SYSTEM = "You are a helpful assistant. What you remember about the user:\n"


class CachePhase(BaseModel):
    """One phase's timings (seconds to the first token) and its test."""

    model_config = ConfigDict(extra="forbid")

    record_s: list[float]
    """Probes whose prompt starts with the record."""
    control_s: list[float]
    """Matched controls (same token count, unseen filler)."""
    ks_p: float
    """Two-sample Kolmogorov–Smirnov p-value, record vs control."""
    median_ratio: float
    """Median record time / median control time (< 1: the record's prefix is served faster)."""
    verdict: Literal["cached", "not detected"]
    """``cached``: p < alpha with the record faster; else ``not detected``."""


class ServingCacheTier(BaseModel):
    """The serving-cache tier of one served model, before and after clearing it."""

    model_config = ConfigDict(extra="forbid")

    n: int
    """Probes per group and phase, fixed before the run."""
    tokens: int
    """Prompt tokens of the record's prefix (and of each control's)."""
    alpha: float
    """The test's level."""
    before: CachePhase
    """After the conversation (the record deleted from memory, the server untouched; in an
    audit: as the native deletion leaves it)."""
    after: CachePhase
    """With the cache cleared (``serving_cache_check``: before every pair; in an audit: by
    traceless's erasure, once, after the records were served)."""
    clear_seconds: float
    """Median seconds one clear took."""
    cleared_by: str
    """How the cache was cleared."""
    cache_prompt: bool | None = None
    """The server's ``cache_prompt`` default (the opt-in; the KV is kept either way); None:
    not recorded."""


def _post(root: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(root + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only: never a proxy
    with opener.open(req, timeout=600) as r:
        out: dict[str, Any] = json.loads(r.read())
    return out


def _ntokens(root: str, text: str) -> int:
    return len(_post(root, "/tokenize", {"content": text})["tokens"])


def _control(root: str, tokens: int, rng: random.Random) -> str:
    """Filler of exactly ``tokens`` tokens (words added or dropped until it fits)."""
    words = [rng.choice(_FILLER) for _ in range(tokens)]
    for _ in range(4 * tokens):
        got = _ntokens(root, _SYSTEM + " ".join(words))
        if got == tokens:
            return " ".join(words)
        if got > tokens:
            words.pop()
        else:
            words.append(rng.choice(_FILLER))
    raise ValueError(f"could not build a control of {tokens} tokens")


def _ttft(root: str, prompt: str) -> float:
    t0 = time.perf_counter()
    _post(root, "/completion", {"prompt": prompt, "n_predict": 1, "cache_prompt": True, "temperature": 0})
    return time.perf_counter() - t0


def _phase(root: str, record: str, tokens: int, n: int, rng: random.Random, alpha: float,
           clear: Callable[[], float] | None, clears: list[float]) -> CachePhase:
    from scipy.stats import ks_2samp

    rec: list[float] = []
    ctl: list[float] = []
    for i in range(n):
        control = _control(root, tokens, rng)
        question = f"\nUser: question {rng.randrange(10**6)}\nAssistant:"
        if clear is not None:
            clears.append(clear())
        pair = [(rec, _SYSTEM + record + question), (ctl, _SYSTEM + control + question)]
        for out, prompt in pair if i % 2 == 0 else pair[::-1]:  # alternate: no order effect
            out.append(_ttft(root, prompt))
    p = float(ks_2samp(rec, ctl).pvalue)
    ratio = sorted(rec)[n // 2] / sorted(ctl)[n // 2]
    return CachePhase(record_s=rec, control_s=ctl, ks_p=p, median_ratio=ratio,
                      verdict="cached" if p < alpha and ratio < 1 else "not detected")


def serving_cache_check(server: Any, record: str, *, n: int = 10, alpha: float = 0.01,
                        seed: int = 38) -> ServingCacheTier:
    """The tier on a running ``LlamaCppServer`` started with ``cache_prompt=True``: the record's
    conversation, then the two phases (the module's protocol)."""
    root, rng = server.address, random.Random(seed)
    tokens = _ntokens(root, _SYSTEM + record)
    _ttft(root, _SYSTEM + record + "\nUser: hello\nAssistant:")  # the conversation that carried it
    clears: list[float] = []
    before = _phase(root, record, tokens, n, rng, alpha, None, clears)
    after = _phase(root, record, tokens, n, rng, alpha, server.clear_prompt_cache, clears)
    return ServingCacheTier(n=n, tokens=tokens, alpha=alpha, before=before, after=after,
                            clear_seconds=sorted(clears)[len(clears) // 2],
                            cleared_by="restart of the llama.cpp server on the same port")


def _probe_pairs(root: str, records: list[str], rng: random.Random, alpha: float) -> CachePhase:
    """Each record's prefix once against its token-matched control (alternating order); KS."""
    from scipy.stats import ks_2samp

    rec: list[float] = []
    ctl: list[float] = []
    for i, record in enumerate(records):
        control = _control(root, _ntokens(root, _SYSTEM + record), rng)
        question = f"\nUser: question {rng.randrange(10**6)}\nAssistant:"
        pair = [(rec, _SYSTEM + record + question), (ctl, _SYSTEM + control + question)]
        for out, prompt in pair if i % 2 == 0 else pair[::-1]:
            out.append(_ttft(root, prompt))
    n = len(records)
    p = float(ks_2samp(rec, ctl).pvalue)
    ratio = sorted(rec)[n // 2] / sorted(ctl)[n // 2]
    return CachePhase(record_s=rec, control_s=ctl, ks_p=p, median_ratio=ratio,
                      verdict="cached" if p < alpha and ratio < 1 else "not detected")


def serving_cache_tier(server: Any, records: Sequence[str], step: Callable[[], object], *, alpha: float = 0.01,
                       seed: int = 38) -> CachePhase:
    """``records`` (n = their number, fixed by the caller) each served in a conversation, then
    ``step`` once (the deletion under test), then the probes (the module's protocol)."""
    if len(records) < 2 or len({tuple(r.split()[:2]) for r in records}) < len(records):
        raise ValueError("give at least 2 records that differ in their first two words")
    root, rng = server.address, random.Random(seed)
    for r in records:
        _ttft(root, _SYSTEM + r + "\nUser: hello\nAssistant:")
    step()
    return _probe_pairs(server.address, list(records), rng, alpha)


_TAGS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
         "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey",
         "xray", "yankee", "zulu"]


def audit_records(canaries: Sequence[str], n: int, sentence: Callable[[str], str]) -> list[str]:
    """``n`` distinct memory texts, each carrying one of ``canaries`` (in turn) as ``sentence``
    tells it, tagged from the second word on (no two share a prefix past the tag)."""
    if not 2 <= n <= len(_TAGS) ** 2:
        raise ValueError(f"the serving-cache tier takes 2..{len(_TAGS) ** 2} records, got {n}")
    tags = [a if n <= len(_TAGS) else f"{a}-{b}" for a in _TAGS for b in (_TAGS if n > len(_TAGS) else [""])][:n]
    filler = " ".join(["They prefer morning appointments and tea over coffee."] * 8)
    return [f"Memory {tag}: {sentence(canaries[i % len(canaries)])} {filler}" for i, tag in enumerate(tags)]


def audit_serving_cache(server: Any, canaries: Sequence[str], clear: Callable[[], float], *, n: int,
                        sentence: Callable[[str], str], alpha: float = 1e-3, seed: int = 38) -> ServingCacheTier:
    """The tier of one deletion phase (the module's protocol, ``n`` records per group): as the
    native deletion leaves the server, then with ``clear`` (the erasure's step: seconds) run
    once after the second group's records were served."""
    records = audit_records(canaries, 2 * n, sentence)
    took: list[float] = []
    before = serving_cache_tier(server, records[:n], lambda: None, alpha=alpha, seed=seed)
    after = serving_cache_tier(server, records[n:], lambda: took.append(clear()), alpha=alpha, seed=seed + 1)
    return ServingCacheTier(n=n, tokens=min(_ntokens(server.address, _SYSTEM + r) for r in records), alpha=alpha,
                            before=before, after=after, clear_seconds=took[0] if took else 0.0,
                            cleared_by="traceless's erasure: restart of the llama.cpp server on the same port",
                            cache_prompt=getattr(server, "cache_prompt", None))
