"""The replay study (paper 002): three suites × forget operators B0–B9 (+B5′, B6 with the secret,
B7 with session-start checkpoints, target-span KV excision), with elicitation, stochastic,
behavioural and counterfactual audits; plus matched-seed equivalence at temperature 0.7, the
injection-position sweep and the derivation-depth ablation. Run with ``traceless study run replay``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from traceless.errors import ConfigError, StudyError
from traceless.models import GenerationConfig
from traceless.run import STUDIES, Cell, CellResult, RunContext, Study, derive_seed
from traceless.runtime import (
    FORGET_OPERATORS,
    AgentRuntime,
    ForgetOutcome,
    Observation,
    RuntimeConfig,
    RuntimeState,
    clone_state,
    forget_state,
    independent_steps,
)
from traceless.studies.replay._audits import (
    PROBE_NAMES,
    ProbeCache,
    action_of,
    cad,
    distances,
    executed_actions,
    leaked,
    probes_for,
    state_digest,
)
from traceless.studies.replay._suites import (
    SUITES,
    Episode,
    agentdojo_status,
    make_env,
    read_longmemeval_records,
)

__all__ = ["ReplayConfig", "ReplayStudy", "DEFAULT_OPERATORS", "place_target", "late_target", "long_episodes"]

DEFAULT_OPERATORS: tuple[str, ...] = ("B5", "B0", "B1", "B2", "B3", "B4", "B5p", "B6", "B6b", "B7", "B7s", "B8",
                                      "B9", "kv_excision")
"""B5 first: it is the target-excluded reference every other operator is compared with."""


class ReplayConfig(BaseModel):
    """Configuration of the replay study."""

    model_config = ConfigDict(frozen=True)

    suites: list[str] = Field(default_factory=lambda: ["longmemeval", "agentdojo", "toolsandbox"])
    """Suites to run (longmemeval, agentdojo, toolsandbox)."""
    episodes: int = Field(2, ge=1)
    """Episodes per suite."""
    steps: int = Field(4, ge=2)
    """Observations (transitions) per episode, over two sessions."""
    operators: list[str] = Field(default_factory=lambda: list(DEFAULT_OPERATORS))
    """Operators (B7s = B7 restoring from session-start checkpoints only)."""
    max_new_tokens: int = Field(24, ge=1)
    """Reply length bound of the agent."""
    summary_tokens: int = Field(16, ge=1)
    """Length bound of end-of-session summaries."""
    probe_tokens: int = Field(16, ge=1)
    """Length bound of probe and task answers."""
    samples: int = Field(5, ge=1)
    """Leak@k samples at ``temperature`` (k = 5 in the paper); also the matched-seed draws."""
    temperature: float = Field(0.7, gt=0.0)
    """Temperature of the stochastic audits."""
    stochastic_episodes: int = Field(1, ge=0)
    """Episodes per suite replayed whole at ``temperature`` (matched-seed B7 vs B5 equivalence)."""
    sweep: bool = True
    """Injection-position sweep (τ = 1 … steps) on the first episode of each suite."""
    depths: list[int] = Field(default_factory=lambda: [0, 1, 2])
    """Derivation depths (restatement steps after the target) for the depth ablation (toolsandbox)."""
    longmemeval: str | None = None
    """LongMemEval file (upstream JSON) or a shipped dataset's name; default: the shipped
    ``longmemeval-oracle-99`` (``study run`` fills it from ``$TRACELESS_LONGMEMEVAL``)."""
    main: bool = True
    """Run the main grid (suites × episodes × operators with the full audits)."""
    long_episodes: int = Field(0, ge=0)
    """Episodes per suite of the long-episode slice (``long_steps`` steps, target in the last quarter):
    B5, B7 (and B6) cost and wall time, the attribution-oracle ablation, independent-seed draws."""
    long_steps: int = Field(16, ge=4)
    """Steps of a long episode (the paper's 9.3× needs long trajectories with late targets)."""
    long_min_ratio: float = Field(0.0, ge=0.0)
    """When > 0, every long episode's target step τ is placed so that T/(T−τ+1) ≥ this (the largest
    B5/B7 ratio an episode allows): ``--set long_steps=32 --set long_min_ratio=10`` makes the paper's
    9.3× reachable. 0: the target anywhere in the last quarter (the first long slices)."""
    long_pad: bool = False
    """LongMemEval long episodes: pad an instance with fewer user turns than ``long_steps`` with user
    turns of other instances placed before its own (distractor history, as LongMemEval's S split
    builds its haystacks from other instances' sessions). Off: such instances are skipped (the shipped
    99 hold one with 32 user turns)."""
    oracle_fractions: list[float] = Field(default_factory=lambda: [0.0, 0.5, 1.0])
    """Attribution-oracle ablation: fractions of the truly independent post-target steps the oracle
    certifies (0 = B7; 1 = every independent step re-entered without decoding)."""
    seed: int = 0
    """Base seed."""


def place_target(ep: Episode, tau: int) -> Episode:
    """The same episode with the target span moved into observation ``tau`` (position sweep)."""
    span = ep.request.span
    obs: list[Observation] = []
    for i, o in enumerate(ep.observations, 1):
        text = " ".join(o.text.replace(span, " ").split()) or "(no content)"
        if i == tau:
            text = f"{text} {span}"
        obs.append(o.model_copy(update={"text": text, "remember": i == tau}))
    return ep.model_copy(update={"observations": obs, "episode_id": f"{ep.episode_id}@tau{tau}"})


def late_target(ep: Episode, index: int, min_ratio: float = 0.0) -> Episode:
    """A long episode with its target in the last quarter: kept where it already is, else moved
    into one of the latest observations of the same kind (a tool return stays a tool return),
    the ``index``-th episode taking the ``index``-th latest such step (never the final one when
    another exists). ``min_ratio`` > 0 narrows "late" to the steps τ with T/(T−τ+1) ≥ min_ratio."""
    n = len(ep.observations)

    def late_enough(t: int) -> bool:
        return 4 * t > 3 * n and n >= min_ratio * (n - t + 1)

    if late_enough(ep.tau):
        return ep
    kind = ep.observations[ep.tau - 1].kind
    late = [t for t in range(n, 0, -1) if late_enough(t)]
    cands = [t for t in late if ep.observations[t - 1].kind == kind and t < n] or [t for t in late if t < n] or late
    return place_target(ep, cands[index % len(cands)])


def long_episodes(cfg: ReplayConfig, suite: str) -> list[Episode]:
    """The long-episode slice of one suite: ``long_episodes`` episodes of ``long_steps`` steps,
    their targets placed late by ``late_target`` (seeded from ``cfg.seed``: the same config gives
    the same episodes)."""
    rng = np.random.default_rng(derive_seed(cfg.seed, "long-episodes", suite))
    kw: dict[str, Any] = {"late": True} if suite == "agentdojo" else {}
    if suite == "longmemeval":
        if cfg.longmemeval:
            kw["path"] = cfg.longmemeval
        if cfg.long_pad:
            kw["pad"] = True
    eps = SUITES.get(suite)(cfg.long_episodes, cfg.long_steps, rng, **kw)
    return [late_target(ep, i, cfg.long_min_ratio) for i, ep in enumerate(eps)]


def _kv_backend(ctx: RunContext[Any]) -> Any:
    m: Any = ctx.require_model()
    inner = m.uncached()
    for name in ("prefill", "decode", "crop", "fork", "chat_token_ids"):
        if not hasattr(inner, name):
            raise StudyError(
                f"the replay study needs a local model with KV-cache access; {inner.name!r} "
                f"({type(inner).__name__}) has no {name}(). Run it with an embedded model, e.g. "
                "--model qwen2.5-coder-0.5b-instruct or --model smollm2-135m-instruct"
            )
    return inner


@STUDIES.register("replay", help="paper 002: execution-state unlearning, selective replay vs B0–B9")
class ReplayStudy(Study[ReplayConfig]):
    """Paper 002 as a grid."""

    name: ClassVar[str] = "replay"
    version: ClassVar[str] = "1"
    bundle_extra: ClassVar[tuple[str, ...]] = ("episode", "suite", "operator", "tau")
    """Episode id, suite, operator and injection step: what the report groups by."""
    config_cls: ClassVar[type[BaseModel]] = ReplayConfig
    resume_may_change: ClassVar[frozenset[str]] = frozenset({"episodes", "long_episodes"})
    """``--resume --set episodes=N`` / ``long_episodes=N`` grows the grid: every suite's first
    ``n`` episodes of a count ``m > n`` are its ``n`` episodes (seeded per suite, drawn one by
    one; ``tests/unit/test_replay_grow.py``), so the stored cells keep their meaning."""

    # ------------------------------------------------------------------ grid

    def validate(self, config: ReplayConfig) -> None:
        """The LongMemEval file (when that suite runs) exists and parses; AgentDojo loads."""
        if "longmemeval" in config.suites:
            read_longmemeval_records(config.longmemeval)
        if "agentdojo" in config.suites and (why := agentdojo_status()) is not None:
            raise StudyError(f"{why}; or leave the agentdojo suite out (--set suites=longmemeval,toolsandbox)")

    def cells(self, config: ReplayConfig) -> Iterable[Cell]:
        for op in config.operators:
            if op != "B7s":
                FORGET_OPERATORS.get(op)
        for s in config.suites:
            SUITES.get(s)
        if config.main and "B5" not in config.operators:
            raise ConfigError("operators must include B5: it is the reference every audit compares with")
        if config.long_episodes and config.long_min_ratio > config.long_steps:
            raise ConfigError(f"long_min_ratio={config.long_min_ratio:g} cannot be met by {config.long_steps}-step "
                              f"episodes (T/(T-tau+1) is at most T); raise long_steps to at least "
                              f"{config.long_min_ratio:g} or lower long_min_ratio")
        if any(not 0.0 <= f <= 1.0 for f in config.oracle_fractions):
            raise ConfigError(f"oracle_fractions must lie in [0, 1]; got {config.oracle_fractions}")
        for s in config.suites:
            for i in range(config.long_episodes):
                k = f"long/{s}/{i}"
                yield Cell(key=k, group=k, params={"kind": "long", "suite": s, "index": i},
                           seed=derive_seed(config.seed, s, i, "long"))
        for s in config.suites:
            for i in range(config.episodes if config.main else 0):
                g = f"main/{s}/{i}"
                for op in config.operators:
                    yield Cell(key=f"{g}/{op}", group=g, params={"kind": "main", "suite": s, "index": i, "operator": op},
                               seed=derive_seed(config.seed, s, i))
        for s in config.suites:
            for i in range(min(config.stochastic_episodes, config.episodes) if config.main else 0):
                k = f"stoch/{s}/{i}"
                yield Cell(key=k, group=k, params={"kind": "stochastic", "suite": s, "index": i},
                           seed=derive_seed(config.seed, s, i, "stochastic"))
        if config.sweep:
            for s in config.suites:
                for t in range(1, config.steps + 1):
                    yield Cell(key=f"sweep/{s}/tau={t}", group=f"sweep/{s}",
                               params={"kind": "sweep", "suite": s, "index": 0, "tau": t},
                               seed=derive_seed(config.seed, s, 0))
        if "toolsandbox" in config.suites:
            for d in config.depths:
                yield Cell(key=f"depth/{d}", group="depth", params={"kind": "depth", "suite": "toolsandbox",
                                                                    "index": 0, "depth": d},
                           seed=derive_seed(config.seed, "toolsandbox", 0))

    # ------------------------------------------------------------------ setup

    def _episodes(self, ctx: RunContext[ReplayConfig], suite: str, depth: int = 0) -> list[Episode]:
        key = f"episodes/{suite}/{depth}"
        if key not in ctx.state:
            cfg = ctx.config
            rng = np.random.default_rng(derive_seed(cfg.seed, "episodes", suite))
            kw: dict[str, Any] = {"depth": depth} if depth else {}
            if suite == "longmemeval" and cfg.longmemeval:
                kw["path"] = cfg.longmemeval
            ctx.state[key] = SUITES.get(suite)(cfg.episodes, cfg.steps, rng, **kw)
        eps: list[Episode] = ctx.state[key]
        return eps

    def _long_episodes(self, ctx: RunContext[ReplayConfig], suite: str) -> list[Episode]:
        key = f"episodes/{suite}/long"
        if key not in ctx.state:
            ctx.state[key] = long_episodes(ctx.config, suite)
        out: list[Episode] = ctx.state[key]
        return out

    def _runtime(self, ctx: RunContext[ReplayConfig], seed: int, temperature: float = 0.0) -> AgentRuntime:
        cfg = ctx.config
        gen = GenerationConfig(max_new_tokens=cfg.max_new_tokens, temperature=temperature)
        return AgentRuntime(_kv_backend(ctx), RuntimeConfig(generation=gen, summary_max_new_tokens=cfg.summary_tokens,
                                                            seed=seed % (2**31)))

    def run_group(self, ctx: RunContext[ReplayConfig], cells: list[Cell]) -> Iterator[CellResult]:
        kind = cells[0].params["kind"]
        if kind == "main":
            yield from self._main(ctx, cells)
        elif kind == "stochastic":
            yield from self._stochastic(ctx, cells)
        elif kind == "sweep":
            yield from self._sweep(ctx, cells)
        elif kind == "long":
            yield from self._long(ctx, cells)
        else:
            yield from self._depth(ctx, cells)

    # ------------------------------------------------------------------ audits

    def _audit(self, ctx: RunContext[ReplayConfig], rt: AgentRuntime, ep: Episode, st: RuntimeState,
               cache: ProbeCache, *, independent: bool = False, probes: tuple[str, ...] = PROBE_NAMES) -> dict[str, Any]:
        cfg = ctx.config
        dig = state_digest(rt, st)
        greedy = GenerationConfig(max_new_tokens=cfg.probe_tokens)
        out: dict[str, Any] = {"probes": {}, "tasks": [], "draws": [], "indep": []}
        for p in probes_for(ep.request, ep.task_probe):
            if p.name in probes:
                out["probes"][p.name] = cache.ask(rt, st, dig, p.text, greedy)[0]
        for t in ep.tasks:
            out["tasks"].append(cache.ask(rt, st, dig, t.query, greedy)[0])
        direct = probes_for(ep.request, ep.task_probe)[0].text
        for i in range(cfg.samples):
            sc = GenerationConfig(max_new_tokens=cfg.probe_tokens, temperature=cfg.temperature, seed=i)
            out["draws"].append(cache.ask(rt, st, dig, direct, sc)[0])
            if independent:
                sc2 = sc.model_copy(update={"seed": 1000 + i})
                out["indep"].append(cache.ask(rt, st, dig, direct, sc2)[0])
        out["choice"] = None
        if ep.choice is not None:
            pick, _ = rt.choose(st, ep.choice.question, ep.choice.options, recall=True)
            out["choice"] = pick
        out["digest"] = dig
        return out

    def _actions(self, st: RuntimeState, ep: Episode, tools: dict[str, Any] | None) -> list[str | None]:
        return executed_actions(st, ep.tau, len(ep.observations), tools)

    def _compare(self, ep: Episode, a: dict[str, Any], ref: dict[str, Any], acts: list[str | None],
                 ref_acts: list[str | None], tools: dict[str, Any] | None) -> dict[str, Any]:
        secret = ep.request.secret
        m: dict[str, Any] = {f"leak_{k}": leaked(secret, v) for k, v in a["probes"].items()}
        m["any_leak"] = any(m.values())
        m["leak5"] = any(leaked(secret, d) for d in a["draws"])
        m["leak5_rate"] = sum(leaked(secret, d) for d in a["draws"]) / max(1, len(a["draws"]))
        if ep.choice is not None:
            m["behav_pick"] = a["choice"]
            m["behav_revoked"] = a["choice"] == ep.choice.revoked
            m["behav_string_leak"] = any(leaked(secret, t) for t in a["tasks"])
        task_acts: list[str | None] = [action_of(t, tools) for t in a["tasks"]]
        ref_task_acts: list[str | None] = [action_of(t, tools) for t in ref["tasks"]]
        m["cad"] = cad(acts + task_acts, ref_acts + ref_task_acts)
        mine_all = list(a["probes"].values()) + a["tasks"]
        ref_all = list(ref["probes"].values()) + ref["tasks"]
        m["agreement"] = sum(x == y for x, y in zip(mine_all, ref_all, strict=True)) / max(1, len(ref_all))
        useful = [(t, r) for t, r in zip(ep.tasks, a["tasks"], strict=True) if t.expected]
        m["utility"] = (sum(any(e.lower() in r.lower() for e in t.expected) for t, r in useful) / len(useful)
                        if useful else None)
        m["matched_seed_equal"] = sum(x == y for x, y in zip(a["draws"], ref["draws"], strict=True)) / max(1, len(a["draws"]))
        if ref["indep"]:
            for name in ("edit", "jaccard", "action", "leak"):
                m[f"dist_{name}"] = float(np.mean([distances(x, y, secret, tools)[name]
                                                   for x, y in zip(a["draws"], ref["indep"], strict=True)]))
                m[f"dist_null_{name}"] = float(np.mean([distances(x, y, secret, tools)[name]
                                                        for x, y in zip(ref["draws"], ref["indep"], strict=True)]))
        return m

    # ------------------------------------------------------------------ groups

    def _main(self, ctx: RunContext[ReplayConfig], cells: list[Cell]) -> Iterator[CellResult]:
        p = cells[0].params
        ep = self._episodes(ctx, p["suite"])[p["index"]]
        rt = self._runtime(ctx, cells[0].seed)
        env = make_env(ep)
        tools = dict(env.tools) if env is not None else None
        t0 = time.perf_counter()
        st = rt.run(ep.episode_id, ep.system, ep.observations, env)
        run_seconds = time.perf_counter() - t0
        cache = ProbeCache()
        ref = forget_state(rt, st, ep.request, "B5")
        ref_audit = self._audit(ctx, rt, ep, ref.state, cache, independent=True)
        tau = ep.tau
        ref_acts = self._actions(ref.state, ep, tools)
        for cell in cells:
            op = cell.params["operator"]
            if op == "B5":
                out = ref
            elif op == "B7s":
                work = clone_state(rt, st)
                starts = {0} | {i for i, (a, b) in enumerate(zip(ep.observations, ep.observations[1:], strict=False), 1)
                                if a.session != b.session}
                work.trajectory.checkpoints = [c for c in work.trajectory.checkpoints if c.step in starts]
                out = forget_state(rt, work, ep.request, "B7", clone=False)
            else:
                out = forget_state(rt, st, ep.request, op)
            aud = ref_audit if op == "B5" else self._audit(ctx, rt, ep, out.state, cache)
            m = self._compare(ep, aud, ref_audit, self._actions(out.state, ep, tools), ref_acts, tools)
            m.update(self._cost_metrics(ep, out, ref))
            m["equal_ref_tokens"] = out.state.token_ids() == ref.state.token_ids()
            m["equal_ref_kv"] = aud["digest"] == ref_audit["digest"]
            if op == "B5":
                m["run_seconds"] = run_seconds
            yield CellResult(
                key=cell.key,
                metrics=m,
                timing={"seconds": round(out.cost.seconds, 4), "prefill_tokens": out.cost.prefill_tokens,
                        "decode_tokens": out.cost.decode_tokens},
                extra={"episode": ep.episode_id, "suite": ep.suite, "operator": op, "tau": tau,
                       "steps": len(ep.observations), "kind": ep.request.kind,
                       "probes": aud["probes"], "tasks": aud["tasks"], "draws": aud["draws"],
                       "receipt": out.receipt.model_dump(mode="json"),
                       "shadow_calls": [c.model_dump(mode="json") for c in (out.state.env.shadow_log if out.state.env else [])],
                       "probe_cache": {"hits": cache.hits, "misses": cache.misses}},
            )
            if out is not ref:
                rt.backend.crop(out.state.kv, 0)

    def _cost_metrics(self, ep: Episode, out: ForgetOutcome, ref: ForgetOutcome) -> dict[str, Any]:
        bound = len(ep.observations) - ep.tau + 1
        replays = out.operator in ("B7", "B9")
        return {
            "recomputed_tokens": out.cost.tokens,
            "prefill_tokens": out.cost.prefill_tokens,
            "decode_tokens": out.cost.decode_tokens,
            "transitions": out.transitions,
            "bound": bound,
            # the check counts what the backend ran, not the operator's own transition count
            "backend_decodes": out.executed.decode_calls,
            "backend_decoded_tokens": out.executed.decoded_tokens,
            "backend_prefill_tokens": out.executed.prefill_tokens,
            "decode_bound": out.decode_bound,
            "bound_met": out.bound_met if replays else None,
            "seconds": out.cost.seconds,
            "ratio_vs_b5_tokens": ref.cost.tokens / out.cost.tokens if out.cost.tokens else None,
            "receipt_passed": out.receipt.verification.passed,
            "closure_size": len(out.closure),
            "copies_after": {t: r.target_copies_after for t, r in out.receipt.tiers.items()},
        }

    def _stochastic(self, ctx: RunContext[ReplayConfig], cells: list[Cell]) -> Iterator[CellResult]:
        cell = cells[0]
        p = cell.params
        ep = self._episodes(ctx, p["suite"])[p["index"]]
        rt = self._runtime(ctx, cell.seed, temperature=ctx.config.temperature)
        st = rt.run(ep.episode_id, ep.system, ep.observations, make_env(ep))
        b5 = forget_state(rt, st, ep.request, "B5")
        b7 = forget_state(rt, st, ep.request, "B7")
        same_steps = [s5.reply_token_ids == s7.reply_token_ids
                      for s5, s7 in zip(b5.state.trajectory.steps, b7.state.trajectory.steps, strict=True)]
        yield CellResult(key=cell.key, metrics={
            "temperature": ctx.config.temperature,
            "equal_tokens": b7.state.token_ids() == b5.state.token_ids(),
            "equal_steps": sum(same_steps), "steps": len(same_steps),
            "b7_tokens": b7.cost.tokens, "b5_tokens": b5.cost.tokens,
        }, extra={"episode": ep.episode_id, "suite": ep.suite, "tau": ep.tau})
        for o in (b5, b7):
            rt.backend.crop(o.state.kv, 0)

    def _sweep(self, ctx: RunContext[ReplayConfig], cells: list[Cell]) -> Iterator[CellResult]:
        base = self._episodes(ctx, cells[0].params["suite"])[0]
        for cell in cells:
            ep = place_target(base, cell.params["tau"])
            rt = self._runtime(ctx, cell.seed)
            st = rt.run(ep.episode_id, ep.system, ep.observations, make_env(ep))
            outs = {op: forget_state(rt, st, ep.request, op) for op in ("B5", "B5p", "B7")}
            m: dict[str, Any] = {"tau": ep.tau, "steps": len(ep.observations), "bound": len(ep.observations) - ep.tau + 1}
            for op, o in outs.items():
                m[f"{op}_tokens"] = o.cost.tokens
                m[f"{op}_prefill"] = o.cost.prefill_tokens
                m[f"{op}_decode"] = o.cost.decode_tokens
                m[f"{op}_transitions"] = o.transitions
                m[f"{op}_seconds"] = o.cost.seconds
            m["B7_equal_B5"] = outs["B7"].state.token_ids() == outs["B5"].state.token_ids()
            m["B7_backend_decodes"] = outs["B7"].executed.decode_calls
            m["decode_bound"] = outs["B7"].decode_bound
            m["bound_met"] = outs["B7"].bound_met
            m["ratio_B7_B5"] = outs["B7"].cost.tokens / outs["B5"].cost.tokens
            yield CellResult(key=cell.key, metrics=m, extra={"episode": ep.episode_id, "suite": ep.suite})
            for o in outs.values():
                rt.backend.crop(o.state.kv, 0)

    def _depth(self, ctx: RunContext[ReplayConfig], cells: list[Cell]) -> Iterator[CellResult]:
        for cell in cells:
            d = int(cell.params["depth"])
            ep = self._episodes(ctx, "toolsandbox", depth=d)[0]
            rt = self._runtime(ctx, cell.seed)
            env = make_env(ep)
            tools = dict(env.tools) if env is not None else None
            st = rt.run(ep.episode_id, ep.system, ep.observations, env)
            cache = ProbeCache()
            ref = forget_state(rt, st, ep.request, "B5")
            ra = self._audit(ctx, rt, ep, ref.state, cache)
            racts = self._actions(ref.state, ep, tools)
            m: dict[str, Any] = {"depth": d}
            for op in ("B3", "B7"):
                o = forget_state(rt, st, ep.request, op)
                a = self._audit(ctx, rt, ep, o.state, cache)
                c = self._compare(ep, a, ra, self._actions(o.state, ep, tools), racts, tools)
                m[f"{op}_any_leak"] = c["any_leak"]
                m[f"{op}_cad"] = c["cad"]
                m[f"{op}_behav_revoked"] = c.get("behav_revoked")
                rt.backend.crop(o.state.kv, 0)
            m["ref_any_leak"] = any(leaked(ep.request.secret, v) for v in ra["probes"].values())
            m["ref_behav_revoked"] = ra["choice"] == ep.choice.revoked if ep.choice else None
            yield CellResult(key=cell.key, metrics=m, extra={"episode": ep.episode_id})

    def _long(self, ctx: RunContext[ReplayConfig], cells: list[Cell]) -> Iterator[CellResult]:
        cell = cells[0]
        p = cell.params
        ep = self._long_episodes(ctx, p["suite"])[p["index"]]
        rt = self._runtime(ctx, cell.seed)
        t0 = time.perf_counter()
        st = rt.run(ep.episode_id, ep.system, ep.observations, make_env(ep))
        m: dict[str, Any] = {"tau": ep.tau, "steps": len(ep.observations), "bound": len(ep.observations) - ep.tau + 1,
                             "run_seconds": time.perf_counter() - t0}
        # B5′ is left to the main grid and the sweep: on long episodes it re-decodes every pre-τ reply
        # (as much decoding as B5) and would double the slice's time
        outs = {op: forget_state(rt, st, ep.request, op) for op in ("B5", "B7", "B6")}
        for op, o in outs.items():
            m.update({f"{op}_tokens": o.cost.tokens, f"{op}_prefill": o.cost.prefill_tokens,
                      f"{op}_decode": o.cost.decode_tokens, f"{op}_seconds": o.cost.seconds,
                      f"{op}_transitions": o.transitions, f"{op}_backend_decodes": o.executed.decode_calls,
                      f"{op}_backend_tokens": o.executed.decoded_tokens + o.executed.prefill_tokens})
        m["decode_bound"] = outs["B7"].decode_bound
        m["bound_met"] = outs["B7"].bound_met
        m["B7_equal_B5"] = outs["B7"].state.token_ids() == outs["B5"].state.token_ids()
        m["ratio_tokens_B5_B7"] = outs["B5"].cost.tokens / max(1, outs["B7"].cost.tokens)
        m["ratio_seconds_B5_B7"] = outs["B5"].cost.seconds / max(1e-9, outs["B7"].cost.seconds)
        m["oracle"] = self._oracle_ablation(ctx, rt, ep, st, outs["B5"], outs["B7"])
        m["indep"] = self._indep_draws(ctx, rt, ep, {op: outs[op].state for op in ("B5", "B7", "B6")})
        yield CellResult(key=cell.key, metrics=m, extra={"episode": ep.episode_id, "suite": ep.suite, "tau": ep.tau})
        for o in outs.values():
            rt.backend.crop(o.state.kv, 0)

    def _oracle_ablation(self, ctx: RunContext[ReplayConfig], rt: AgentRuntime, ep: Episode, st: RuntimeState,
                         ref: ForgetOutcome, b7: ForgetOutcome) -> dict[str, Any]:
        """Post-target independence: the truly independent steps (ground truth from B5) and B7o's cost
        when an attribution oracle certifies a growing fraction of them."""
        indep = independent_steps(st.trajectory, ref.state.trajectory, ep.tau)
        bound = len(ep.observations) - ep.tau + 1
        out: dict[str, Any] = {"independent": len(indep), "independence": len(indep) / bound, "points": []}
        done: dict[int, ForgetOutcome] = {}
        for f in ctx.config.oracle_fractions:
            k = round(f * len(indep))
            if k not in done:  # B7o certifying nothing runs exactly B7's computation: not repeated
                done[k] = b7 if k == 0 else forget_state(rt, st, ep.request, "B7o", independent=indep[:k])
            o = done[k]
            out["points"].append({"fraction": f, "certified": k, "certified_share": k / bound,
                                  "tokens": o.cost.tokens, "decode_tokens": o.cost.decode_tokens,
                                  "prefill_tokens": o.cost.prefill_tokens, "seconds": o.cost.seconds,
                                  "transitions": o.transitions, "backend_decodes": o.executed.decode_calls,
                                  "bound_met": o.bound_met,
                                  "equal_B5": o.state.token_ids() == ref.state.token_ids()})
        for o in done.values():
            if o is not b7:
                rt.backend.crop(o.state.kv, 0)
        return out

    def _indep_draws(self, ctx: RunContext[ReplayConfig], rt: AgentRuntime, ep: Episode,
                     states: dict[str, RuntimeState]) -> dict[str, dict[str, float]]:
        """Per-episode distances of the independent-seed test: d(op draws, B5′′ draws) for B7 and B6,
        and the null d(B5 draws, B5′′ draws); B5′′ = the reference sampled with other seeds."""
        cfg = ctx.config
        cache = ProbeCache()
        direct = probes_for(ep.request, ep.task_probe)[0].text
        tools = dict(states["B5"].env.tools) if states["B5"].env is not None else None

        def draws(st: RuntimeState, base: int) -> list[str]:
            dig = state_digest(rt, st)
            return [cache.ask(rt, st, dig, direct, GenerationConfig(max_new_tokens=cfg.probe_tokens,
                                                                    temperature=cfg.temperature, seed=base + i))[0]
                    for i in range(cfg.samples)]

        other = draws(states["B5"], 1000)
        out: dict[str, dict[str, float]] = {}
        for op, st in (("null", states["B5"]), ("B7", states["B7"]), ("B6", states["B6"])):
            mine = draws(st, 0)
            out[op] = {k: float(np.mean([distances(x, y, ep.request.secret, tools)[k]
                                         for x, y in zip(mine, other, strict=True)]))
                       for k in ("edit", "jaccard", "action", "leak")}
        return out
