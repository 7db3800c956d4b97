"""Plain vs n-gram speculative decoding on the audit's llama.cpp engine, side by side in one run
(issue #27 item 2).

    python bench/bench_decode.py                                  # the default audit, plain vs ngram-map-k:16
    python bench/bench_decode.py --profiles 1 --modes none        # a small slice (1 user, before-row only)
    python bench/bench_decode.py --spec ngram-simple:16 --spec ngram-mod:16 --frontier
    python bench/bench_decode.py --no-spec --turn-stop            # plain vs stopped at the turn markers

Each run is ``traceless audit``'s engine (``audit_model``: one slot, prompt cache off, the
generation cache; defaults: 3 synthetic users, S=1, k=3, every forget mode, 40-token replies)
with the same settings, once per decoding setting, the plain one first. Every request the model
gets (the memory write's summaries, every probe) is recorded. ``--frontier`` adds the frontier
study's bench slice (bench/bench_frontier.py's ``SLICE``, one instance; needs LongMemEval)
run the same way.

``--turn-stop`` adds plain decoding with ``EngineOptions(turn_stop=True)`` (stop strings: the chat
template's turn markers); its replies are checked to be the plain ones or a prefix of them cut
where the plain reply writes a marker or a new turn, with no more decoded tokens. After the
table, per reply budget (summaries, probes) and finish reason: the replies, their decoded
tokens, how many write a turn marker or a new turn, and the tails of those cut by the budget
(what is decoded at the end of a reply).

Printed per setting: wall, decoded tokens, the server's decode rate (tokens / decode time, from
each response's ``timings``), draft tokens and the share accepted, and the replies that hit the
token budget (``finish_reason == "length"``: decoding stopped by the budget, not by the model's
end of turn). Then the token-identity check of EVERY reply: the same requests, and for each the
same text and the same number of decoded tokens as the plain run. Exit 1 on any difference,
each one listed with the canaries masked. Load average before/after is printed (the machine
may be shared: the ratios are measured side by side).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from traceless.audit import SystemAuditConfig, audit_model, run_system_audit  # noqa: E402
from traceless.audit import _system_audit as engine  # noqa: E402
from traceless.models import CachingBackend, EngineOptions, load_backend, load_embedder  # noqa: E402
from traceless.models._openai import OpenAIBackend  # noqa: E402
from traceless.systems import SystemRuntime  # noqa: E402

Reply = dict[str, Any]
"""One recorded request: text, decoded tokens, finish reason, the server's timings."""


class Recorder:
    """Every chat completion of a run, by request (messages + generation settings)."""

    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {}
        self.canaries: set[str] = set()
        self._lock = threading.Lock()
        self._local = threading.local()

    @contextmanager
    def active(self) -> Iterator[None]:
        orig_gen, orig_parse, orig_red = OpenAIBackend.generate, OpenAIBackend._parse, engine._redactor
        rec = self

        def parse(self: OpenAIBackend, data: dict[str, Any], cfg: Any, total: float, url: str) -> Any:
            rec._local.data = data
            return orig_parse(self, data, cfg, total, url)

        def gen(self: OpenAIBackend, messages: Any, config: Any = None) -> Any:
            g = orig_gen(self, messages, config)
            data = getattr(rec._local, "data", {}) or {}
            key = hashlib.sha256(json.dumps([[m.role, m.content] for m in messages]).encode()
                                 + (config.cache_key() if config else "").encode()).hexdigest()
            choice = (data.get("choices") or [{}])[0]
            with rec._lock:
                rec.replies[key] = {"text": g.text, "tokens": g.completion_tokens, "budget": cfg_budget(config),
                                    "finish": choice.get("finish_reason"), "timings": data.get("timings") or {}}
            return g

        def red(canaries: list[str], reveal: bool) -> Callable[[str], str]:
            with rec._lock:
                rec.canaries.update(c for c in canaries if c)
            return orig_red(canaries, reveal)

        OpenAIBackend.generate, OpenAIBackend._parse = gen, parse  # type: ignore[method-assign]
        engine._redactor = red
        try:
            yield
        finally:
            OpenAIBackend.generate, OpenAIBackend._parse = orig_gen, orig_parse  # type: ignore[method-assign]
            engine._redactor = orig_red


def cfg_budget(config: Any) -> int | None:
    return int(config.max_new_tokens) if config is not None else None


def _audit(spec: str, a: argparse.Namespace, out: Path, rec: Recorder, turn_stop: bool = False) -> float:
    modes = () if a.modes == "all" else tuple(m.strip() for m in a.modes.split(",") if m.strip())
    sys_cfg: dict[str, Any] = {"S": a.S, "k": 3, **({"modes": list(modes)} if modes and a.modes != "none" else {})}
    t0 = time.perf_counter()
    resolved, be = audit_model(a.model, engine=EngineOptions(speculation=spec, threads=a.threads, turn_stop=turn_stop))
    try:
        cfg = SystemAuditConfig(model=resolved, profiles=a.profiles, max_new_tokens=a.max_new_tokens,
                                system_config=sys_cfg, **({"operations": ()} if a.modes == "none" else {}))
        with rec.active():
            run_system_audit(cfg, SystemRuntime(CachingBackend(be), load_embedder(), resolved), out)
        print(f"  audit [{spec}]: {time.perf_counter() - t0:.1f} s, identity {be.describe().get('engine')}",
              file=sys.stderr, flush=True)
    finally:
        be.close()
    return time.perf_counter() - t0


def _frontier(spec: str, a: argparse.Namespace, out: Path, rec: Recorder, turn_stop: bool = False) -> float:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_frontier import SLICE

    from traceless.studies import run_study

    t0 = time.perf_counter()
    be = load_backend(f"llamacpp:{a.model}", parallel=1, cache_prompt=False, speculation=spec,
                      num_threads=a.threads, turn_stop=turn_stop)
    try:
        with rec.active():
            run_study("frontier", out, {**SLICE, "n": 1}, backend=be, model_tag="bench", progress=False)
    finally:
        be.close()
    return time.perf_counter() - t0


def _stats(replies: dict[str, Reply]) -> dict[str, float]:
    t = [r["timings"] for r in replies.values()]
    return {"requests": len(replies), "decoded": sum(r["tokens"] for r in replies.values()),
            "decode_s": sum(x.get("predicted_ms", 0.0) for x in t) / 1000,
            "prefill_s": sum(x.get("prompt_ms", 0.0) for x in t) / 1000,
            "draft": sum(x.get("draft_n", 0) for x in t), "accepted": sum(x.get("draft_n_accepted", 0) for x in t),
            "length": sum(r["finish"] == "length" for r in replies.values())}


def _mask(text: str, canaries: set[str]) -> str:
    for c in sorted(canaries, key=len, reverse=True):
        text = text.replace(c, "[canary]")
    return text


def differences(plain: dict[str, Reply], other: dict[str, Reply], canaries: set[str]) -> list[str]:
    """Every request whose reply differs (text or decoded-token count), or that only one run made."""
    out = []
    for k in sorted(set(plain) | set(other)):
        a, b = plain.get(k), other.get(k)
        if a is None or b is None:
            out.append(f"{k[:12]}: only in {'the speculative' if a is None else 'the plain'} run")
        elif (a["text"], a["tokens"]) != (b["text"], b["tokens"]):
            out.append(f"{k[:12]}: plain {a['tokens']} tok {_mask(a['text'], canaries)!r}\n"
                       f"{'':14}spec  {b['tokens']} tok {_mask(b['text'], canaries)!r}")
    return out


_AFTER = re.compile(r"<\|[A-Za-z_]+\|>|<(?:start|end)_of_turn>|\n(?:user|assistant|system|Human|User|Assistant)\s*[:\n]")
"""What a reply that went on past its own turn would contain: a template marker or a new turn."""


def prefix_check(plain: dict[str, Reply], stopped: dict[str, Reply], canaries: set[str]) -> list[str]:
    """Every request whose stopped reply is NOT the plain reply or a prefix of it cut at a turn
    marker (text), with no more decoded tokens; or that only one run made."""
    out = []
    for k in sorted(set(plain) | set(stopped)):
        a, b = plain.get(k), stopped.get(k)
        if a is None or b is None:
            out.append(f"{k[:12]}: only in {'the stopped' if a is None else 'the plain'} run")
        elif (a["text"], a["tokens"]) == (b["text"], b["tokens"]):
            continue
        elif not (a["text"].startswith(b["text"]) and b["tokens"] <= a["tokens"]
                  and _AFTER.match(a["text"], len(b["text"].rstrip()))):
            out.append(f"{k[:12]}: plain {a['tokens']} tok {_mask(a['text'], canaries)!r}\n"
                       f"{'':14}stop  {b['tokens']} tok {_mask(b['text'], canaries)!r}")
    return out


def after_the_answer(wname: str, plain: Recorder) -> None:
    """What the plain run decodes at the end of its replies, by budget (summaries vs probes)."""
    by: dict[tuple[int | None, str], list[Reply]] = collections.defaultdict(list)
    for r in plain.replies.values():
        by[(r.get("budget"), str(r["finish"]))].append(r)
    for (budget, finish), rs in sorted(by.items(), key=lambda x: (x[0][0] or 0, x[0][1])):
        marked = sum(bool(_AFTER.search(r["text"])) for r in rs)
        print(f"{wname}: budget {budget}, finish {finish}: {len(rs)} replies, {sum(r['tokens'] for r in rs)} "
              f"decoded tokens, {marked} with a turn marker or a new turn in the text")
        if finish == "length":
            for r in rs[:3]:
                print(f"    ... {_mask(r['text'][-90:], plain.canaries)!r}")


def add_audit_args(ap: argparse.ArgumentParser, *, profiles: int = 3, modes: str = "all") -> None:
    """The audit's options every decoding bench takes (bench_decode, bench_threads, bench_load)."""
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct", help="a catalog model name")
    ap.add_argument("--profiles", type=int, default=profiles)
    ap.add_argument("--S", type=int, default=1)
    ap.add_argument("--modes", default=modes, help="'all', 'none' (before-row only) or a comma list of forget modes")
    ap.add_argument("--max-new-tokens", type=int, default=40)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_audit_args(ap)
    ap.add_argument("--threads", type=int, default=None, help="server threads (default: the CPUs free)")
    ap.add_argument("--spec", action="append", help="speculation TYPE[:DRAFT_MAX] (repeatable; default ngram-map-k:16)")
    ap.add_argument("--no-spec", action="store_true", help="no speculative run (plain and --turn-stop only)")
    ap.add_argument("--turn-stop", action="store_true", help="also plain decoding stopped at the template's turn "
                    "markers (EngineOptions.turn_stop), checked as a prefix of the plain replies")
    ap.add_argument("--frontier", action="store_true", help="also the frontier bench slice (needs LongMemEval)")
    a = ap.parse_args(argv)
    runs = [("none", "none", False), *(() if a.no_spec else ((s, s, False) for s in a.spec or ["ngram-map-k:16"]))]
    if a.turn_stop:
        runs.append(("none + turn stop", "none", True))
    load0 = os.getloadavg()
    load_embedder()  # loaded once, outside the timings
    workloads: list[tuple[str, Callable[..., float]]] = [("audit", _audit)]
    if a.frontier:
        workloads.append(("frontier", _frontier))
    failed = 0
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        for wname, run in workloads:
            res: dict[str, tuple[float, Recorder, bool]] = {}
            for i, (label, spec, stop) in enumerate(runs):
                rec = Recorder()
                res[label] = (run(spec, a, Path(tmp) / f"{wname}{i}", rec, turn_stop=stop), rec, stop)
            failed |= _report(wname, a, res)
    print(f"\nload average (1/5/15 min): {'/'.join(f'{x:.1f}' for x in load0)} before, "
          f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())} after, on {os.cpu_count()} cores")
    return failed


def _report(wname: str, a: argparse.Namespace, res: dict[str, tuple[float, Recorder, bool]]) -> int:
    print(f"\n## {wname} (profiles {a.profiles}, S={a.S}, modes {a.modes}, {a.max_new_tokens}-token replies)\n")
    print("| decoding | wall s | requests | decoded tok | decode tok/s | prefill s | drafted | accepted | "
          "hit budget | wall / plain |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    plain_wall = res["none"][0]
    for label, (wall, rec, _) in res.items():
        s = _stats(rec.replies)
        rate = s["decoded"] / s["decode_s"] if s["decode_s"] else float("nan")
        acc = f"{s['accepted']} ({s['accepted'] / s['draft']:.0%})" if s["draft"] else "-"
        print(f"| {label} | {wall:.1f} | {s['requests']} | {s['decoded']} | {rate:.1f} | {s['prefill_s']:.1f} | "
              f"{s['draft']} | {acc} | {s['length']} | {wall / plain_wall:.2f} |")
    failed = 0
    plain = res["none"][1]
    for label, (_, rec, stop) in list(res.items())[1:]:
        check = prefix_check if stop else differences
        diffs = check(plain.replies, rec.replies, plain.canaries | rec.canaries)
        what = "a prefix cut at a turn marker of (or equal to)" if stop else "token-identical to"
        if diffs:
            failed = 1
            n = len(set(plain.replies) | set(rec.replies))
            print(f"\n{wname}: {len(diffs)} of {n} requests (either run) of {label} are NOT {what} plain "
                  "(a differing summary changes the later prompts, so they appear as requests only one run made):")
            for d in diffs:
                print(f"  {d}")
        else:
            cut = sum(plain.replies[k]["text"] != r["text"] for k, r in rec.replies.items())
            print(f"\n{wname}: all {len(plain.replies)} replies of {label} {what} plain ({cut} cut)")
    after_the_answer(wname, plain)
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
