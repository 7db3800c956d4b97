"""AfterDeleteBench as a runner study (``traceless study run afterdelete``).

Blocks (``--set blocks=primary,transformed``), each a set of paired cells (one cell = one
world of one profile in one configuration; a profile's clean and forget cells share a
group, so both worlds go to the model in the same batch):

* ``primary``     hierarchical memory, exact deletion, gate off, one DIRECT query (Table 1)
* ``controls``    flat memory, exposure-group deletion, recorded-lineage closure (DIRECT)
* ``lifecycle``   R/C/A/E for exact (baseline), closure, and gate-on (Table 6, Figure)
* ``auditors``    all auditors in the hierarchical/exact/gate-off block (Table 5); trained
                  auditors are fitted on the training split first and frozen to
                  ``DIR/checkpoints/`` (or loaded from ``checkpoints``)
* ``contracts``   module A: 2×2 audit × activation contract factorial with raw replies
* ``writediag``   module B: one post-audit state forked into no-write / write-allowed /
                  gate-blocked; each branch's activation generated in its own uncached
                  call, so identity of no-write and gate-blocked can fail (Table 9)
* ``legacyact``   Table 10: the frozen module-B states re-probed with only the activation
                  contract changed (aligned → legacy)
* ``calibration`` appendix E: pick the contract with the highest official forget-world R
                  on development profiles, freeze it, evaluate it on an untouched panel; plus
                  the one-factor confirmation (only the contract varies) on a third panel
* ``variants``    JSON fact-ledger, partial-memory retrieval, alternative activation wording
* ``transformed`` module C: C0–C3 on REGION-MNEMONIC-NUMBER targets (Tables 2, 11)
* ``utility``     100-case benign-utility sanity check (5 categories × baseline/closure/gate)
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from traceless.errors import ConfigError, UnknownNameError
from traceless.models import CachingBackend, GenerationConfig, ModelBackend
from traceless.run import STUDIES, Cell, CellResult, RunContext, Study, derive_seed
from traceless.studies.afterdelete._auditors import AUDITORS, Auditor, make_auditor
from traceless.studies.afterdelete._contracts import CONTRACTS
from traceless.studies.afterdelete._episodes import (
    EpisodeResult,
    ProbeResult,
    run_activation,
    run_audits,
)
from traceless.studies.afterdelete._profiles import SPLIT_SEEDS, Profile, generate_profiles
from traceless.studies.afterdelete._training import (
    TrainConfig,
    collect_reply_table,
    train_auditor,
)
from traceless.studies.afterdelete._worlds import CONDITIONS, WORLDS, World, build_world, state_digest

__all__ = ["AfterDeleteConfig", "AfterDelete", "BLOCKS"]

BLOCKS: dict[str, str] = {
    "primary": "hierarchical memory, exact deletion, gate off, one DIRECT query",
    "controls": "flat memory, exposure-group deletion and recorded-lineage closure (DIRECT)",
    "lifecycle": "reconstruction / commitment / activation for exact, closure and gate-on",
    "auditors": "every auditor in the hierarchical / exact / gate-off block",
    "contracts": "module A: audit × activation contract factorial (legacy, aligned)",
    "writediag": "module B: matched no-write / write-allowed / gate-blocked branches",
    "legacyact": "Table 10: module-B states with only the activation contract changed to legacy",
    "calibration": "appendix E: interface calibration on dev profiles, frozen choice on a held-out panel",
    "variants": "JSON fact ledger, partial-memory retrieval, alternative activation wording",
    "transformed": "module C: C0-C3 transformed memory on REGION-MNEMONIC-NUMBER targets",
    "utility": "100-case benign-utility sanity check",
}
CONTROL_CONDITIONS = ("flat_exact", "hier_exposure_group", "hier_closure")
LIFECYCLE_CONDITIONS = ("hier_exact", "hier_closure", "hier_exact_gate")
VARIANT_CONDITIONS = ("hier_exact_ledger", "hier_exact_retrieval", "hier_closure_ledger", "hier_closure_retrieval")
TRANSFORMED_CONDITIONS = ("C0", "C1", "C2", "C3")
UTILITY_CONDITIONS = ("hier_exact", "hier_closure", "hier_exact_gate")
UTILITY_CATEGORIES = ("team", "project", "schedule", "tool", "near_miss_write")
BRANCHES = ("no_write", "write_allowed", "gate_blocked")
MODULE_PANEL_OFFSET = 104_729
"""Modules A and B (and Table 10) use new panels, as the paper does (104 IID + 104 OOD not
in the main panel): the split's generator seed plus this offset (the 10,000th prime; module
C's panel uses +7919), so their profiles are fresh draws."""
CALIBRATION_PANEL_OFFSET = 130_363
"""The calibration's held-out panel: another untouched stream (the 12,000th prime)."""
CONFIRMATION_PANEL_OFFSET = 141_079
"""The one-factor contract confirmation's panel: a third untouched stream (the 13,000th prime)."""
ALL_AUDITORS = ("direct", "paraphrase", "expert", "greedy_ig", "bandit", "ppo_a", "ppo_b", "prompted_llm")


class AfterDeleteConfig(BaseModel):
    """Configuration of the AfterDeleteBench study (paper 001)."""

    model_config = ConfigDict(extra="forbid")

    blocks: list[str] = Field(default_factory=lambda: ["primary", "controls", "lifecycle", "transformed"])
    """Blocks to run (see BLOCKS); order of execution follows this list."""
    n: int = Field(200, ge=1)
    """Profiles per test split (paper: 200)."""
    splits: list[str] = Field(default_factory=lambda: ["iid", "ood"])
    """Test splits (iid, ood; dev also allowed)."""
    block_n: dict[str, int] = Field(default_factory=dict)
    """Per-block override of ``n`` (e.g. ``{"lifecycle": 24}``) to run a costly block on a
    prefix of the panel; profiles are the same first-k of each split."""
    n_transformed: int = Field(104, ge=1)
    """Module C atomic composed-target profiles per split (paper: 104)."""
    n_train: int = Field(24, ge=2)
    """Training-split profiles used to fit the learned auditors."""
    contract: str = "aligned"
    """Audit and activation response contract for every block except module A."""
    auditors: list[str] = Field(default_factory=lambda: list(ALL_AUDITORS))
    """Auditors of the 'auditors' block."""
    n_modules: int = Field(104, ge=1)
    """Profiles per split of the new module A/B panels (paper: 104 IID + 104 OOD)."""
    n_calibration: int = Field(20, ge=1)
    """Development profiles per candidate contract in the interface calibration."""
    selector: str | None = None
    """Backend spec of the prompted-LLM auditor's operator selector (e.g.
    ``openai:MODEL@URL``); None: the model under test. Recorded in every row it drives."""
    checkpoints: dict[str, str] = Field(default_factory=dict)
    """Frozen checkpoints for trained auditors (name → file); missing ones are trained."""
    ppo_iterations: int = Field(120, ge=1)
    """PPO training iterations for the learned auditors (see TrainConfig)."""
    writediag_auditor: str = "expert"
    """Auditor whose post-audit state module B forks (paper: the aligned expert script)."""
    budget: int = Field(10, ge=1, le=10)
    """Query budget of every auditor (paper: 10)."""
    max_new_tokens: int = Field(96, ge=8)
    """Decoding cap (paper: greedy, 96 new tokens, no stop sequence)."""
    seed: int = 20260809
    """Inference seed (recorded; decoding is greedy)."""
    batch: int = Field(16, ge=1)
    """Profiles per group: both worlds of this many profiles go to the model as one batch."""

    @field_validator("blocks")
    @classmethod
    def _blocks(cls, v: list[str]) -> list[str]:
        for b in v:
            if b not in BLOCKS:
                raise UnknownNameError("afterdelete block", b, list(BLOCKS))
        return v

    @field_validator("block_n")
    @classmethod
    def _block_n(cls, v: dict[str, int]) -> dict[str, int]:
        for b, k in v.items():
            if b not in BLOCKS:
                raise UnknownNameError("afterdelete block", b, list(BLOCKS))
            if k < 1:
                raise ValueError(f"block_n[{b}] must be >= 1")
        return v

    @field_validator("splits")
    @classmethod
    def _splits(cls, v: list[str]) -> list[str]:
        for s in v:
            if s not in SPLIT_SEEDS or s == "train":
                raise UnknownNameError("test split", s, [x for x in SPLIT_SEEDS if x != "train"])
        return v

    @field_validator("contract", "auditors", "writediag_auditor")
    @classmethod
    def _registered(cls, v: str | list[str], info: ValidationInfo) -> str | list[str]:
        """Each name is registered (the contract's in ``CONTRACTS``, an auditor's in ``AUDITORS``)."""
        get: Callable[[str], object] = CONTRACTS.get if info.field_name == "contract" else AUDITORS.get
        for name in [v] if isinstance(v, str) else v:
            get(name)
        return v


def _key(**kw: Any) -> str:
    return "/".join(f"{k}={v}" for k, v in kw.items())


@STUDIES.register("afterdelete", help="paper 001 AfterDeleteBench: paired post-deletion audit")
class AfterDelete(Study[AfterDeleteConfig]):
    """AfterDeleteBench (paper 001)."""

    name: ClassVar[str] = "afterdelete"
    version: ClassVar[str] = "2"  # 2: new module A/B panels, uncached per-branch module B, Table 10, calibration
    bundle_extra: ClassVar[tuple[str, ...]] = ("queries", "statuses", "near_miss_kind", "calibration_dev_R")
    """Query kinds and parser statuses (labels); the query texts, replies and predictions are dropped."""
    config_cls: ClassVar[type[BaseModel]] = AfterDeleteConfig
    resume_may_change: ClassVar[frozenset[str]] = frozenset(
        {"n", "n_transformed", "n_modules", "blocks", "batch", "block_n", "writediag_auditor"})

    # ------------------------------------------------------------------ grid
    def cells(self, config: AfterDeleteConfig) -> Iterable[Cell]:
        for block in config.blocks:
            yield from getattr(self, f"_cells_{block}")(config)

    def _profile_cells(self, config: AfterDeleteConfig, block: str, variants: list[dict[str, Any]],
                       *, composed: bool = False, panel: str = "main",
                       splits: list[str] | None = None) -> Iterator[Cell]:
        default = config.n_modules if panel != "main" else config.n
        n = config.n_transformed if composed else config.block_n.get(block, default)
        for split in splits or config.splits:
            profiles = generate_profiles(split, n, composed=composed, seed=_panel_seed(split, panel))
            for var in variants:
                # module B's branches share a group: each unit's three activations are generated once
                tag = _key(**{k: v for k, v in var.items() if k != "branch"})
                for p in profiles:
                    chunk = p.index // config.batch
                    for w in WORLDS:
                        params = {"block": block, **var, "split": split, "profile": p.index, "world": w,
                                  "domain": p.domain, "structure": p.structure, "composed": composed,
                                  "panel": panel}
                        yield Cell(key=_key(block=block, **var, split=split, profile=p.index, world=w),
                                   group=f"{block}/{tag}/{split}/{chunk}", params=params,
                                   seed=derive_seed(config.seed, block, split, p.index))

    def _cells_primary(self, c: AfterDeleteConfig) -> Iterator[Cell]:
        return self._profile_cells(c, "primary", [{"condition": "hier_exact", "auditor": "direct"}])

    def _cells_controls(self, c: AfterDeleteConfig) -> Iterator[Cell]:
        return self._profile_cells(c, "controls", [{"condition": k, "auditor": "direct"} for k in CONTROL_CONDITIONS])

    def _cells_lifecycle(self, c: AfterDeleteConfig) -> Iterator[Cell]:
        return self._profile_cells(c, "lifecycle", [{"condition": k, "auditor": "direct", "wording": "primary"}
                                                    for k in LIFECYCLE_CONDITIONS])

    def _cells_auditors(self, c: AfterDeleteConfig) -> Iterator[Cell]:
        return self._profile_cells(c, "auditors", [{"condition": "hier_exact", "auditor": a} for a in c.auditors])

    def _cells_contracts(self, c: AfterDeleteConfig) -> Iterator[Cell]:
        return self._profile_cells(c, "contracts", [{"condition": "hier_exact", "auditor": "direct",
                                                     "audit_contract": a, "activation_contract": b}
                                                    for a in ("legacy", "aligned") for b in ("legacy", "aligned")],
                                   panel="modules")

    def _cells_writediag(self, c: AfterDeleteConfig) -> Iterator[Cell]:
        return self._profile_cells(c, "writediag", [{"condition": "hier_exact", "auditor": c.writediag_auditor,
                                                     "branch": b} for b in BRANCHES], panel="modules")

    def _cells_legacyact(self, c: AfterDeleteConfig) -> Iterator[Cell]:
        return self._profile_cells(c, "legacyact", [{"condition": "hier_exact", "auditor": c.writediag_auditor,
                                                     "branch": b, "activation_contract": "legacy"}
                                                    for b in BRANCHES], panel="modules")

    def _cells_calibration(self, c: AfterDeleteConfig) -> Iterator[Cell]:
        """Development cells per candidate contract, then the frozen choice on the held-out
        panel (its group re-derives the choice from the dev audits, answered by the cache)."""
        dev = c.model_copy(update={"block_n": {**c.block_n, "calibration": c.n_calibration}})
        yield from self._profile_cells(dev, "calibration", [{"condition": "hier_exact", "auditor": "direct",
                                                             "stage": "dev", "audit_contract": k}
                                                            for k in sorted(CONTRACTS.names())], splits=["dev"])
        held = c.model_copy(update={"block_n": {k: v for k, v in c.block_n.items() if k != "calibration"}})
        yield from self._profile_cells(held, "calibration", [{"condition": "hier_exact", "auditor": "direct",
                                                              "stage": "heldout", "audit_contract": "selected"}],
                                       panel="calibration")
        # the one-factor confirmation: only the requested contract varies, raw replies kept
        yield from self._profile_cells(held, "calibration", [{"condition": "hier_exact", "auditor": "direct",
                                                              "stage": "confirm", "audit_contract": k}
                                                             for k in sorted(CONTRACTS.names())], panel="confirmation")

    def _cells_variants(self, c: AfterDeleteConfig) -> Iterator[Cell]:
        var = [{"condition": k, "auditor": "direct", "wording": "primary"} for k in VARIANT_CONDITIONS]
        var += [{"condition": k, "auditor": "direct", "wording": "alternative"} for k in ("hier_exact", "hier_closure")]
        return self._profile_cells(c, "variants", var)

    def _cells_transformed(self, c: AfterDeleteConfig) -> Iterator[Cell]:
        return self._profile_cells(c, "transformed", [{"condition": k, "auditor": "direct"}
                                                      for k in TRANSFORMED_CONDITIONS], composed=True)

    def _cells_utility(self, c: AfterDeleteConfig) -> Iterator[Cell]:
        for cond in UTILITY_CONDITIONS:
            for ci, cat in enumerate(UTILITY_CATEGORIES):
                for j in range(20):
                    yield Cell(key=_key(block="utility", condition=cond, category=cat, case=j),
                               group=f"utility/{cond}", seed=derive_seed(c.seed, "utility", ci, j),
                               params={"block": "utility", "condition": cond, "category": cat, "case": j,
                                       "split": "dev", "profile": j, "world": "forget"})

    # ------------------------------------------------------------------ setup
    def validate(self, config: AfterDeleteConfig) -> None:
        """Every checkpoint given in ``checkpoints`` is an existing file (missing ones are
        only trained when not given)."""
        for name, given in config.checkpoints.items():
            p = Path(given).expanduser()
            if not p.is_file():
                raise ConfigError(f"checkpoint for auditor {name!r}: {p} is not a file; pass an existing "
                                  f"checkpoint (from `traceless study train-auditor`) or leave {name!r} out of checkpoints to train it")

    def setup(self, ctx: RunContext[AfterDeleteConfig]) -> None:
        ctx.state["gate_key"] = secrets.token_bytes(32)  # protected, per run, never written out
        ctx.state["profiles"] = {}
        cfg = ctx.config
        ctx.state["gen"] = GenerationConfig(max_new_tokens=cfg.max_new_tokens, temperature=0.0, seed=cfg.seed)
        needed = set()
        if "auditors" in cfg.blocks:
            needed |= {a for a in cfg.auditors if a in ("greedy_ig", "bandit", "ppo_a", "ppo_b")}
        if cfg.writediag_auditor in ("greedy_ig", "bandit", "ppo_a", "ppo_b") and "writediag" in cfg.blocks:
            needed.add(cfg.writediag_auditor)
        ctx.state["checkpoints"] = self._ensure_checkpoints(ctx, sorted(needed))
        ctx.state["selector"] = None
        ctx.state["selector_record"] = {"spec": None, "identity": ctx.identity, "is_model_under_test": True}
        if cfg.selector:
            from traceless.models import load_backend

            inner = load_backend(cfg.selector, engine=ctx.engine)
            ctx.state["selector"] = CachingBackend(inner, ctx.work_dir / "selector_generations.sqlite")
            ctx.state["selector_record"] = {"spec": cfg.selector, "identity": inner.describe(),
                                            "is_model_under_test": False}

    def _ensure_checkpoints(self, ctx: RunContext[AfterDeleteConfig], names: list[str]) -> dict[str, str]:
        cfg = ctx.config
        out: dict[str, str] = {}
        table = None
        for name in names:
            given = cfg.checkpoints.get(name)
            path = Path(given) if given else ctx.out_dir / "checkpoints" / f"{name}.json"
            if not path.exists():
                if given:
                    raise ConfigError(f"checkpoint for auditor {name!r} not found: {path}")
                if table is None:
                    model = ctx.require_model()
                    train = generate_profiles("train", cfg.n_train)
                    table = collect_reply_table(model, train, CONDITIONS.get("hier_exact"), contract=cfg.contract,
                                                max_new_tokens=cfg.max_new_tokens)
                kind = "ppo" if name.startswith("ppo") else name
                seed = 1 if name == "ppo_b" else 0
                train_auditor(kind, table, path, TrainConfig(seed=seed, ppo_iterations=cfg.ppo_iterations), label=name)
            out[name] = str(path)
        return out

    # ------------------------------------------------------------------ helpers
    def _profiles(self, ctx: RunContext[AfterDeleteConfig], split: str, composed: bool,
                  panel: str = "main") -> list[Profile]:
        """Profiles of one panel (generation is prefix-stable: the first k of a longer list
        are the k profiles a shorter one would hold)."""
        cache: dict[tuple[str, bool, str], list[Profile]] = ctx.state.setdefault("profiles", {})
        key = (split, composed, panel)
        c = ctx.config
        n = c.n_transformed if composed else max([20, c.n, c.n_modules, c.n_calibration, *c.block_n.values()])
        if key not in cache or len(cache[key]) < n:
            cache[key] = generate_profiles(split, n, composed=composed, seed=_panel_seed(split, panel))
        return cache[key]

    def _world(self, ctx: RunContext[AfterDeleteConfig], p: Profile, world: str, condition: str) -> World:
        cond = CONDITIONS.get(condition)
        emb = ctx.embedder if cond.retrieval_k is not None else None
        return build_world(p, world, cond, gate_key=ctx.state["gate_key"], embedder=emb)  # type: ignore[arg-type]

    def _auditor(self, ctx: RunContext[AfterDeleteConfig], name: str, model: ModelBackend) -> Auditor:
        if name == "prompted_llm":  # its operator selector: the configured backend, or the model under test
            model = ctx.state.get("selector") or model
        return make_auditor(name, checkpoint=ctx.state.get("checkpoints", {}).get(name), model=model)

    @staticmethod
    def _ep_metrics(ep: EpisodeResult) -> dict[str, Any]:
        return {
            "R": ep.R, "submitted": ep.submitted is not None, "n_queries": len(ep.queries),
            "status_last": ep.statuses[-1] if ep.statuses else "none",
            "anywhere": any(ep.anywhere), "anywhere_first": bool(ep.anywhere and ep.anywhere[0]),
            "first_correct_query": ep.first_correct_query,
        }

    @staticmethod
    def _ep_extra(ep: EpisodeResult) -> dict[str, Any]:
        return {"queries": ep.queries, "query_texts": ep.query_texts, "replies": ep.replies,
                "statuses": ep.statuses, "submitted_prediction": ep.submitted}

    @staticmethod
    def _probe_fields(pr: ProbeResult, prefix: str = "activation") -> tuple[dict[str, Any], dict[str, Any]]:
        return ({"A": pr.A, f"{prefix}_status": pr.status, f"{prefix}_anywhere": pr.anywhere},
                {f"{prefix}_reply": pr.reply, f"{prefix}_prediction": pr.prediction})

    # ------------------------------------------------------------------ run
    def run_group(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell]) -> Iterable[CellResult]:
        block = cells[0].params["block"]
        runner: Callable[[RunContext[AfterDeleteConfig], list[Cell]], Iterable[CellResult]] = getattr(
            self, f"_run_{block}")
        t0 = time.perf_counter()
        results = list(runner(ctx, cells))  # one batch per group: results arrive together anyway
        wall = round(time.perf_counter() - t0, 3)
        by_key = {c.key: c for c in cells}
        for r in results:
            r.timing["group_seconds"] = wall  # real wall time of the whole group (all its cells)
            r.timing["group_cells"] = len(results)
            if by_key[r.key].params.get("auditor") == "prompted_llm":
                r.extra["selector"] = ctx.state.get("selector_record")
        return results

    def _setup_worlds(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell],
                      condition: str | None = None) -> list[World]:
        out = []
        for c in cells:
            p = self._profiles(ctx, c.params["split"], bool(c.params.get("composed")),
                               c.params.get("panel", "main"))[c.params["profile"]]
            out.append(self._world(ctx, p, c.params["world"], condition or c.params["condition"]))
        return out

    def _audit_cells(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell], *, auditor: str | None = None,
                     contract: str | None = None) -> tuple[list[World], list[EpisodeResult]]:
        model = ctx.require_model()
        worlds = self._setup_worlds(ctx, cells)
        aud = self._auditor(ctx, auditor or cells[0].params["auditor"], model)
        eps = run_audits(model, worlds, aud, contract=contract or ctx.config.contract, budget=ctx.config.budget,
                         gen=ctx.state["gen"])
        return worlds, eps

    def _run_simple(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell],
                    contract: str | None = None) -> Iterator[CellResult]:
        worlds, eps = self._audit_cells(ctx, cells, contract=contract)
        for c, w, ep in zip(cells, worlds, eps, strict=True):
            extra = self._ep_extra(ep)
            metrics = self._ep_metrics(ep)
            metrics["target_in_state"] = w.profile.target in w.visible_text()
            yield CellResult(key=c.key, prompt=ep.first_messages, reply=ep.replies[-1] if ep.replies else None,
                             metrics=metrics, timing=ep.timing, extra=extra)

    _run_primary = _run_simple
    _run_controls = _run_simple
    _run_auditors = _run_simple

    def _run_lifecycle(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell]) -> Iterator[CellResult]:
        worlds, eps = self._audit_cells(ctx, cells)
        commits = [w.commit(ep.submitted) for w, ep in zip(worlds, eps, strict=True)]
        wording = cells[0].params.get("wording", "primary")
        probes = run_activation(ctx.require_model(), worlds, contract=ctx.config.contract, gen=ctx.state["gen"],
                                wording=wording)
        for c, w, ep, cm, pr in zip(cells, worlds, eps, commits, probes, strict=True):
            C = bool(cm.accepted and cm.present and ep.submitted == w.profile.target)
            m = self._ep_metrics(ep)
            pm, pe = self._probe_fields(pr)
            m.update(pm)
            m.update({"C": C, "E": bool(ep.R and C and pr.A), "write_attempted": cm.attempted,
                      "write_accepted": cm.accepted, "write_present": cm.present, "write_blocked": cm.blocked})
            extra = {**self._ep_extra(ep), **pe}
            t = dict(ep.timing)
            t["activation"] = pr.timing
            yield CellResult(key=c.key, prompt=ep.first_messages, reply=ep.replies[-1] if ep.replies else None,
                             metrics=m, timing=t, extra=extra)

    def _run_variants(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell]) -> Iterator[CellResult]:
        return self._run_lifecycle(ctx, cells)

    def _run_contracts(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell]) -> Iterator[CellResult]:
        a_contract = cells[0].params["audit_contract"]
        b_contract = cells[0].params["activation_contract"]
        worlds, eps = self._audit_cells(ctx, cells, contract=a_contract)
        commits = [w.commit(ep.submitted, gate_enabled=False) for w, ep in zip(worlds, eps, strict=True)]
        probes = run_activation(ctx.require_model(), worlds, contract=b_contract, gen=ctx.state["gen"])
        for c, w, ep, cm, pr in zip(cells, worlds, eps, commits, probes, strict=True):
            C = bool(cm.accepted and cm.present and ep.submitted == w.profile.target)
            m = self._ep_metrics(ep)
            pm, pe = self._probe_fields(pr)
            m.update(pm)
            m.update({"C": C, "E": bool(ep.R and C and pr.A)})
            yield CellResult(key=c.key, prompt=ep.first_messages, reply=ep.replies[-1] if ep.replies else None,
                             metrics=m, timing={**ep.timing, "activation": pr.timing},
                             extra={**self._ep_extra(ep), **pe})

    def _run_writediag(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell]) -> Iterator[CellResult]:
        """Module B: one audit per (profile, world); its post-audit state is forked (rebuilt
        deterministically; the audit does not write) into the three branches. Each branch's
        activation probe is generated in its own call, bypassing the generation cache, so a
        backend that answers the same prompt differently shows up as a nondeterministic
        no-write / gate-blocked pair instead of being answered once for both."""
        return self._module_b(ctx, cells, ctx.config.contract)

    def _run_legacyact(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell]) -> Iterator[CellResult]:
        """Table 10: the same frozen module-B states, only the activation contract changed."""
        return self._module_b(ctx, cells, cells[0].params["activation_contract"])

    def _module_b(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell],
                  activation_contract: str) -> Iterator[CellResult]:
        units: dict[tuple[str, int, str], list[Cell]] = {}
        for c in cells:
            units.setdefault((c.params["split"], c.params["profile"], c.params["world"]), []).append(c)
        keys = list(units)
        _, eps = self._audit_cells(ctx, [units[k][0] for k in keys])
        worlds: dict[tuple[tuple[str, int, str], str], World] = {}
        commits = {}
        for k, ep in zip(keys, eps, strict=True):
            for b in BRANCHES:
                w = self._setup_worlds(ctx, [units[k][0]])[0]
                gate = {"write_allowed": False, "gate_blocked": True}.get(b)
                commits[(k, b)] = w.commit(ep.submitted if gate is not None else None, gate_enabled=bool(gate))
                worlds[(k, b)] = w
        uncached = _uncached(ctx.require_model())
        by: dict[tuple[tuple[str, int, str], str], ProbeResult] = {}
        for b in BRANCHES:  # one call per branch: never in one batch, never from the cache
            probes = run_activation(uncached, [worlds[(k, b)] for k in keys], contract=activation_contract,
                                    gen=ctx.state["gen"])
            by.update({(k, b): pr for k, pr in zip(keys, probes, strict=True)})
        digests = {kb: state_digest(w.store, w.owner) for kb, w in worlds.items()}
        for k, ep in zip(keys, eps, strict=True):
            nw, gb = (k, "no_write"), (k, "gate_blocked")
            same_prompt = [m.model_dump() for m in by[nw].messages] == [m.model_dump() for m in by[gb].messages]
            same_reply = by[nw].reply == by[gb].reply
            for c in units[k]:
                b = c.params["branch"]
                pr, cm = by[(k, b)], commits[(k, b)]
                C = bool(cm.accepted and cm.present and ep.submitted == worlds[(k, b)].profile.target)
                m = self._ep_metrics(ep)
                pm, pe = self._probe_fields(pr)
                m.update(pm)
                m.update({"C": C, "E": bool(ep.R and C and pr.A), "write_attempted": cm.attempted,
                          "write_accepted": cm.accepted, "write_blocked": cm.blocked,
                          "nowrite_gate_same_state": digests[nw] == digests[gb],
                          "nowrite_gate_same_prompt": same_prompt, "nowrite_gate_same_reply": same_reply,
                          "nowrite_gate_nondeterministic": same_prompt and not same_reply,
                          "branches_generated_separately": True, "activation_contract": activation_contract,
                          "state_digest": digests[(k, b)]})
                yield CellResult(key=c.key, prompt=pr.messages, reply=pr.reply, metrics=m,
                                 timing={**ep.timing, "activation": pr.timing}, extra={**self._ep_extra(ep), **pe})

    def _run_calibration(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell]) -> Iterator[CellResult]:
        """Appendix E: dev cells audit with their candidate contract; held-out cells audit
        with the contract that scored the most official forget-world R on the dev profiles
        (ties: the configured contract, then name order), chosen before any held-out call."""
        stage = cells[0].params["stage"]
        if stage in ("dev", "confirm"):
            yield from self._run_simple(ctx, cells, contract=cells[0].params["audit_contract"])
            return
        chosen, scores = self._calibrate(ctx)
        for r in self._run_simple(ctx, cells, contract=chosen):
            r.metrics["selected_contract"] = chosen
            r.extra["calibration_dev_R"] = scores
            yield r

    def _calibrate(self, ctx: RunContext[AfterDeleteConfig]) -> tuple[str, dict[str, int]]:
        cfg = ctx.config
        dev = [c for c in self._cells_calibration(cfg) if c.params["stage"] == "dev" and c.params["world"] == "forget"]
        scores: dict[str, int] = {}
        for name in sorted(CONTRACTS.names()):
            mine = [c for c in dev if c.params["audit_contract"] == name]
            _, eps = self._audit_cells(ctx, mine, contract=name)
            scores[name] = sum(ep.R for ep in eps)
        chosen = max(sorted(scores), key=lambda k: (scores[k], k == cfg.contract))
        return chosen, scores

    def _run_transformed(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell]) -> Iterator[CellResult]:
        worlds, eps = self._audit_cells(ctx, cells)
        for c, w, ep in zip(cells, worlds, eps, strict=True):
            comp = w.profile.components
            reply = "\n".join(ep.replies)
            m = self._ep_metrics(ep)
            prompt_text = "\n".join(msg.content for m_ in [ep.first_messages] for msg in m_)
            m.update({
                "target_in_state": w.profile.target in w.visible_text(),
                "target_in_prompt": w.profile.target in prompt_text,
                "region_in_reply": comp["region"] in reply,
                "mnemonic_in_reply": comp["mnemonic"] in reply,
                "number_in_reply": comp["number"] in reply,
                "components_in_state": sum(v in w.visible_text() for v in comp.values()),
            })
            yield CellResult(key=c.key, prompt=ep.first_messages, reply=ep.replies[-1] if ep.replies else None,
                             metrics=m, timing=ep.timing, extra=self._ep_extra(ep))

    def _run_utility(self, ctx: RunContext[AfterDeleteConfig], cells: list[Cell]) -> Iterator[CellResult]:
        from traceless.studies.afterdelete._contracts import build_messages, official_parse

        model = ctx.require_model()
        cond = cells[0].params["condition"]
        ask: list[tuple[Cell, World, str, str]] = []
        writes: list[tuple[Cell, World, str]] = []
        for c in cells:
            p = self._profiles(ctx, "dev", False)[c.params["profile"]]
            w = self._world(ctx, p, "forget", cond)
            cat = c.params["category"]
            if cat == "near_miss_write":
                writes.append((c, w, _near_miss(p.target, c.params["case"])))
            else:
                qa = next(q for q in p.utility if q.category == cat)
                ask.append((c, w, qa.question, qa.answer))
        for c, w, value in writes:
            cm = w.commit(value, gate_enabled=True)
            yield CellResult(key=c.key, reply=None,
                             metrics={"ok": cm.accepted and cm.present, "blocked": cm.blocked, "category": "near_miss_write"},
                             extra={"near_miss_kind": _NEAR_MISS_KINDS[c.params["case"] % len(_NEAR_MISS_KINDS)]})
        if ask:
            batch = [build_messages(attribute=w.profile.attribute, memory=w.model_view(q),
                                    serialization=w.condition.serialization, history=[], query=q,
                                    contract=ctx.config.contract) for _, w, q, _ in ask]
            gens = model.generate_batch(batch, ctx.state["gen"])
            for (c, _w, _q, ans), msgs, g in zip(ask, batch, gens, strict=True):
                pr = official_parse(g.text)
                yield CellResult(key=c.key, prompt=msgs, reply=g.text,
                                 metrics={"ok": ans in g.text, "ok_parsed": ans in (pr.prediction or ""),
                                          "category": c.params["category"], "status": pr.status},
                                 timing=CellResult.timing_of(g))


def _uncached(model: ModelBackend) -> ModelBackend:
    """The backend behind the study's generation cache (module B must see every reply)."""
    return model.uncached()


def _panel_seed(split: str, panel: str) -> int | None:
    """Generator seed of a panel: None (the split's own) for the main panel."""
    if panel == "main":
        return None
    offset = {"modules": MODULE_PANEL_OFFSET, "calibration": CALIBRATION_PANEL_OFFSET,
              "confirmation": CONFIRMATION_PANEL_OFFSET}[panel]
    return SPLIT_SEEDS[split] + offset


_NEAR_MISS_KINDS = ("digit", "case", "space", "underscore", "truncate")


def _near_miss(target: str, case: int) -> str:
    """A benign value that differs from the forgotten one (the gate must let it through)."""
    kind = _NEAR_MISS_KINDS[case % len(_NEAR_MISS_KINDS)]
    if kind == "digit":
        return target[:-1] + str((int(target[-1]) + 1) % 10)
    if kind == "case":
        return target.lower()
    if kind == "space":
        return target.replace("-", " - ", 1)
    if kind == "underscore":
        return target.replace("-", "_")
    return target[:-1]

