"""A generation cache: identical calls (same backend identity, messages and decoding
config) are answered once. In memory, optionally persisted to a SQLite file so a resumed
study never pays for a generation twice.

Only deterministic calls are cached: greedy decoding, or sampling with an explicit seed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from traceless.models._base import ChatMessage, Generation, GenerationConfig, ModelBackend, WrapperBackend

__all__ = ["CachingBackend", "call_key"]


def call_key(identity: dict[str, Any], messages: list[ChatMessage], config: GenerationConfig) -> str:
    payload = json.dumps(
        {"model": identity, "messages": [m.model_dump() for m in messages], "config": config.model_dump()},
        sort_keys=True, default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


class CachingBackend(WrapperBackend):
    """Wraps a backend; ``hits``/``misses`` count cache use. Its capabilities (concurrency,
    slots, endpoint, ``uncached()``) are the wrapped backend's (``WrapperBackend``)."""

    def __init__(self, inner: ModelBackend, path: str | Path | None = None) -> None:
        super().__init__(inner)
        self._mem: dict[str, Generation] = {}
        self._lock = threading.Lock()
        self._flight: dict[str, threading.Event] = {}
        """Keys being generated now, by any thread (single flight: concurrent identical calls
        share one generation)."""
        self._db: sqlite3.Connection | None = None
        self.hits = 0
        self.misses = 0
        self._identity = inner.describe()
        if path is not None:
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, body TEXT NOT NULL)")

    def describe(self) -> dict[str, Any]:
        return self._identity

    @staticmethod
    def _cacheable(cfg: GenerationConfig) -> bool:
        return cfg.temperature == 0.0 or cfg.seed is not None

    def _lookup(self, key: str) -> Generation | None:
        with self._lock:
            g = self._mem.get(key)
            if g is None and self._db is not None:
                row = self._db.execute("SELECT body FROM generations WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    g = Generation.model_validate_json(row[0])
                    self._mem[key] = g
            return g

    def _store(self, key: str, g: Generation) -> None:
        with self._lock:
            self._mem[key] = g
            if self._db is not None:
                self._db.execute("INSERT OR REPLACE INTO generations(key, body) VALUES (?, ?)",
                                 (key, g.model_dump_json()))

    def generate(self, messages: list[ChatMessage], config: GenerationConfig | None = None) -> Generation:
        return self.generate_batch([messages], config)[0]

    def generate_batch(
        self, batch: list[list[ChatMessage]], config: GenerationConfig | None = None
    ) -> list[Generation]:
        cfg = config or GenerationConfig()
        if not self._cacheable(cfg):
            self.misses += len(batch)
            return self.inner.generate_batch(batch, cfg)
        keys = [call_key(self._identity, m, cfg) for m in batch]
        out: list[Generation | None] = [self._lookup(k) for k in keys]
        with self._lock:
            self.hits += sum(1 for g in out if g is not None)
        while any(g is None for g in out):
            mine, theirs = self._claim([k for k, g in zip(keys, out, strict=True) if g is None])
            if mine:
                idx = [keys.index(k) for k in mine]
                try:
                    gens = self.inner.generate_batch([batch[i] for i in idx], cfg)
                    with self._lock:
                        self.misses += len(idx)
                    for i, g in zip(idx, gens, strict=True):
                        self._store(keys[i], g)
                finally:
                    self._release(mine)
            for ev in theirs.values():  # the same call in flight in another thread: its reply, not a second one
                ev.wait()
            with self._lock:
                self.hits += sum(1 for g, k in zip(out, keys, strict=True) if g is None and k in theirs
                                 and k in self._mem)
                out = [g if g is not None else self._mem.get(k) for g, k in zip(out, keys, strict=True)]
        return [g for g in out if g is not None]

    def _claim(self, keys: list[str]) -> tuple[list[str], dict[str, threading.Event]]:
        """Split the missing ``keys`` into the ones this call generates (now marked in flight)
        and the ones another thread is generating (with the event its end sets). A call whose
        generation failed releases its keys unanswered, and a waiter then claims them itself."""
        mine: list[str] = []
        theirs: dict[str, threading.Event] = {}
        with self._lock:
            for k in dict.fromkeys(keys):
                if k in self._mem:
                    continue
                if k in self._flight:
                    theirs[k] = self._flight[k]
                else:
                    self._flight[k] = threading.Event()
                    mine.append(k)
        return mine, theirs

    def _release(self, keys: list[str]) -> None:
        with self._lock:
            for k in keys:
                self._flight.pop(k).set()

    def close_cache(self) -> None:
        """Close the cache file only (the wrapped backend stays open: it is the caller's)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def close(self) -> None:
        self.close_cache()
        self.inner.close()

