"""Forget operators B0–B9 of paper 002 (plus B5′, a B6 variant with the secret supplied, and the
target-span-only KV-excision ablation) in one registry, each returning a signed receipt of the
same type as the memory forget modes (``traceless.forget.Receipt``) with runtime tiers
transcript / summary / memory / plan / kv.

Every operator works on a clone of the contaminated state (``clone_state``) so operators can be
compared from the same starting point.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from traceless import prompts
from traceless._version import code_version
from traceless.errors import ReplayError
from traceless.forget import Receipt, TargetRef, TierReport, Verification, receipt_key, sign
from traceless.models import ChatMessage
from traceless.registry import Registry
from traceless.runtime._meter import Executed
from traceless.runtime._provenance import contains_target, decode_bound, injection_step
from traceless.runtime._runtime import AgentRuntime, RuntimeState, render_observation
from traceless.runtime._types import ARTIFACT_TIERS, Cost, ForgetRequest, Observation, RArtifact, Trajectory

__all__ = [
    "FORGET_OPERATORS",
    "ForgetOperator",
    "ForgetOutcome",
    "OpContext",
    "clone_state",
    "forget_state",
    "forget_instruction_text",
    "independent_steps",
    "sanitize_observations",
    "world_at",
]


@dataclass(frozen=True)
class ForgetOperator:
    """A registered operator: its function and the tiers it claims to clear."""

    name: str
    label: str
    fn: Callable[[OpContext], RuntimeState]
    claims: tuple[str, ...]
    replays: bool


FORGET_OPERATORS: Registry[ForgetOperator] = Registry(
    "forget operator", "See `traceless.runtime.FORGET_OPERATORS.names()` (B0 … B9, B5p, B6b, kv_excision)"
)


def _register(name: str, label: str, claims: tuple[str, ...], replays: bool = False, help: str = ""
              ) -> Callable[[Callable[[OpContext], RuntimeState]], Callable[[OpContext], RuntimeState]]:
    def deco(fn: Callable[[OpContext], RuntimeState]) -> Callable[[OpContext], RuntimeState]:
        FORGET_OPERATORS.register(name, help=help or (fn.__doc__ or "").strip().splitlines()[0])(
            ForgetOperator(name, label, fn, claims, replays)
        )
        return fn

    return deco


@dataclass
class OpContext:
    """What an operator gets: the runtime, a clone of the contaminated state, the request, τ,
    the taint closure, and the sanitized observations (the counterfactual inputs)."""

    rt: AgentRuntime
    state: RuntimeState
    request: ForgetRequest
    tau: int
    closure: set[str]
    sanitized: list[Observation]
    notes: list[str] = field(default_factory=list)
    independent: frozenset[int] = frozenset()
    """Post-target steps an attribution oracle certifies independent of the target (B7o only)."""


@dataclass
class ForgetOutcome:
    """The state after forgetting, its receipt and its cost."""

    operator: str
    state: RuntimeState
    receipt: Receipt
    cost: Cost
    tau: int | None
    closure: list[str]
    transitions: int
    notes: list[str]
    executed: Executed = field(default_factory=Executed)
    """What the backend ran while the operator worked (counted below the operator)."""
    decode_bound: int | None = None
    """Generations an exact forget needs from τ on (T−τ+1 replies + the session summaries)."""
    replays: bool = False
    """The operator recomputes the suffix (the bound applies to it)."""

    @property
    def bound_met(self) -> bool | None:
        """For a replaying operator: the backend ran exactly the bound's generations (fewer cannot
        be exact, more is recomputation the bound says is unnecessary). None for the others."""
        if not self.replays or self.decode_bound is None:
            return None
        return self.executed.decode_calls == self.decode_bound


# ------------------------------------------------------------------------------ helpers


def sanitize_text(text: str, span: str) -> str:
    """The counterfactual observation: the target span removed (whitespace tidied)."""
    out = " ".join(text.replace(span, " ").split())
    return out or "(no content)"


def sanitize_observations(observations: list[Observation], span: str) -> list[Observation]:
    return [o.model_copy(update={"text": sanitize_text(o.text, span)}) if contains_target(o.text, span) else o
            for o in observations]


def forget_instruction_text(req: ForgetRequest) -> str:
    return (f"Please forget {req.description}. I revoke it: from now on never use, repeat or reveal it, "
            "and act as if I had never told you.")


def clone_state(rt: AgentRuntime, st: RuntimeState) -> RuntimeState:
    """An independent copy (KV forked, artifacts, provenance, trajectory and tool world copied)."""
    env = st.env.snapshot() if st.env is not None else None
    out = RuntimeState(rt.backend.fork(st.kv), st.trajectory.model_copy(deep=True), None)
    out.env = env
    out.env_initial = st.env_initial
    out.messages = list(st.messages)
    out.msg_art = list(st.msg_art)
    for a in st.artifacts.values():
        out.add(a.model_copy(deep=True))
    out.step = st.step
    out.kv_nonce = st.kv_nonce
    out.sink_block = st.sink_block
    return out


def independent_steps(recorded: Trajectory, reference: Trajectory, tau: int) -> list[int]:
    """The attribution oracle of the ablation, from ground truth: post-target steps whose reply and
    summary the target-excluded reference (B5) decoded token for token as the recording did."""
    ref = {r.step: r for r in reference.steps}
    return [r.step for r in recorded.steps if r.step >= tau and r.step in ref
            and ref[r.step].reply_token_ids == r.reply_token_ids
            and ref[r.step].summary_token_ids == r.summary_token_ids]


def world_at(st: RuntimeState, n_committed: int) -> Any:
    """The tool world after the first ``n_committed`` committed calls: the initial snapshot with
    those calls re-applied on a copy (no live side effect)."""
    if st.env is None:
        return None
    w = copy.deepcopy(st.env_initial)
    for c in st.env.committed[:n_committed]:
        st.env.tools[c.tool].fn(w, c.args)
    return w


def _cut_to_step(rt: AgentRuntime, st: RuntimeState, step: int) -> None:
    """Cut the state back to the end of step ``step`` (exact boundary, from step records)."""
    kv_len = next((r.kv_length for r in st.trajectory.steps if r.step == step), None)
    if step == 0:
        kv_len = st.artifacts["system"].kv_end
    if kv_len is None:
        raise ReplayError(f"no record of step {step}; cannot cut the state there")
    rt.backend.crop(st.kv, kv_len)
    n = 0
    for i, a in enumerate(st.msg_art):
        art = st.artifacts.get(a)
        if art is not None and art.step <= step:
            n = i + 1
    del st.messages[n:]
    del st.msg_art[n:]
    for a in [a for a, art in st.artifacts.items() if art.step > step]:
        st.drop(a)
    st.trajectory.steps = [s for s in st.trajectory.steps if s.step <= step]
    st.trajectory.checkpoints = [c for c in st.trajectory.checkpoints if c.step <= step]
    st.step = step


def _reprefill(rt: AgentRuntime, st: RuntimeState, texts: dict[str, str], drop: set[str]) -> None:
    """Rewrite/drop in-context artifacts and rebuild the KV from the first changed message on:
    crop there (scrubbed), then prefill the surviving messages (teacher-forced)."""
    changed = [i for i, a in enumerate(st.msg_art) if a in drop or a in texts]
    for a, t in texts.items():
        if a in st.artifacts:
            st.artifacts[a].text = t
    if not changed:
        return
    i0 = changed[0]
    start = st.artifacts[st.msg_art[i0]].kv_start
    assert start is not None
    tail = list(zip(st.msg_art[i0:], st.messages[i0:], strict=True))
    rt.backend.crop(st.kv, start)
    del st.messages[i0:]
    del st.msg_art[i0:]
    for a, _ in tail:
        st.drop(f"kv:{a}")
    obs_by_art = {f"obs:{o.obs_id}": o for o in st.trajectory.observations}
    for a, msg in tail:
        if a in drop:
            st.drop(a)
            continue
        art = st.artifacts[a]
        if a in texts:
            content = render_observation(obs_by_art[a].model_copy(update={"text": texts[a]})) \
                if a in obs_by_art else texts[a]
            msg = ChatMessage(role=msg.role, content=content)
        rt.append_message(st, msg, art)
    for a in drop:
        st.drop(a)


def _replay_suffix(rt: AgentRuntime, st: RuntimeState, ctx: OpContext, *, from_step: int) -> None:
    """Replay steps ``from_step+1 …`` on the sanitized observations with tools in shadow mode."""
    st.replaying = True
    n_committed = next((c.committed_calls for c in st.trajectory.checkpoints if c.step == from_step), None)
    if n_committed is None:
        n_committed = sum(1 for c in (st.env.committed if st.env else []) if c.step <= from_step)
    st.shadow_state = world_at(st, n_committed)
    rt.advance(st, observations=ctx.sanitized)


# ------------------------------------------------------------------------------ operators


@_register("B0", "No-Forget", ())
def no_forget(ctx: OpContext) -> RuntimeState:
    """control: nothing changes"""
    return ctx.state


@_register("B1", "Memory-Delete", ("memory",))
def memory_delete(ctx: OpContext) -> RuntimeState:
    """delete the plaintext memory records holding the target (deployed-style delete)"""
    st = ctx.state
    for a in [a.art_id for a in st.tier("memory") if contains_target(a.text, ctx.request.span)]:
        st.drop(a)
    return st


@_register("B2", "Forget-Instruction", ())
def forget_instruction(ctx: OpContext) -> RuntimeState:
    """append an instruction to forget the target (one more transition); nothing is removed"""
    st, rt = ctx.state, ctx.rt
    t = st.step
    art = st.add(RArtifact(art_id=f"instr:forget:{t}", tier="transcript", kind="instruction", step=t,
                           text=forget_instruction_text(ctx.request)))
    rt._append_user(st, art.text, art)
    gen = rt.config.generation.model_copy(update={"seed": rt.config.seed})
    text, ids = rt._decode(st, gen)
    ack = st.add(RArtifact(art_id=f"reply:forget:{t}", tier="transcript", kind="reply", step=t, text=text,
                           sources=st.context_ids()))
    rt._append_generated(st, text, ack, len(ids))
    st.cost.transitions += 1
    return st


@_register("B3", "Source-Redaction", ("memory",))
def source_redaction(ctx: OpContext) -> RuntimeState:
    """redact the target in its source observation (and its verbatim memory copy); re-prefill"""
    st, req = ctx.state, ctx.request
    obs = st.trajectory.observations[ctx.tau - 1]
    red = obs.text.replace(req.span, prompts.REDACTED)
    for a in st.tier("memory"):
        a.text = a.text.replace(req.span, prompts.REDACTED)
    _reprefill(ctx.rt, st, {f"obs:{obs.obs_id}": red}, set())
    return st


@_register("B4", "Sanitize-no-Replay", ARTIFACT_TIERS)
def sanitize_no_replay(ctx: OpContext) -> RuntimeState:
    """drop the target observation and its whole descendant closure; no replay"""
    st = ctx.state
    drop = {a for a in ctx.closure if a in st.artifacts and not a.startswith("kv:")}
    # an end-of-session request whose summary is dropped is dropped with it
    for a in list(st.msg_art):
        if a.startswith("instr:summary:") and f"summary:{a.rsplit(':', 1)[1]}" in drop:
            drop.add(a)
    _reprefill(ctx.rt, st, {}, {a for a in drop if a in st.msg_art})
    for a in drop:
        st.drop(a)
    return st


@_register("B5", "Full-Reset", ARTIFACT_TIERS, replays=True)
def full_reset(ctx: OpContext) -> RuntimeState:
    """replay the whole trajectory from scratch without the target"""
    old, rt = ctx.state, ctx.rt
    env = old.env.snapshot() if old.env is not None else None
    if env is not None:
        env.state = copy.deepcopy(old.env_initial)
    new = rt.start(old.trajectory.episode_id, old.trajectory.system, ctx.sanitized, env)
    new.env_initial = old.env_initial
    if old.env is not None and new.env is not None:
        new.env.committed = list(old.env.committed)
    new.replaying = True
    new.shadow_state = copy.deepcopy(old.env_initial)
    rt.advance(new)
    rt.backend.crop(old.kv, 0)
    return new


@_register("B5p", "Full-Reset+PrefixCache", ARTIFACT_TIERS, replays=True)
def full_reset_prefix_cache(ctx: OpContext) -> RuntimeState:
    """full reset on a prefix-caching server: cached prompts are free, every reply is re-decoded"""
    st, rt = ctx.state, ctx.rt
    for rec in [r for r in st.trajectory.steps if r.step < ctx.tau]:
        for art_id, ids, seed_base in ((f"reply:{rec.step}", rec.reply_token_ids, rt.config.seed),
                                       (f"summary:{rec.step}", rec.summary_token_ids, rt.config.seed + 1)):
            art = st.artifacts.get(art_id)
            if art is None or art.kv_start is None:
                continue
            from traceless.runtime._types import step_seed

            fork = rt.backend.fork(st.kv)
            try:
                rt.backend.crop(fork, art.kv_start)
                n = rt.config.generation.max_new_tokens if seed_base == rt.config.seed else rt.config.summary_max_new_tokens
                gen = rt.config.generation.model_copy(update={"seed": step_seed(seed_base, rec.step),
                                                             "max_new_tokens": n})
                _, g = rt.backend.decode(fork, gen)
                again = list(fork.token_ids)[art.kv_start:]
                st.cost.decode_tokens += len(again)
                st.cost.prefill_tokens += g.prompt_tokens
                if again != ids:
                    ctx.notes.append(f"prefix-cached re-decode of {art_id} differs from the recording")
            finally:
                rt.backend.crop(fork, 0)
                del fork
        st.cost.transitions += 1
    _cut_to_step(rt, st, ctx.tau - 1)
    _replay_suffix(rt, st, ctx, from_step=ctx.tau - 1)
    return st


def _string_redact(ctx: OpContext, strings: list[str]) -> RuntimeState:
    st = ctx.state
    strings = [s for s in strings if s]

    def red(text: str) -> str:
        for s in sorted(strings, key=len, reverse=True):
            text = text.replace(s, prompts.REDACTED)
        return text

    texts: dict[str, str] = {}
    obs_ids = {f"obs:{o.obs_id}" for o in st.trajectory.observations}
    for a in st.artifacts.values():
        if a.tier in ("transcript", "summary") and a.art_id in st.msg_art:
            new = red(a.text)
            if new != a.text:
                texts[a.art_id] = new
        elif a.tier in ("memory", "plan") and a.art_id not in obs_ids:
            a.text = red(a.text)
    _reprefill(ctx.rt, st, texts, set())
    return st


@_register("B6", "String-Redaction", ARTIFACT_TIERS)
def string_redaction(ctx: OpContext) -> RuntimeState:
    """redact a given string list (the target span + the strings the request names) from every artifact"""
    return _string_redact(ctx, [ctx.request.span, *ctx.request.strings])


@_register("B6b", "String-Redaction+secret", ARTIFACT_TIERS)
def string_redaction_with_secret(ctx: OpContext) -> RuntimeState:
    """B6 with the secret itself (e.g. the excluded brand) supplied in the string list"""
    return _string_redact(ctx, [ctx.request.span, *ctx.request.strings, ctx.request.secret])


@_register("B7", "Selective-Replay", ARTIFACT_TIERS, replays=True)
def selective_replay(ctx: OpContext) -> RuntimeState:
    """provenance-guided selective replay: crop to the clean checkpoint, replay the sanitized suffix"""
    st, rt = ctx.state, ctx.rt
    ck = rt.latest_checkpoint(st, ctx.tau - 1)
    recorded = [r for r in st.trajectory.steps if ck.step < r.step < ctx.tau]
    rt.restore(st, ck)
    for rec in recorded:  # coarse checkpoint: re-enter clean recorded steps without decoding
        rt.teacher_force(st, rec, st.trajectory.observations[rec.step - 1])
    _replay_suffix(rt, st, ctx, from_step=ctx.tau - 1)
    return st


@_register("B7o", "Selective-Replay+oracle", ARTIFACT_TIERS, replays=True)
def selective_replay_oracle(ctx: OpContext) -> RuntimeState:
    """ablation: B7 with an attribution oracle; certified-independent post-target steps are re-entered
    from the recording (prefill only), the others re-decoded"""
    st, rt = ctx.state, ctx.rt
    recorded = {r.step: r for r in st.trajectory.steps}
    ck = rt.latest_checkpoint(st, ctx.tau - 1)
    rt.restore(st, ck)
    for t in range(ck.step + 1, ctx.tau):
        rt.teacher_force(st, recorded[t], st.trajectory.observations[t - 1])
    st.replaying = True
    st.shadow_state = world_at(st, ck.committed_calls)
    st.trajectory.observations = list(ctx.sanitized)
    obs = ctx.sanitized
    for t in range(ctx.tau, len(obs) + 1):
        end = t == len(obs) or obs[t].session != obs[t - 1].session
        if t in ctx.independent:
            # the transition is still re-entered (its KV is recomputed on the clean prefix); only
            # its decoding is skipped, which is exact only if the oracle is right
            rt.teacher_force(st, recorded[t], obs[t - 1])
            st.cost.transitions += 1
            if rt.config.checkpoints == "every_turn" or (end and t < len(obs)):
                rt._checkpoint(st)
        else:
            rt.step(st, obs[t - 1], session_end=end, next_session_start=end and t < len(obs))
    ctx.notes.append(f"attribution oracle certified {len(ctx.independent)} post-target steps independent")
    return st


@_register("B8", "IFC-only", ())
def ifc_only(ctx: OpContext) -> RuntimeState:
    """information-flow control only: label the target, block tool-call sinks carrying it; state untouched"""
    ctx.state.sink_block = (ctx.request.secret, ctx.request.span)
    return ctx.state


@_register("B9", "IFC+Splice", ARTIFACT_TIERS, replays=True)
def ifc_splice(ctx: OpContext) -> RuntimeState:
    """IFC sink policy on top of selective replay"""
    st = selective_replay(ctx)
    st.sink_block = (ctx.request.secret, ctx.request.span)
    return st


@_register("kv_excision", "KV-span-excision", ("kv",))
def kv_excision(ctx: OpContext) -> RuntimeState:
    """ablation: remove only the target span's keys/values from the cache; everything else stays"""
    st, rt = ctx.state, ctx.rt
    obs = st.trajectory.observations[ctx.tau - 1]
    art = st.artifacts[f"obs:{obs.obs_id}"]
    assert art.kv_start is not None and art.kv_end is not None
    i, j = _token_span(rt, list(st.kv.token_ids), art.kv_start, art.kv_end, ctx.request.span)
    _excise(rt.backend, st.kv, i, j)
    n = j - i
    for a in st.artifacts.values():
        if a.kv_start is not None and a.kv_end is not None:
            if a.kv_start >= j:
                a.kv_start -= n
            if a.kv_end >= j:
                a.kv_end -= n
            elif a.kv_end > i:
                a.kv_end = i
    seg = st.artifacts.get(f"kv:{art.art_id}")
    if seg is not None:
        seg.text += f" excised[{i},{j})"
    ctx.notes.append(f"excised {n} cached positions of the target span; later entries keep its influence")
    return st


def _token_span(rt: AgentRuntime, ids: list[int], lo: int, hi: int, span: str) -> tuple[int, int]:
    """Smallest token range inside [lo, hi) whose decoding contains the span."""
    dec = rt.backend.decode_tokens
    j = next((e for e in range(lo + 1, hi + 1) if span in dec(ids[lo:e])), None)
    if j is None:
        # tokenization may merge the span's edges with neighbours: take the covering range
        core = span.strip().split()
        j = next((e for e in range(lo + 1, hi + 1) if core[-1] in dec(ids[lo:e])), hi)
        i = max((s for s in range(lo, j) if core[0] in dec(ids[s:j])), default=lo)
        return i, j
    i = max(s for s in range(lo, j) if span in dec(ids[s:j]))
    return i, j


def _excise(backend: Any, kv: Any, i: int, j: int) -> None:
    if hasattr(backend, "excise"):
        backend.excise(kv, i, j)
        return
    import torch

    cache = getattr(kv, "cache", None)
    if cache is None:
        raise ReplayError(f"{type(backend).__name__} exposes no cache layers; KV excision is unsupported")
    for layer in cache.layers:
        for name in ("keys", "values"):
            t = getattr(layer, name)
            if t is None or t.numel() == 0:
                continue
            new = torch.cat([t[..., :i, :], t[..., j:, :]], dim=-2).clone(memory_format=torch.contiguous_format)
            t.untyped_storage().fill_(0)
            setattr(layer, name, new)
    del kv.token_ids[i:j]
    kv.last_logits = None


# ------------------------------------------------------------------------------ entry point


def _tier_digest(arts: dict[str, str]) -> str:
    h = hashlib.sha256()
    for k in sorted(arts):
        h.update(k.encode() + b"\0" + hashlib.sha256(arts[k].encode()).digest())
    return h.hexdigest()[:32]


def _by_tier(st: RuntimeState) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {t: {} for t in ARTIFACT_TIERS}
    for a in st.artifacts.values():
        if a.tier in out:
            out[a.tier][a.art_id] = a.text
    return out


def _copies(rt: AgentRuntime, st: RuntimeState, req: ForgetRequest) -> dict[str, int]:
    needles = [n for n in (req.span, req.secret) if n]
    out = {t: 0 for t in ARTIFACT_TIERS}
    for a in st.artifacts.values():
        if a.tier == "kv":
            if a.kv_start is None or a.kv_end is None:
                continue
            text = rt.backend.decode_tokens(list(st.kv.token_ids)[a.kv_start : a.kv_end])
        else:
            text = a.text
        if a.tier in out and any(n in text for n in needles):
            out[a.tier] += 1
    return out


def _tier_reports(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]],
                  copies: dict[str, int]) -> dict[str, TierReport]:
    """Per tier: what the operator removed, rewrote, rebuilt and left, and the copies after it."""
    tiers: dict[str, TierReport] = {}
    for t in ARTIFACT_TIERS:
        b, a = before[t], after[t]
        tiers[t] = TierReport(
            removed=sorted(set(b) - set(a)),
            rewritten=sorted(k for k in set(b) & set(a) if b[k] != a[k]),
            rebuilt=sorted(set(a) - set(b)),
            left=sum(1 for k in set(b) & set(a) if b[k] == a[k]),
            digest_before=_tier_digest(b),
            digest_after=_tier_digest(a),
            target_copies_after=copies[t],
        )
    return tiers


def _decode_bound(rt: AgentRuntime, st: RuntimeState, tau: int, operator: str, independent: Iterable[int]) -> int:
    """The generations a replay from step ``tau`` may run: replies plus session summaries (B7o:
    less the steps the oracle certifies independent)."""
    dbound = decode_bound(st.trajectory.observations, tau, summaries=rt.config.summaries)
    if operator == "B7o":  # generations the oracle lets B7o skip
        seq = st.trajectory.observations
        dbound -= sum(1 + int(rt.config.summaries and (t == len(seq) or seq[t].session != seq[t - 1].session))
                      for t in set(independent) if tau <= t <= len(seq))
    return dbound


def _replay_notes(replays: bool, st: RuntimeState, out_state: RuntimeState, tau: int | None, cost: Cost,
                  executed: Executed, dbound: int | None) -> list[str]:
    """What a replay ran against its bounds, and what the tools did on replay."""
    notes: list[str] = []
    if replays and tau is not None:
        n_steps = len(st.trajectory.observations)
        notes.append(f"replayed {cost.transitions} transitions (bound T-tau+1 = {n_steps - tau + 1}); the backend "
                     f"ran {executed.decode_calls} generations (bound: {dbound} = replies + session summaries)")
    if out_state.env is not None and out_state.env.shadow_log:
        kinds: dict[str, int] = {}
        for c in out_state.env.shadow_log:
            kinds[c.status] = kinds.get(c.status, 0) + 1
        notes.append("tools on replay: " + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items())))
    return notes


def forget_state(rt: AgentRuntime, st: RuntimeState, req: ForgetRequest, operator: str, *,
                 clone: bool = True, key: bytes | None = None, independent: Iterable[int] = ()) -> ForgetOutcome:
    """Apply ``operator`` to (a clone of) ``st``. A target that no observation contains gives a
    receipt with ``matched=False`` and nothing replayed. ``independent``: for B7o, the post-target
    steps an attribution oracle certifies independent of the target."""
    op = FORGET_OPERATORS.get(operator)
    rt.check(st.trajectory)
    t0 = time.perf_counter()
    tau = injection_step(st.trajectory.observations, req.span)
    work = clone_state(rt, st) if clone else st
    before = _by_tier(work)
    versions_before = {a: art.version for a, art in work.artifacts.items()}
    mac = hmac.new(key if key is not None else receipt_key(), req.span.encode(), hashlib.sha256).hexdigest()[:16]
    target = TargetRef(kind="literal", ref=f"hmac:{mac}", owner=st.trajectory.episode_id)
    notes: list[str] = []
    closure: set[str] = set()
    if tau is None:
        notes.append("no observation of this trajectory contains the target; nothing was changed or replayed")
        out_state, cost, executed = work, Cost(), Executed()
    else:
        obs = st.trajectory.observations[tau - 1]
        closure = work.graph.taint_closure({f"obs:{obs.obs_id}"})
        # conservative taint: every model-derived artifact from τ on saw the target in context
        closure |= {a for a, art in work.artifacts.items()
                    if art.step >= tau and art.kind in ("reply", "summary", "plan", "kv_segment")}
        ctx = OpContext(rt, work, req, tau, closure, sanitize_observations(st.trajectory.observations, req.span),
                        independent=frozenset(t for t in independent if t >= tau))
        work.cost = Cost()
        ex0 = rt.backend.executed()
        out_state = op.fn(ctx)
        executed = rt.backend.executed().minus(ex0)
        cost = out_state.cost.model_copy(update={"seconds": time.perf_counter() - t0})
        notes += ctx.notes
    after = _by_tier(out_state)
    copies = _copies(rt, out_state, req)
    tiers = _tier_reports(before, after, copies)
    # a descendant survives when the same computation (version) is still there, unchanged
    surviving = sorted(
        a for a in closure
        if a in out_state.artifacts and versions_before.get(a) == out_state.artifacts[a].version
        and before.get(out_state.artifacts[a].tier, {}).get(a) == out_state.artifacts[a].text
    )
    claims = list(op.claims) if tau is not None else []
    src = [f"obs:{st.trajectory.observations[tau - 1].obs_id}"] if tau is not None else []
    src_gone = all(not contains_target(out_state.artifacts[s].text, req.span) for s in src if s in out_state.artifacts)
    passed = all(copies[t] == 0 for t in claims) and (not op.replays or not surviving)
    dbound = None if tau is None else _decode_bound(rt, st, tau, operator, independent)
    notes += _replay_notes(op.replays, st, out_state, tau, cost, executed, dbound)
    receipt = Receipt(
        receipt_id=uuid.uuid4().hex,
        created_at=time.time(),
        mode=f"runtime:{operator}",
        target=target,
        matched=tau is not None,
        tiers=tiers,
        verification=Verification(
            claims=claims,
            sources_removed=src,
            sources_gone=src_gone,
            surviving_descendants=surviving,
            closure_clean=not surviving,
            literal_scan=copies,
            passed=passed,
        ),
        seconds=cost.seconds if tau is not None else time.perf_counter() - t0,
        code_version=code_version(),
        notes=notes,
    )
    receipt = sign(receipt, key)
    return ForgetOutcome(operator, out_state, receipt, cost, tau, sorted(closure), cost.transitions, notes,
                         executed, dbound, op.replays)
