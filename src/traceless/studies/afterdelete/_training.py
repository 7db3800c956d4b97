"""Training and frozen checkpoints for the learned auditors (greedy information gain,
contextual bandit, recurrent PPO) — paper 001 appendix B.

Training uses only the *training split* (seed 20260828). The evaluated model answers each
of the seven templates once per training profile and world (a history-free reply table,
``collect_reply_table``); the policies are then fitted offline on that table, where the
evaluator's label (prediction == target) is the training reward. Evaluation runs the
frozen policy online against the real model, with no feedback.

Checkpoints are one JSON file (format ``traceless-afterdelete-auditor/1``) holding the
kind, training metadata, parameters and a sha256 over them. ``load_checkpoint`` checks
all of it before anything reaches torch, so a truncated or edited file is a clear
``InputFormatError`` telling how to retrain, never a crash deep inside torch.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from traceless._version import code_version
from traceless.errors import ConfigError, InputFormatError
from traceless.models import GenerationConfig, ModelBackend
from traceless.studies.afterdelete._auditors import (
    AUDITORS,
    FEATURE_DIM,
    SUBMIT,
    TEMPLATE_NAMES,
    TEMPLATES,
    Auditor,
    AuditView,
    ContextualBandit,
    Decision,
    GreedyInfoGain,
    PromptedLLM,
    choose_candidate,
    code_like,
    features,
)
from traceless.studies.afterdelete._contracts import Parsed, build_messages, official_parse
from traceless.studies.afterdelete._profiles import Profile
from traceless.studies.afterdelete._worlds import WORLDS, MemoryCondition, build_world

__all__ = [
    "CHECKPOINT_FORMAT",
    "TRAINABLE",
    "ReplyTable",
    "TrainConfig",
    "collect_reply_table",
    "train_auditor",
    "save_checkpoint",
    "load_checkpoint",
    "PPOAuditor",
]

CHECKPOINT_FORMAT = "traceless-afterdelete-auditor/1"
TRAINABLE: tuple[str, ...] = ("greedy_ig", "bandit", "ppo")
N_ACTIONS = len(TEMPLATE_NAMES) + 1  # seven templates + submit
HIDDEN = 32


class TableEntry(BaseModel):
    """One training reply (history-free)."""

    model_config = ConfigDict(frozen=True)

    parse: Parsed
    """Official parse of the reply."""
    correct: bool
    """Training label: the parsed prediction equals the target."""


class ReplyTable(BaseModel):
    """Replies of the evaluated model to each template on training profiles/worlds."""

    episodes: list[dict[str, TableEntry]]
    """One dict per (profile, world): template name → entry."""
    worlds: list[str]
    """World of each episode (clean or forget)."""
    targets: list[str]
    """Training targets (training split only; never an evaluation target)."""
    model: dict[str, Any] = Field(default_factory=dict)
    """Identity of the model that produced the replies."""


def collect_reply_table(
    model: ModelBackend, profiles: list[Profile], condition: MemoryCondition, *, contract: str = "aligned",
    max_new_tokens: int = 96,
) -> ReplyTable:
    """Ask every template once (no history) in both worlds of every training profile."""
    key = secrets.token_bytes(32)
    msgs, idx = [], []
    for p in profiles:
        if p.split != "train":
            raise ConfigError(f"auditors train on the training split only; got a {p.split!r} profile")
        for w in WORLDS:
            world = build_world(p, w, condition, gate_key=key)  # type: ignore[arg-type]
            for t in TEMPLATE_NAMES:
                q = TEMPLATES[t].format(attribute=p.attribute)
                msgs.append(build_messages(attribute=p.attribute, memory=world.model_view(q),
                                           serialization=condition.serialization, history=[], query=q,
                                           contract=contract))
                idx.append((p.target, w, t))
    gens = model.generate_batch(msgs, GenerationConfig(max_new_tokens=max_new_tokens, temperature=0.0))
    episodes: list[dict[str, TableEntry]] = []
    worlds: list[str] = []
    targets: list[str] = []
    for i in range(0, len(idx), len(TEMPLATE_NAMES)):
        ep = {}
        for (target, _w, t), g in zip(idx[i:i + len(TEMPLATE_NAMES)], gens[i:i + len(TEMPLATE_NAMES)], strict=True):
            pr = official_parse(g.text)
            ep[t] = TableEntry(parse=pr, correct=pr.prediction == target)
        episodes.append(ep)
        worlds.append(idx[i][1])
        targets.append(idx[i][0])
    return ReplyTable(episodes=episodes, worlds=worlds, targets=targets, model=model.describe())


class TrainConfig(BaseModel):
    """Hyper-parameters of auditor training."""

    seed: int = 0
    """Seed of the training generator (PPO checkpoints A and B use seeds 0 and 1)."""
    ppo_iterations: int = Field(120, ge=1)
    """PPO iterations (each: a batch of simulated episodes, then clipped updates)."""
    ppo_batch: int = Field(64, ge=4)
    """Episodes per PPO iteration."""
    ppo_epochs: int = Field(4, ge=1)
    """Optimisation epochs per iteration."""
    ppo_lr: float = 3e-3
    """Adam learning rate."""
    ppo_clip: float = 0.2
    """PPO clip range."""
    ppo_entropy: float = 0.01
    """Entropy bonus."""
    query_cost: float = 0.01
    """Reward cost per query (the submission reward is 1 for an exact match)."""
    bandit_epochs: int = Field(20, ge=1)
    """Passes over the training episodes for LinUCB."""
    bandit_alpha: float = 0.5
    """LinUCB exploration width (training only; evaluation is greedy)."""


# ----------------------------------------------------------------------------- simulation
def _sim_step(view: AuditView, ep: dict[str, TableEntry], template: str) -> None:
    view.queries.append(template)
    view.replies.append("")
    view.parses.append(ep[template].parse)


def fit_greedy_ig(table: ReplyTable) -> GreedyInfoGain:
    """a_t / b_t: Laplace-smoothed code-like rates in forget / clean training worlds."""
    a: dict[str, float] = {}
    b: dict[str, float] = {}
    for t in TEMPLATE_NAMES:
        for world, dst in (("forget", a), ("clean", b)):
            hits = [code_like(ep[t].parse.prediction) for ep, w in zip(table.episodes, table.worlds, strict=True)
                    if w == world]
            dst[t] = (sum(hits) + 1) / (len(hits) + 2)
    return GreedyInfoGain(a, b)


def fit_bandit(table: ReplyTable, cfg: TrainConfig) -> ContextualBandit:
    """LinUCB over (features, 1) contexts; reward 1 when the template's parse is exact."""
    rng = np.random.default_rng(cfg.seed)
    d = FEATURE_DIM + 1
    A = np.stack([np.eye(d) for _ in TEMPLATE_NAMES])
    bvec = np.zeros((len(TEMPLATE_NAMES), d))
    n = len(table.episodes)
    for _ in range(cfg.bandit_epochs):
        for e in rng.permutation(n):
            ep = table.episodes[int(e)]
            v = AuditView(attribute="")
            while v.left > 0:
                x = np.append(features(v), 1.0)
                ucb = np.empty(len(TEMPLATE_NAMES))
                for i in range(len(TEMPLATE_NAMES)):
                    Ainv = np.linalg.inv(A[i])
                    ucb[i] = Ainv.dot(bvec[i]) @ x + cfg.bandit_alpha * float(np.sqrt(x @ Ainv @ x))
                arm = int(np.argmax(ucb))
                t = TEMPLATE_NAMES[arm]
                r = 1.0 if ep[t].correct else 0.0
                A[arm] += np.outer(x, x)
                bvec[arm] += r * x
                _sim_step(v, ep, t)
                if code_like(v.parses[-1].prediction):
                    break
    theta = np.stack([np.linalg.solve(A[i], bvec[i]) for i in range(len(TEMPLATE_NAMES))])
    return ContextualBandit(theta)


# ----------------------------------------------------------------------------- PPO
def _torch() -> Any:
    import torch

    return torch


def _make_net(torch: Any) -> Any:
    nn = torch.nn

    class Policy(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRUCell(FEATURE_DIM, HIDDEN)
            self.pi = nn.Linear(HIDDEN, N_ACTIONS)
            self.v = nn.Linear(HIDDEN, 1)

        def forward(self, x: Any, h: Any) -> tuple[Any, Any, Any]:
            h2 = self.gru(x, h)
            return self.pi(h2), self.v(h2).squeeze(-1), h2

    return Policy()


def _mask(steps: int, left: int, used: set[str]) -> np.ndarray:
    m = np.ones(N_ACTIONS, dtype=bool)
    if steps == 0:
        m[-1] = False
    if left <= 0:
        m[:] = False
        m[-1] = True
    return m


def fit_ppo(table: ReplyTable, cfg: TrainConfig) -> tuple[Any, dict[str, Any]]:
    """Recurrent PPO (GRU cell, actions = 7 templates + submit) on the reply table."""
    torch = _torch()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny GRU: threading only adds overhead
    try:
        return _fit_ppo(torch, table, cfg)
    finally:
        torch.set_num_threads(threads)


def _advantages(alive: np.ndarray, vals: np.ndarray, rews: np.ndarray) -> np.ndarray:
    """Per-step advantages of a rollout batch: GAE with gamma = 1, lambda = 0.95 (no draws)."""
    B, T = alive.shape
    adv = np.zeros((B, T), dtype=np.float32)
    for i in range(B):
        last = 0.0
        for t in reversed(range(T)):
            if not alive[i, t]:
                continue
            nxt = vals[i, t + 1] if t + 1 < T and alive[i, t + 1] else 0.0
            delta = rews[i, t] + nxt - vals[i, t]
            last = delta + 0.95 * last
            adv[i, t] = last
    return adv


def _fit_ppo(torch: Any, table: ReplyTable, cfg: TrainConfig) -> tuple[Any, dict[str, Any]]:
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    net = _make_net(torch)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.ppo_lr)
    n = len(table.episodes)
    T = 11
    history: list[float] = []
    for _ in range(cfg.ppo_iterations):
        B = cfg.ppo_batch
        eps = rng.integers(0, n, size=B)
        obs = np.zeros((B, T, FEATURE_DIM), dtype=np.float32)
        masks = np.zeros((B, T, N_ACTIONS), dtype=bool)
        acts = np.zeros((B, T), dtype=np.int64)
        logps = np.zeros((B, T), dtype=np.float32)
        vals = np.zeros((B, T), dtype=np.float32)
        rews = np.zeros((B, T), dtype=np.float32)
        alive = np.zeros((B, T), dtype=bool)
        views = [AuditView(attribute="") for _ in range(B)]
        done = np.zeros(B, dtype=bool)
        h = torch.zeros(B, HIDDEN)
        with torch.no_grad():
            for t in range(T):
                x = np.stack([features(v) for v in views])
                m = np.stack([_mask(v.steps, v.left, set(v.queries)) for v in views])
                logits, val, h = net(torch.from_numpy(x), h)
                logits = logits.masked_fill(~torch.from_numpy(m), -1e9)
                dist = torch.distributions.Categorical(logits=logits)
                a = dist.sample()
                lp = dist.log_prob(a)
                for i in range(B):
                    if done[i]:
                        continue
                    alive[i, t] = True
                    obs[i, t], masks[i, t] = x[i], m[i]
                    acts[i, t], logps[i, t], vals[i, t] = int(a[i]), float(lp[i]), float(val[i])
                    ai = int(a[i])
                    ep = table.episodes[int(eps[i])]
                    if ai == N_ACTIONS - 1:
                        cand = choose_candidate(views[i])
                        rews[i, t] = 1.0 if cand is not None and cand == table.targets[int(eps[i])] else 0.0
                        done[i] = True
                    else:
                        _sim_step(views[i], ep, TEMPLATE_NAMES[ai])
                        rews[i, t] = -cfg.query_cost
        adv = _advantages(alive, vals, rews)
        ret = adv + vals
        am = alive
        a_n = (adv - adv[am].mean()) / (adv[am].std() + 1e-8)
        to = {k: torch.from_numpy(v) for k, v in
              {"obs": obs, "m": masks, "a": acts, "lp": logps, "adv": a_n.astype(np.float32),
               "ret": ret.astype(np.float32), "alive": alive}.items()}
        for _ in range(cfg.ppo_epochs):
            h = torch.zeros(B, HIDDEN)
            loss = torch.zeros(())
            cnt = float(am.sum())
            for t in range(T):
                logits, val, h = net(to["obs"][:, t], h)
                logits = logits.masked_fill(~to["m"][:, t], -1e9)
                dist = torch.distributions.Categorical(logits=logits)
                lp = dist.log_prob(to["a"][:, t])
                ratio = torch.exp(lp - to["lp"][:, t])
                adv_t = to["adv"][:, t]
                pg = -torch.min(ratio * adv_t, torch.clamp(ratio, 1 - cfg.ppo_clip, 1 + cfg.ppo_clip) * adv_t)
                vl = (val - to["ret"][:, t]) ** 2
                ent = dist.entropy()
                step = (pg + 0.5 * vl - cfg.ppo_entropy * ent) * to["alive"][:, t].float()
                loss = loss + step.sum() / cnt
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
        history.append(float(rews.sum() / B))
    return net, {"mean_return_first": history[0], "mean_return_last": float(np.mean(history[-10:]))}


class PPOAuditor(Auditor):
    """A frozen recurrent PPO checkpoint, acting greedily (argmax over allowed actions)."""

    name = "ppo"

    def __init__(self, net: Any, label: str = "ppo") -> None:
        self.net = net.eval()
        self.name = label

    def decide(self, views: list[AuditView]) -> list[Decision]:
        torch = _torch()
        out = []
        with torch.no_grad():
            for v in views:
                h = v.policy.get("h")
                if h is None:
                    h = torch.zeros(1, HIDDEN)
                x = torch.from_numpy(features(v)[None, :])
                logits, _, h = self.net(x, h)
                v.policy["h"] = h
                m = torch.from_numpy(_mask(v.steps, v.left, set(v.queries))[None, :])
                a = int(logits.masked_fill(~m, -1e9).argmax(-1)[0])
                out.append(Decision(SUBMIT, choose_candidate(v)) if a == N_ACTIONS - 1
                           else Decision(TEMPLATE_NAMES[a]))
        return out

    def decide_one(self, v: AuditView) -> Decision:
        return self.decide([v])[0]


# ----------------------------------------------------------------------------- checkpoints
def _canon(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def save_checkpoint(path: str | Path, kind: str, params: dict[str, Any], meta: dict[str, Any]) -> Path:
    """Write a checkpoint atomically (temp file + rename)."""
    body = {"kind": kind, "meta": meta, "params": params}
    doc = {"format": CHECKPOINT_FORMAT, **body, "sha256": hashlib.sha256(_canon(body)).hexdigest()}
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    tmp.replace(p)
    return p


def _bad(path: Path, why: str) -> InputFormatError:
    return InputFormatError(
        f"auditor checkpoint {path} is unusable: {why}. Retrain it with "
        "`traceless study train-auditor afterdelete --auditor NAME --out FILE` (or "
        "traceless.studies.afterdelete.train_auditor) or restore the original file."
    )


def load_checkpoint(path: str | Path, kind: str | None = None) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(kind, params, meta) of a verified checkpoint."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"auditor checkpoint {p} does not exist; train one with "
                          "`traceless study train-auditor afterdelete --auditor NAME --out FILE`")
    try:
        doc = json.loads(p.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _bad(p, f"not a JSON checkpoint ({type(e).__name__}: the file is truncated or corrupted)") from None
    if not isinstance(doc, dict) or doc.get("format") != CHECKPOINT_FORMAT:
        raise _bad(p, f"not a {CHECKPOINT_FORMAT} file")
    body = {k: doc.get(k) for k in ("kind", "meta", "params")}
    if hashlib.sha256(_canon(body)).hexdigest() != doc.get("sha256"):
        raise _bad(p, "its sha256 does not match its contents (edited or corrupted)")
    if kind is not None and body["kind"] != kind:
        raise _bad(p, f"it holds a {body['kind']!r} auditor, not {kind!r}")
    if not isinstance(body["params"], dict) or not isinstance(body["meta"], dict):
        raise _bad(p, "params/meta missing")
    return str(body["kind"]), body["params"], body["meta"]


def _ppo_params(net: Any) -> dict[str, Any]:
    return {k: {"shape": list(v.shape), "data": v.detach().reshape(-1).tolist()} for k, v in net.state_dict().items()}


def _ppo_from_params(path: Path, params: dict[str, Any]) -> Any:
    torch = _torch()
    net = _make_net(torch)
    want = net.state_dict()
    if set(params) != set(want):
        raise _bad(path, f"parameter names {sorted(params)} do not match the PPO policy {sorted(want)}")
    state = {}
    for k, ref in want.items():
        ent = params[k]
        if not isinstance(ent, dict) or list(ent.get("shape", [])) != list(ref.shape):
            raise _bad(path, f"parameter {k} has shape {ent.get('shape') if isinstance(ent, dict) else '?'}, "
                             f"expected {list(ref.shape)}")
        data = ent.get("data")
        if not isinstance(data, list) or len(data) != ref.numel() or not all(isinstance(x, (int, float)) for x in data):
            raise _bad(path, f"parameter {k} has malformed data")
        state[k] = torch.tensor(data, dtype=ref.dtype).reshape(ref.shape)
    net.load_state_dict(state)
    return net


def auditor_from_checkpoint(path: str | Path, kind: str | None = None) -> Auditor:
    """Rebuild a frozen trained auditor from its checkpoint."""
    p = Path(path)
    k, params, meta = load_checkpoint(p, kind)
    try:
        if k == "greedy_ig":
            return GreedyInfoGain(
                {t: float(params["a"][t]) for t in TEMPLATE_NAMES}, {t: float(params["b"][t]) for t in TEMPLATE_NAMES},
                float(params["prior"]), float(params["stop_high"]), float(params["stop_low"]))
        if k == "bandit":
            theta = np.asarray(params["theta"], dtype=np.float64)
            if theta.shape != (len(TEMPLATE_NAMES), FEATURE_DIM + 1):
                raise _bad(p, f"theta has shape {theta.shape}")
            return ContextualBandit(theta)
        if k == "ppo":
            return PPOAuditor(_ppo_from_params(p, params), label=str(meta.get("label", "ppo")))
    except (KeyError, TypeError, ValueError) as e:
        raise _bad(p, f"missing or malformed field ({e})") from None
    raise _bad(p, f"unknown auditor kind {k!r}; trainable kinds: {', '.join(TRAINABLE)}")


def train_auditor(kind: str, table: ReplyTable, out: str | Path, cfg: TrainConfig | None = None,
                  *, label: str | None = None) -> Path:
    """Fit ``kind`` (greedy_ig, bandit, ppo) on a training reply table and save the frozen checkpoint."""
    cfg = cfg or TrainConfig()
    meta: dict[str, Any] = {"label": label or kind, "seed": cfg.seed, "episodes": len(table.episodes),
                            "model": table.model, "code_version": code_version(),
                            "train_config": cfg.model_dump()}
    if kind == "greedy_ig":
        params = fit_greedy_ig(table).params()
    elif kind == "bandit":
        params = {"theta": fit_bandit(table, cfg).theta.tolist()}
    elif kind == "ppo":
        net, info = fit_ppo(table, cfg)
        params = _ppo_params(net)
        meta.update(info)
    else:
        raise ConfigError(f"auditor {kind!r} is not trainable; trainable auditors: {', '.join(TRAINABLE)}")
    return save_checkpoint(out, kind, params, meta)


# ----------------------------------------------------------------------------- registry entries
def _need_ckpt(name: str, checkpoint: str | None) -> str:
    if not checkpoint:
        raise ConfigError(
            f"auditor {name!r} needs a frozen checkpoint (checkpoint=FILE); the afterdelete study trains one "
            "on the training split when it runs the 'auditors' block, or train it yourself with "
            f"`traceless study train-auditor afterdelete --auditor {name} --out FILE`"
        )
    return checkpoint


def _from_checkpoint(name: str, kind: str) -> Callable[..., Auditor]:
    """The registry entry of a trained auditor: ``kind``'s policy loaded from its frozen checkpoint."""

    def make(checkpoint: str | None = None, **_: Any) -> Auditor:
        return auditor_from_checkpoint(_need_ckpt(name, checkpoint), kind)

    return make


for _name, _kind, _help in (
        ("greedy_ig", "greedy_ig", "greedy information-gain policy (trained on the training split)"),
        ("bandit", "bandit", "contextual bandit (LinUCB, frozen after training)"),
        ("ppo_a", "ppo", "recurrent PPO policy, frozen checkpoint A (training seed 0)"),
        ("ppo_b", "ppo", "recurrent PPO policy, frozen checkpoint B (training seed 1)")):
    AUDITORS.register(_name, help=_help)(_from_checkpoint(_name, _kind))


@AUDITORS.register("prompted_llm", help="prompted-LLM operator selector (corrected: adaptive, not a stub)")
def _prompted(model: ModelBackend | None = None, **_: Any) -> Auditor:
    if model is None:
        raise ConfigError("auditor 'prompted_llm' needs a model (model=) to select operators")
    return PromptedLLM(model)

