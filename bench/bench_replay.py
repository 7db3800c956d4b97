"""Selective replay (B7) vs full reset (B5) and prefix-cached full reset (B5′), per suite.

Prints recomputed-token ratios B5/B7 and B5′/B7 and wall-time ratios side by side, plus whether
B7 met the T−τ+1 transition bound and reproduced B5 token for token on every episode.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_replay.py                      # default model
    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_replay.py --model smollm2-135m-instruct --episodes 2
    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_replay.py --model smollm2-135m-instruct --long   # 16 steps, late τ
    .venv/bin/python bench/bench_replay.py --toy                                 # logic only, no model
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from traceless.models import GenerationConfig
from traceless.runtime import AgentRuntime, RuntimeConfig, ToyKVBackend, forget_state
from traceless.studies.replay import SUITES, agentdojo_status, late_target, make_env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--toy", action="store_true", help="toy KV backend (no model): checks logic and token counts")
    ap.add_argument("--suites", default="longmemeval,agentdojo,toolsandbox")
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--long", action="store_true", help="16-step episodes with the target in the last quarter")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.toy:
        backend = ToyKVBackend(lambda msgs, cfg, rng: "ok " + " ".join(msgs[-1].content.split()[:8]))
    else:
        from traceless.models._transformers import TransformersBackend

        backend = TransformersBackend.from_catalog(a.model, num_threads=a.threads)
    rt = AgentRuntime(backend, RuntimeConfig(generation=GenerationConfig(max_new_tokens=a.max_new_tokens),
                                             summary_max_new_tokens=16, seed=a.seed))
    print(f"model: {backend.describe()}  episodes/suite: {a.episodes}  steps: {16 if a.long else a.steps}"
          + ("  (targets in the last quarter)" if a.long else ""))
    head = ("suite", "n", "B5 tok", "B5' tok", "B7 tok", "B5/B7 tok", "B5'/B7 tok", "B5 s", "B5' s", "B7 s",
            "B5/B7 time", "B5'/B7 time", "bound met", "B7==B5")
    print(" | ".join(head))
    ok = True
    for suite in a.suites.split(","):
        if suite == "agentdojo" and agentdojo_status() is not None:
            print(f"{suite} | skipped: {agentdojo_status()}")
            continue
        steps = 16 if a.long else a.steps
        kw = {"late": True} if a.long and suite == "agentdojo" else {}
        eps = SUITES.get(suite)(a.episodes, steps, np.random.default_rng(a.seed), **kw)
        if a.long:
            eps = [late_target(ep, i) for i, ep in enumerate(eps)]
        tok: dict[str, list[int]] = {"B5": [], "B5p": [], "B7": []}
        sec: dict[str, list[float]] = {"B5": [], "B5p": [], "B7": []}
        met = same = 0
        for ep in eps:
            st = rt.run(ep.episode_id, ep.system, ep.observations, make_env(ep))
            outs = {}
            for op in ("B5", "B5p", "B7"):
                t0 = time.perf_counter()
                outs[op] = forget_state(rt, st, ep.request, op)
                sec[op].append(time.perf_counter() - t0)
                tok[op].append(outs[op].cost.tokens)
            met += bool(outs["B7"].bound_met)  # generations the backend ran == T-tau+1 replies + summaries
            same += outs["B7"].state.token_ids() == outs["B5"].state.token_ids()
            for o in outs.values():
                backend.crop(o.state.kv, 0)
        m = {k: statistics.mean(v) for k, v in tok.items()}
        s = {k: statistics.mean(v) for k, v in sec.items()}
        ok &= met == len(eps) and same == len(eps) and m["B7"] < m["B5p"] < m["B5"]
        print(" | ".join([suite, str(len(eps)), f"{m['B5']:.0f}", f"{m['B5p']:.0f}", f"{m['B7']:.0f}",
                          f"{m['B5'] / m['B7']:.2f}", f"{m['B5p'] / m['B7']:.2f}", f"{s['B5']:.2f}", f"{s['B5p']:.2f}",
                          f"{s['B7']:.2f}", f"{s['B5'] / s['B7']:.2f}", f"{s['B5p'] / s['B7']:.2f}",
                          f"{met}/{len(eps)}", f"{same}/{len(eps)}"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
