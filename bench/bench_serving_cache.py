"""The serving cache as a tier (issue 38.3), measured: a llama.cpp server with prompt caching
on keeps a record that was in a prompt; time-to-first-token of prompts that start with it
against matched controls, before and after the cache is cleared (``traceless.audit.
serving_cache_check``: n fixed in advance, two-sample KS).

    python bench/bench_serving_cache.py [--model qwen2.5-coder-0.5b-instruct] [--n 10] [--threads 1] [--erasure]

``--erasure``: the erasure path instead (``serving_cache_tier``): 2n records carrying two users'
canaries served through the model a ``traceless`` memory system uses (S=0), then n probed
after the system's native deletion ``full_purge`` and n after traceless's erasure
(``erase_system``, which clears the served model's cache), each against matched controls.
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--erasure", action="store_true")
    args = ap.parse_args()
    if args.erasure:
        return _erasure(args.model, args.n, args.threads)
    from traceless.audit import serving_cache_check
    from traceless.models._catalog import gguf_path
    from traceless.models._llamacpp_server import LlamaCppServer

    record = ("Memory: the user's IBAN is DE89 3704 0044 0532 0130 00, they live at 12 Elm Street, Leeds, and their "
              "daughter's school is St Mary's. " + " ".join(["They prefer morning appointments and tea over coffee."] * 20))
    print(f"load {os.getloadavg()[0]:.2f}; model {args.model}; n={args.n} per group and phase; threads {args.threads}")
    with LlamaCppServer(gguf_path(args.model), ctx=2048, threads=args.threads, cache_prompt=True) as srv:
        t = serving_cache_check(srv, record, n=args.n, alpha=1e-3)
    for name, ph in (("before clearing", t.before), ("after clearing", t.after)):
        med = sorted(ph.record_s)[t.n // 2], sorted(ph.control_s)[t.n // 2]
        print(f"{name:<16} record median {med[0] * 1000:7.1f} ms  control median {med[1] * 1000:7.1f} ms  "
              f"ratio {ph.median_ratio:.3f}  KS p {ph.ks_p:.2e}  {ph.verdict}")
    print(f"{t.tokens} prompt tokens; one clear (restart) {t.clear_seconds:.2f} s")
    return 0 if t.before.verdict == "cached" and t.after.verdict == "not detected" else 1


def _erasure(model: str, n: int, threads: int) -> int:
    import tempfile
    from pathlib import Path

    from traceless.audit import SystemAuditConfig, audit_records, plant_canaries, serving_cache_tier
    from traceless.datasets import canary_sentence
    from traceless.models import HashingEmbedder
    from traceless.models._catalog import gguf_path
    from traceless.models._llamacpp_server import LlamaCppServer
    from traceless.models._served import ServedBackend
    from traceless.systems import DeletionTarget, SystemRuntime, erase_system, load_system_config, open_system

    me, other = plant_canaries(SystemAuditConfig(profiles=2))
    print(f"load {os.getloadavg()[0]:.2f}; model {model}; n={n} per group; threads {threads}; erasure path")
    with tempfile.TemporaryDirectory() as tmp, LlamaCppServer(gguf_path(model), ctx=2048, threads=threads,
                                                              cache_prompt=True) as srv:
        rt = SystemRuntime(ServedBackend(srv, name=f"llamacpp:{model}"), HashingEmbedder(), f"llamacpp:{model}")
        system = open_system("traceless", Path(tmp) / "m", load_system_config("traceless", {"S": 0}), rt)
        try:
            system.write([*me.sessions, *other.sessions])
            recs = audit_records([me.canary, other.canary], 2 * n, canary_sentence)
            native = serving_cache_tier(srv, recs[:n], lambda: system.delete(
                "full_purge", DeletionTarget(other.owner, other.canary, other.session_id)), alpha=1e-3)
            erased = serving_cache_tier(srv, recs[n:], lambda: erase_system(
                system, me.owner, [me.canary], state_dir=Path(tmp) / "s", key=b"k" * 32), alpha=1e-3, seed=39)
        finally:
            system.close()
    for name, ph in (("native full_purge", native), ("traceless erasure", erased)):
        med = sorted(ph.record_s)[n // 2], sorted(ph.control_s)[n // 2]
        print(f"{name:<18} record median {med[0] * 1000:7.1f} ms  control median {med[1] * 1000:7.1f} ms  "
              f"ratio {ph.median_ratio:.3f}  KS p {ph.ks_p:.2e}  {ph.verdict}")
    return 0 if native.verdict == "cached" and erased.verdict == "not detected" else 1


if __name__ == "__main__":
    sys.exit(main())
