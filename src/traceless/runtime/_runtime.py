"""The agent runtime as a deterministic transition system over a KV-cache backend.

A step consumes one observation, appends it to the context (KV prefill of exactly its new
tokens), decodes a reply with a per-step seed, parses tool calls (pending plans; consequential
ones are committed live, shadow-executed on replay), writes plaintext memory when the scaffold's
policy says so, and at the end of a session decodes a compressed summary. Every artifact records
its sources in a provenance graph; sparse checkpoints (metadata only) are taken after every step
(``every_turn``) or at session starts (``session_start``). Restoring a checkpoint is a KV crop.

The token stream of the context is built incrementally: a message's tokens are the chat-template
delta between the rendering before and after it, and a reply's tokens are exactly the decoded ids.
A full reset and a replay from a checkpoint therefore run the same sequence of model calls on the
same token ids.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from traceless._version import code_version
from traceless.errors import BackendError, ConfigError, ReplayError
from traceless.models import ChatMessage, Generation, GenerationConfig
from traceless.runtime._meter import MeteredBackend
from traceless.runtime._provenance import ProvenanceGraph
from traceless.runtime._tools import ToolEnv, parse_tool_calls
from traceless.runtime._types import (
    Checkpoint,
    Cost,
    Observation,
    RArtifact,
    StepRecord,
    ToolCall,
    Trajectory,
    digest_ids,
    step_seed,
)

__all__ = ["RuntimeConfig", "AgentRuntime", "RuntimeState", "SUMMARY_PROMPT", "render_observation", "render_recall"]

SUMMARY_PROMPT = "Summarize this session so far in one short sentence, keeping the details you will need later."
"""The in-context compaction request at the end of a session (a scaffold message, not an observation)."""


class RuntimeConfig(BaseModel):
    """How the runtime decodes, compresses and checkpoints."""

    model_config = ConfigDict(frozen=True)

    generation: GenerationConfig = GenerationConfig(max_new_tokens=32)
    """Decoding of replies; the seed is replaced per step by ``step_seed(seed, t)``."""
    summary_max_new_tokens: int = Field(24, ge=1)
    """Length bound of the end-of-session summary."""
    summaries: bool = True
    """Write a compressed summary at the end of every session."""
    checkpoints: Literal["every_turn", "session_start"] = "every_turn"
    """Checkpoint after every step, or only at session starts."""
    seed: int = 0
    """Episode seed (per-step seeds derive from it)."""
    summary_prompt: str = SUMMARY_PROMPT
    """Text of the compaction request."""
    recall: Literal["off", "session_start"] = "session_start"
    """Memory propagation: at the first step of every later session (and before an audit question
    asked as a new session) the plaintext memory records written so far are retrieved into the
    context as one ``[memory]`` message, as the paper's agents do. ``off``: memory is write-only."""
    recall_k: int = Field(4, ge=1)
    """How many memory records (most recent first written) one recall retrieves."""


def render_recall(texts: list[str]) -> str:
    """How retrieved memory records appear in the context."""
    return "[memory] " + " | ".join(texts)


def render_observation(obs: Observation) -> str:
    """How an observation appears in the context."""
    if obs.kind == "tool":
        return f"[tool result: {obs.tool or 'tool'}] {obs.text}"
    if obs.kind == "memory":
        return f"[memory] {obs.text}"
    return obs.text


class RuntimeState:
    """The live state of one agent: KV cache, transcript, artifacts, provenance, plans, memory,
    checkpoints and the trajectory record."""

    def __init__(self, kv: Any, trajectory: Trajectory, env: ToolEnv | None) -> None:
        self.kv = kv
        self.messages: list[ChatMessage] = []
        self.msg_art: list[str] = []
        self.artifacts: dict[str, RArtifact] = {}
        self.graph = ProvenanceGraph()
        self.trajectory = trajectory
        self.env = env
        self.step = 0
        self.cost = Cost()
        self.replaying = False
        self.shadow_state: Any = None
        self.env_initial: Any = copy.deepcopy(env.state) if env is not None else None
        """The tool world before the first step (replays start their shadow world from it)."""
        self.kv_nonce = 0
        self.sink_block: tuple[str, ...] = ()
        """IFC sink policy: tool calls whose arguments carry one of these labels are blocked."""

    # ---- views

    def tier(self, tier: str) -> list[RArtifact]:
        return [a for a in self.artifacts.values() if a.tier == tier]

    def context_ids(self) -> list[str]:
        return list(self.msg_art)

    def token_ids(self) -> list[int]:
        return list(self.kv.token_ids)

    def add(self, art: RArtifact) -> RArtifact:
        self.artifacts[art.art_id] = art
        self.graph.add(art)
        return art

    def drop(self, art_id: str) -> None:
        self.artifacts.pop(art_id, None)
        self.graph.remove(art_id)


class AgentRuntime:
    """Runs episodes on a KV backend (``TransformersBackend`` or the toy backend)."""

    def __init__(self, backend: Any, config: RuntimeConfig | None = None) -> None:
        for m in ("chat_token_ids", "prefill", "decode", "crop", "fork"):
            if not hasattr(backend, m):
                raise ConfigError(
                    f"the runtime needs a local backend with KV-cache access ({m} is missing on "
                    f"{type(backend).__name__}); use an embedded model such as smollm2-135m-instruct"
                )
        self.backend = backend if isinstance(backend, MeteredBackend) else MeteredBackend(backend)
        """The backend behind a meter: ``backend.executed()`` reads what the model actually ran."""
        self.config = config or RuntimeConfig()
        self.model = dict(backend.describe())
        self.code_version = code_version()
        self._stop_ids: frozenset[int] = frozenset(getattr(backend, "stop_token_ids", frozenset()))

    # ------------------------------------------------------------------ lifecycle

    def start(self, episode_id: str, system: str, observations: list[Observation], env: ToolEnv | None = None
              ) -> RuntimeState:
        """A fresh state holding only the system prompt (checkpoint 0 taken)."""
        traj = Trajectory(
            episode_id=episode_id,
            system=system,
            observations=list(observations),
            seed=self.config.seed,
            model=self.model,
            code_version=self.code_version,
            generation=self.config.generation.model_dump(mode="json"),
        )
        t0 = time.perf_counter()
        msg = ChatMessage(role="system", content=system)
        ids = self._cut_after_eot(self.backend.chat_token_ids([msg], add_generation_prompt=False))
        kv = self.backend.prefill(ids)
        st = RuntimeState(kv, traj, env)
        st.messages.append(msg)
        st.msg_art.append("system")
        st.add(RArtifact(art_id="system", tier="system", kind="system", step=0, text=system, kv_start=0, kv_end=len(ids)))
        st.cost = Cost(prefill_tokens=len(ids), seconds=time.perf_counter() - t0)
        self._checkpoint(st)
        return st

    def run(self, episode_id: str, system: str, observations: list[Observation], env: ToolEnv | None = None,
            *, until: int | None = None) -> RuntimeState:
        """Start and run every observation (or the first ``until``)."""
        st = self.start(episode_id, system, observations, env)
        self.advance(st, until=until)
        return st

    def advance(self, st: RuntimeState, *, until: int | None = None,
                observations: list[Observation] | None = None) -> None:
        """Run the remaining observations of the trajectory from ``st.step`` on."""
        obs = observations if observations is not None else st.trajectory.observations
        if observations is not None:
            st.trajectory.observations = list(observations)
        end = len(obs) if until is None else min(until, len(obs))
        while st.step < end:
            t = st.step + 1
            o = obs[t - 1]
            session_end = t == len(obs) or obs[t].session != o.session
            self.step(st, o, session_end=session_end, next_session_start=session_end and t < len(obs))

    # ------------------------------------------------------------------ one transition

    def step(self, st: RuntimeState, obs: Observation, *, session_end: bool = False,
             next_session_start: bool = False) -> StepRecord:
        t = st.step + 1
        seed = step_seed(self.config.seed, t)
        t0 = time.perf_counter()
        before = st.cost.model_copy()
        self._recall_at_session_start(st, t, obs)
        obs_art = st.add(RArtifact(art_id=f"obs:{obs.obs_id}", tier="transcript", kind="observation", step=t,
                                   text=obs.text))
        self._append_user(st, render_observation(obs), obs_art)
        gen = self.config.generation.model_copy(update={"seed": seed})
        reply, reply_ids = self._decode(st, gen)
        ctx = st.context_ids()
        reply_art = st.add(RArtifact(art_id=f"reply:{t}", tier="transcript", kind="reply", step=t, text=reply,
                                     sources=ctx))
        self._append_generated(st, reply, reply_art, len(reply_ids))
        if obs.remember:
            st.add(RArtifact(art_id=f"mem:{t}", tier="memory", kind="memory", step=t, text=obs.text,
                             sources=[obs_art.art_id]))
        calls = self._tools(st, reply, t, reply_art.art_id)
        summary: str | None = None
        summary_ids: list[int] = []
        if session_end and self.config.summaries:
            instr = st.add(RArtifact(art_id=f"instr:summary:{t}", tier="transcript", kind="instruction", step=t,
                                     text=self.config.summary_prompt))
            self._append_user(st, self.config.summary_prompt, instr)
            sgen = gen.model_copy(update={"max_new_tokens": self.config.summary_max_new_tokens,
                                          "seed": step_seed(self.config.seed + 1, t)})
            summary, summary_ids = self._decode(st, sgen)
            sart = st.add(RArtifact(art_id=f"summary:{t}", tier="summary", kind="summary", step=t, text=summary,
                                    sources=st.context_ids()))
            self._append_generated(st, summary, sart, len(summary_ids))
        st.step = t
        st.cost.transitions += 1
        st.cost.seconds += time.perf_counter() - t0
        rec = StepRecord(
            step=t, obs_id=obs.obs_id, seed=seed, reply=reply, reply_token_ids=reply_ids, summary=summary,
            summary_token_ids=summary_ids, tool_calls=calls, kv_length=st.kv.length,
            prefill_tokens=st.cost.prefill_tokens - before.prefill_tokens,
            decode_tokens=st.cost.decode_tokens - before.decode_tokens,
            seconds=time.perf_counter() - t0,
        )
        st.trajectory.steps.append(rec)
        if self.config.checkpoints == "every_turn" or next_session_start:
            self._checkpoint(st)
        return rec

    def teacher_force(self, st: RuntimeState, rec: StepRecord, obs: Observation) -> None:
        """Re-enter a recorded clean step without decoding: prefill its observation and its
        recorded reply/summary token ids (used after restoring a coarse checkpoint)."""
        t = rec.step
        t0 = time.perf_counter()
        self._recall_at_session_start(st, t, obs)
        obs_art = st.add(RArtifact(art_id=f"obs:{obs.obs_id}", tier="transcript", kind="observation", step=t,
                                   text=obs.text))
        self._append_user(st, render_observation(obs), obs_art)
        reply_art = st.add(RArtifact(art_id=f"reply:{t}", tier="transcript", kind="reply", step=t, text=rec.reply,
                                     sources=st.context_ids()))
        self._prefill_ids(st, self._gen_prompt_delta(st.messages, list(st.kv.token_ids)) + rec.reply_token_ids)
        self._append_generated(st, rec.reply, reply_art, len(rec.reply_token_ids))
        if obs.remember:
            st.add(RArtifact(art_id=f"mem:{t}", tier="memory", kind="memory", step=t, text=obs.text,
                             sources=[obs_art.art_id]))
        for c in rec.tool_calls:
            st.add(RArtifact(art_id=f"plan:{c.call_id}", tier="plan", kind="plan", step=t,
                             text=f"{c.tool}({c.args})", sources=[reply_art.art_id]))
        if rec.summary is not None:
            instr = st.add(RArtifact(art_id=f"instr:summary:{t}", tier="transcript", kind="instruction", step=t,
                                     text=self.config.summary_prompt))
            self._append_user(st, self.config.summary_prompt, instr)
            sart = st.add(RArtifact(art_id=f"summary:{t}", tier="summary", kind="summary", step=t, text=rec.summary,
                                    sources=st.context_ids()))
            self._prefill_ids(st, self._gen_prompt_delta(st.messages, list(st.kv.token_ids)) + rec.summary_token_ids)
            self._append_generated(st, rec.summary, sart, len(rec.summary_token_ids))
        st.step = t
        st.trajectory.steps.append(rec)
        st.cost.seconds += time.perf_counter() - t0

    # ------------------------------------------------------------------ memory recall

    def recalled(self, st: RuntimeState, before_step: int | None = None) -> list[RArtifact]:
        """The memory records a recall retrieves: the ``recall_k`` most recent ones written before
        ``before_step`` (all alive ones when None), oldest first."""
        recs = [a for a in st.tier("memory") if before_step is None or a.step < before_step]
        return sorted(recs, key=lambda a: (a.step, a.art_id))[-self.config.recall_k:]

    def _recall_at_session_start(self, st: RuntimeState, t: int, obs: Observation) -> None:
        """At the first step of a later session, retrieve memory into the context (a transcript
        artifact derived from the memory records it quotes)."""
        prev = st.trajectory.observations[t - 2] if 2 <= t <= len(st.trajectory.observations) + 1 else None
        if self.config.recall == "off" or prev is None or prev.session == obs.session:
            return
        recs = self.recalled(st, t)
        if not recs:
            return
        art = st.add(RArtifact(art_id=f"recall:{t}", tier="transcript", kind="recall", step=t,
                               text=render_recall([a.text for a in recs]), sources=[a.art_id for a in recs]))
        self._append_user(st, art.text, art)

    # ------------------------------------------------------------------ checkpoints

    def _checkpoint(self, st: RuntimeState) -> Checkpoint:
        ck = Checkpoint(
            step=st.step,
            kv_length=st.kv.length,
            kv_digest=digest_ids(list(st.kv.token_ids)),
            n_messages=len(st.messages),
            artifact_ids=list(st.artifacts),
            committed_calls=len(st.env.committed) if st.env else 0,
            model=self.model,
            code_version=self.code_version,
        )
        st.trajectory.checkpoints = [c for c in st.trajectory.checkpoints if c.step != ck.step] + [ck]
        return ck

    def check(self, obj: Trajectory | Checkpoint) -> None:
        """ReplayError unless ``obj`` was produced by this model and this code version."""
        what = "trajectory" if isinstance(obj, Trajectory) else f"checkpoint (step {obj.step})"
        mine = {k: self.model.get(k) for k in ("name", "backend", "weights_sha256")}
        theirs = {k: obj.model.get(k) for k in ("name", "backend", "weights_sha256")}
        if mine != theirs:
            raise ReplayError(
                f"this {what} was computed by model {theirs} but the runtime runs {mine}; a KV cache or "
                "recorded reply of one model is meaningless to another. Replay it with the model that "
                "recorded it, or run a full reset (operator B5) on this model"
            )
        if obj.code_version != self.code_version:
            raise ReplayError(
                f"this {what} was recorded by traceless {obj.code_version} but this is {self.code_version}; "
                "the scaffold (prompts, token stream, seeds) may differ, so splicing is not exact. Re-run the "
                "episode with this version (or check out the recording version) before forgetting"
            )

    def latest_checkpoint(self, st: RuntimeState, before_step: int) -> Checkpoint:
        """The latest checkpoint at or before step ``before_step``."""
        cands = [c for c in st.trajectory.checkpoints if c.step <= before_step]
        if not cands:
            raise ReplayError(f"no checkpoint at or before step {before_step}; the state cannot be restored")
        return max(cands, key=lambda c: c.step)

    def restore(self, st: RuntimeState, ck: Checkpoint) -> int:
        """Crop the state back to ``ck``: KV cropped (cropped entries scrubbed), later artifacts and
        steps dropped. Committed side effects stay (they happened). Returns tokens cropped."""
        self.check(ck)
        if ck.kv_length > st.kv.length or digest_ids(list(st.kv.token_ids)[: ck.kv_length]) != ck.kv_digest:
            raise ReplayError(
                f"checkpoint at step {ck.step} does not match this state's KV cache (its token prefix differs); "
                "it belongs to another trajectory. Use a checkpoint of this state's own trajectory"
            )
        cropped: int = st.kv.length - ck.kv_length
        self.backend.crop(st.kv, ck.kv_length)
        del st.messages[ck.n_messages:]
        del st.msg_art[ck.n_messages:]
        keep = set(ck.artifact_ids)
        for a in [a for a in st.artifacts if a not in keep]:
            st.drop(a)
        st.trajectory.steps = [s for s in st.trajectory.steps if s.step <= ck.step]
        st.trajectory.checkpoints = [c for c in st.trajectory.checkpoints if c.step <= ck.step]
        st.step = ck.step
        return cropped

    # ------------------------------------------------------------------ questions on a fork

    def _question_ids(self, st: RuntimeState, kv_ids: list[int], text: str, recall: bool) -> list[int]:
        """Tokens that put a question (after a memory recall, when asked as a new session) after
        the state's context, up to the generation prompt."""
        msgs = list(st.messages)
        ids: list[int] = []
        recs = self.recalled(st) if recall and self.config.recall != "off" else []
        for content in ([render_recall([a.text for a in recs])] if recs else []) + [text]:
            msg = ChatMessage(role="user", content=content)
            ids += self._message_delta(msgs, msg, [*kv_ids, *ids])
            msgs.append(msg)
        return ids + self._gen_prompt_delta(msgs, [*kv_ids, *ids])

    def ask(self, st: RuntimeState, text: str, config: GenerationConfig | None = None, *,
            recall: bool = False) -> Generation:
        """Answer ``text`` from the current state on a scratch fork (scrubbed afterwards). With
        ``recall`` the question opens a new session: memory is retrieved into the context first."""
        fork = self.backend.fork(st.kv)
        try:
            ids = self._question_ids(st, list(fork.token_ids), text, recall)
            self.backend.prefill(ids, fork)
            _, g = self.backend.decode(fork, config or self.config.generation)
            out: Generation = g.model_copy(update={"prompt_tokens": len(ids)})
            return out
        finally:
            self.backend.crop(fork, 0)
            del fork

    def choose(self, st: RuntimeState, question: str, options: list[str], *, recall: bool = False
               ) -> tuple[int, list[float]]:
        """Forced choice from next-token logits over option letters (string-free behaviour)."""
        letters = [chr(ord("A") + i) for i in range(len(options))]
        body = question + "\n" + "\n".join(f"{ltr}) {o}" for ltr, o in zip(letters, options, strict=True))
        body += "\nAnswer with the letter only."
        fork = self.backend.fork(st.kv)
        try:
            ids = self._question_ids(st, list(fork.token_ids), body, recall)
            self.backend.prefill(ids, fork)
            logits = self.backend.next_token_logits(fork)
            scores = [float(logits[self._letter_id(ltr)]) for ltr in letters]
        finally:
            self.backend.crop(fork, 0)
            del fork
        return max(range(len(scores)), key=lambda i: scores[i]), scores

    def _letter_id(self, letter: str) -> int:
        enc = getattr(self.backend, "encode", None)
        if enc is None:
            raise BackendError("the backend cannot encode text; forced choice needs encode()")
        ids = enc(letter)
        if not ids:
            raise BackendError(f"the tokenizer gives no token for {letter!r}")
        return int(ids[0])

    # ------------------------------------------------------------------ tokens

    def _cut_after_eot(self, ids: list[int]) -> list[int]:
        for i in range(len(ids) - 1, -1, -1):
            if ids[i] in self._stop_ids:
                return ids[: i + 1]
        return ids

    def _glue(self, rendered_prev: list[int], kv_ids: list[int]) -> list[int]:
        """Tokens that close the previous turn: the template's tail after the last end-of-turn
        token (the KV already ends with that token after a reply, or lacks it after a cut reply)."""
        last = max((i for i, x in enumerate(rendered_prev) if x in self._stop_ids), default=None)
        if last is None:
            return []
        if kv_ids and kv_ids[-1] in self._stop_ids:
            return rendered_prev[last + 1 :]
        return rendered_prev[last:]

    def _message_delta(self, prev: list[ChatMessage], msg: ChatMessage, kv_ids: list[int]) -> list[int]:
        """Tokens that extend a context rendering ``prev`` (and holding ``kv_ids``) by ``msg``, ending
        at the message's end-of-turn token."""
        a = self.backend.chat_token_ids(prev, add_generation_prompt=False)
        b = self._cut_after_eot(self.backend.chat_token_ids([*prev, msg], add_generation_prompt=False))
        if b[: len(a)] != a:
            raise BackendError(
                "the chat template is not prefix-stable (rendering a conversation with one more message "
                "changes earlier tokens); the runtime cannot extend the KV cache incrementally with this model"
            )
        return self._glue(a, kv_ids) + b[len(a) :]

    def _gen_prompt_delta(self, prev: list[ChatMessage], kv_ids: list[int]) -> list[int]:
        a = self.backend.chat_token_ids(prev, add_generation_prompt=False)
        b: list[int] = self.backend.chat_token_ids(prev, add_generation_prompt=True)
        return self._glue(a, kv_ids) + b[len(a) :]

    def _prefill_ids(self, st: RuntimeState, ids: list[int]) -> None:
        if ids:
            self.backend.prefill(ids, st.kv)
            st.cost.prefill_tokens += len(ids)

    def _append_user(self, st: RuntimeState, text: str, art: RArtifact) -> None:
        self.append_message(st, ChatMessage(role="user", content=text), art)

    def _append_generated(self, st: RuntimeState, text: str, art: RArtifact, n_tokens: int) -> None:
        st.messages.append(ChatMessage(role="assistant", content=text))
        st.msg_art.append(art.art_id)
        self._kv_segment(st, art, st.kv.length - n_tokens)

    def append_message(self, st: RuntimeState, msg: ChatMessage, art: RArtifact) -> None:
        """Teacher-force a message given as text (re-tokenized by the template)."""
        ids = self._message_delta(st.messages, msg, list(st.kv.token_ids))
        start = st.kv.length
        self._prefill_ids(st, ids)
        st.messages.append(msg)
        st.msg_art.append(art.art_id)
        self._kv_segment(st, art, start)

    def _kv_segment(self, st: RuntimeState, art: RArtifact, start: int) -> None:
        art.kv_start, art.kv_end = start, st.kv.length
        prev = [a for a in st.artifacts.values() if a.tier == "kv"]
        st.kv_nonce += 1
        st.add(RArtifact(art_id=f"kv:{art.art_id}", tier="kv", kind="kv_segment", step=art.step,
                         text=f"[{start},{st.kv.length}) #{st.kv_nonce}",
                         sources=[art.art_id] + ([prev[-1].art_id] if prev else []),
                         kv_start=start, kv_end=st.kv.length))

    def _decode(self, st: RuntimeState, gen: GenerationConfig) -> tuple[str, list[int]]:
        self._prefill_ids(st, self._gen_prompt_delta(st.messages, list(st.kv.token_ids)))
        n0 = st.kv.length
        _, g = self.backend.decode(st.kv, gen)
        ids = list(st.kv.token_ids)[n0:]
        st.cost.decode_tokens += len(ids)
        st.cost.prefill_tokens += g.prompt_tokens  # logits recomputed after a crop
        return g.text, ids

    # ------------------------------------------------------------------ tools

    def _tools(self, st: RuntimeState, reply: str, t: int, reply_id: str) -> list[ToolCall]:
        if st.env is None:
            return []
        out: list[ToolCall] = []
        for call in parse_tool_calls(reply, st.env.tools, episode_id=st.trajectory.episode_id, step=t):
            if st.sink_block and any(s and s in call.args for s in st.sink_block):
                done = call.model_copy(update={"status": "blocked"})
            else:
                done = st.env.execute(call, replay=st.replaying, shadow_state=st.shadow_state)
            st.add(RArtifact(art_id=f"plan:{call.call_id}", tier="plan", kind="plan", step=t,
                             text=f"{call.tool}({call.args})", sources=[reply_id]))
            out.append(done)
        return out
