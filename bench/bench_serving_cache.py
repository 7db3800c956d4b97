"""The serving cache as a tier (issue 38.3), measured: a llama.cpp server with prompt caching
on keeps a record that was in a prompt; time-to-first-token of prompts that start with it
against matched controls, before and after the cache is cleared (``traceless.audit.
serving_cache_check``: n fixed in advance, two-sample KS).

    python bench/bench_serving_cache.py [--model qwen2.5-coder-0.5b-instruct] [--n 10] [--threads 1]
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
    args = ap.parse_args()
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


if __name__ == "__main__":
    sys.exit(main())
