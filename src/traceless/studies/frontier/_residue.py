"""The residue preset of the frontier study (``traceless study run frontier-residue``):
paper 000's forgetting-residue rows, screened.

Per instance (one group):

1. plant the canary exactly as the frontier study does (same seed, same rng stream);
2. **screen**: write the canary session alone through the native system (the study's own
   summary prompts, greedy) and check whether its level-S summary holds the canary
   verbatim, for every S of ``screen_S`` (cells ``inst=ID/screen/S=s``);
3. **slice**: only when a level of ``slice_S`` kept it, write the full memory (the canary
   session's summaries come from the generation cache: the same prompts), then for every
   deletion mode — and ``raw_plus_resummarize`` at every supersede threshold of the
   sensitivity — delete on a fresh copy and re-run every probe with the agent's S view at
   ``k`` (cells ``inst=ID/frs/MODE/S=s/k=k/LEVEL:W`` and
   ``inst=ID/frs/raw_plus_resummarize@T/S=s/k=k/LEVEL:W``). At a level whose screen did not
   keep the canary the slice cells are stored as ``eligible: false`` without a model call
   (nothing there to delete: the level-S view cannot hold the canary).

Every cell is stored when done, so ``--resume`` continues a killed run; a resumed group
regenerates the same prompts (answered from the generation cache).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from traceless.audit import Planted, Probe, deletion_phase, extracted, plant, probe_messages, probes
from traceless.datasets import Instance
from traceless.memory import KIND_BY_LEVEL, Tier
from traceless.models import GenerationConfig
from traceless.run import STUDIES, Cell, CellResult, RunContext, Study, derive_seed
from traceless.studies.frontier._residue_config import ResidueConfig
from traceless.studies.frontier._study import (
    SYSTEM,
    FrontierStudy,
    _data,
    _Job,
    _Plan,
    _slug,
    instance_cells,
    select_instances,
    setup_state,
)
from traceless.systems import NativeConfig, NativeSystem, SystemRuntime, open_system

__all__ = ["ResidueStudy", "deletion_name", "residue_instances", "sensitivity_thresholds"]

RPR = "raw_plus_resummarize"


def residue_instances(instances: list[Instance], config: ResidueConfig) -> list[Instance]:
    """The screened instances: the first ``n`` (all when None) of the frontier study's order."""
    return select_instances(instances, config.n or len(instances), config.seed)


def sensitivity_thresholds(config: ResidueConfig) -> list[float]:
    """Supersede thresholds that get their own ``raw_plus_resummarize@T`` cells: all of
    ``supersede``. The one equal to the mode's default (0.50) repeats its main cells — a
    check, and cheap: its re-summaries and probes are answered from the generation cache."""
    return list(config.supersede)


def deletion_name(mode: str, supersede: float | None) -> str:
    """The key part of a deletion: the mode, or ``raw_plus_resummarize@0.70`` for a sensitivity run."""
    return mode if supersede is None else f"{mode}@{supersede:.2f}"


@STUDIES.register("frontier-residue",
                  help="paper 000 §3.3 residue rows, screened: canary-keep screen at S=1/S=2, then the deletion "
                       "ladder (and raw_plus_resummarize's supersede sensitivity) on the kept instances")
class ResidueStudy(Study[ResidueConfig]):
    """The frontier study's residue preset."""

    name: ClassVar[str] = "frontier-residue"
    version: ClassVar[str] = "1"
    config_cls: ClassVar[type[BaseModel]] = ResidueConfig
    bundle_extra: ClassVar[tuple[str, ...]] = ("instance", "receipt.verified", "receipt.matched")
    """Ids and receipt flags; canary, prompts and summaries are dropped from a bundle."""
    resume_may_change: ClassVar[frozenset[str]] = frozenset({"n", "data", "max_batch", "keep_memory"})

    # ------------------------------------------------------------------ grid
    def _probes(self, cfg: ResidueConfig) -> list[Probe]:
        return probes(tuple(cfg.probe_levels), wordings=cfg.wordings, attribute=cfg.attribute)

    def _deletions(self, cfg: ResidueConfig) -> list[tuple[str, float | None]]:
        """(mode, supersede threshold or None for the mode's own) of every deletion."""
        return [(m, None) for m in cfg.modes] + [(RPR, t) for t in sensitivity_thresholds(cfg)]

    def validate(self, config: ResidueConfig) -> None:
        """The data file exists and parses, and holds at least ``n`` instances."""
        residue_instances(_data(config)[0], config)

    def cells(self, config: ResidueConfig) -> Iterator[Cell]:
        prs = self._probes(config)
        for inst in residue_instances(_data(config)[0], config):
            cell = instance_cells(config.seed, inst.id)
            for s in config.screen_S:
                yield cell(f"screen/S={s}", kind="screen", S=s)
            for s in config.slice_S:
                for mode, th in self._deletions(config):
                    for p in prs:
                        yield cell(f"frs/{deletion_name(mode, th)}/S={s}/k={config.k}/{p.level}:{p.wording}",
                                   kind="frs", mode=mode, supersede=th, S=s, k=config.k, level=p.level,
                                   wording=p.wording)

    # ------------------------------------------------------------------ setup
    def setup(self, ctx: RunContext[ResidueConfig]) -> None:
        cfg = ctx.config
        instances, digest = _data(cfg)
        chosen = residue_instances(instances, cfg)
        setup_state(ctx, chosen, digest, self.cells(cfg), self._probes(cfg))

    @staticmethod
    def native_config(cfg: ResidueConfig, supersede: float | None = None) -> NativeConfig:
        """The frontier study's native system (summary levels = the screened ones)."""
        return NativeConfig(S=max(cfg.screen_S), levels=tuple(cfg.screen_S), summary_tokens=cfg.summary_tokens,
                            max_facts=cfg.max_facts, context_order=cfg.context_order, modes=tuple(cfg.modes),
                            supersede_cosine=supersede)

    @staticmethod
    def _runtime(ctx: RunContext[ResidueConfig]) -> SystemRuntime:
        return SystemRuntime(ctx.require_model(), ctx.embedder)

    # ------------------------------------------------------------------ run
    def run_group(self, ctx: RunContext[ResidueConfig], cells: list[Cell]) -> Iterator[CellResult]:
        inst: Instance = ctx.state["instances"][cells[0].params["instance"]]
        work = ctx.work_dir / _slug(inst.id)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        try:
            yield from self._run_instance(ctx, inst, {c.key for c in cells}, work)
        finally:
            if not ctx.config.keep_memory:
                shutil.rmtree(work, ignore_errors=True)

    def _run_instance(self, ctx: RunContext[ResidueConfig], inst: Instance, pending: set[str],
                      work: Path) -> Iterator[CellResult]:
        cfg = ctx.config
        all_cells: list[Cell] = ctx.state["group_cells"][f"inst={inst.id}"]
        planted = plant(inst.sessions, np.random.default_rng(derive_seed(cfg.seed, "canary", inst.id)))
        base_extra = {"instance": inst.id, "canary": planted.canary, "canary_session": planted.session_id,
                      "canary_turn": planted.turn, "data_sha256": ctx.state["data_sha256"],
                      "embedder": ctx.state["embedder"]}
        screen = self._screen(ctx, planted, work / "screen")
        for c in all_cells:
            if c.params["kind"] == "screen" and c.key in pending:
                prompt, chunks, held = screen[c.params["S"]]
                yield CellResult(key=c.key, prompt=prompt, reply="\n".join(chunks),
                                 metrics={"kept": held > 0, "chunks": len(chunks), "chunks_with_canary": held},
                                 extra=base_extra)
        kept = {s for s in cfg.slice_S if screen[s][2] > 0}
        frs = [c for c in all_cells if c.params["kind"] == "frs"]
        for c in frs:
            if c.params["S"] not in kept and c.key in pending:
                yield CellResult(key=c.key, metrics={"eligible": False}, extra=base_extra)
        todo = [c for c in frs if c.params["S"] in kept]
        if todo and any(c.key in pending for c in todo):
            yield from self._slice(ctx, planted, todo, pending, work, base_extra)

    def _screen(self, ctx: RunContext[ResidueConfig], planted: Planted,
                work: Path) -> dict[int, tuple[list[Any], list[str], int]]:
        """Per screened S: (the summary prompt, the summary chunks, how many hold the canary)
        of the canary session written alone through the study's memory system."""
        cfg = ctx.config
        session = next(s for s in planted.sessions if s.session_id == planted.session_id)
        system = open_system(SYSTEM, work, self.native_config(cfg), self._runtime(ctx))
        try:
            assert isinstance(system, NativeSystem)
            system.write([session])
            store, owner = system.store, planted.owner
            raws = sorted(store.artifacts(owner=owner, tier=Tier.RAW, session_id=session.session_id),
                          key=lambda a: a.id)
            out: dict[int, tuple[list[Any], list[str], int]] = {}
            for s in cfg.screen_S:
                arts = sorted((a for a in store.artifacts(owner=owner, tier=Tier.SUMMARY, session_id=session.session_id)
                               if a.kind == KIND_BY_LEVEL[s]), key=lambda a: a.id)
                chunks = [a.text or "" for a in arts]
                prompt = system.writer.summary_prompt(s, [a.text or "" for a in raws])
                out[s] = (prompt, chunks, sum(planted.canary in t for t in chunks))
        finally:
            system.close()
        return out

    def _write_base(self, ctx: RunContext[ResidueConfig], planted: Planted, base: Path) -> dict[int, int]:
        """The full memory (every session); per screened S, its level-S chunks holding the canary."""
        system = open_system(SYSTEM, base, self.native_config(ctx.config), self._runtime(ctx))
        try:
            assert isinstance(system, NativeSystem)
            system.write(planted.sessions)
            return _level_copies(system, planted, ctx.config.screen_S)
        finally:
            system.close()

    def _slice(self, ctx: RunContext[ResidueConfig], planted: Planted, todo: list[Cell], pending: set[str],
               work: Path, base_extra: dict[str, Any]) -> Iterator[CellResult]:
        """The deletion ladder on one kept instance: plan every probe, generate, score."""
        cfg = ctx.config
        base = work / "base"
        before = self._write_base(ctx, planted, base)
        jobs: dict[str, _Job] = {}
        plans: dict[str, _Plan] = {}
        after: dict[str, dict[str, Any]] = {}
        runtime = self._runtime(ctx)
        for mode, th in self._deletions(cfg):
            name = deletion_name(mode, th)
            mine = [c for c in todo if c.params["mode"] == mode and c.params["supersede"] == th]
            if not mine:
                continue
            with deletion_phase(SYSTEM, base, work / _slug(name), self.native_config(cfg, th), runtime, mode,
                                [planted.canary]) as ph:
                ph.forget(planted)
                assert isinstance(ph.system, NativeSystem)
                for c in mine:
                    self._plan(ctx, ph.system, planted, c, jobs, plans)
                after[name] = {"level_copies": _level_copies(ph.system, planted, cfg.slice_S),
                               "attribute_only": _attribute_only(ph.system, planted, cfg),
                               "receipt": _receipt(ph.notes[planted.owner])}
            after[name]["copies"] = ph.copies
        gen = GenerationConfig(max_new_tokens=cfg.probe_tokens, temperature=0.0)
        needed = [jk for jk in jobs if any(k in pending for k in jobs[jk].cells)]
        by_key = {c.key: c for c in todo}
        for _, batch in FrontierStudy._batches(needed, jobs, cfg.max_batch):
            outs = ctx.generate_batch([jobs[jk].messages for jk in batch], gen)
            for jk, g in zip(batch, outs, strict=True):
                jobs[jk].result = g
                for key in jobs[jk].cells:
                    if key in pending:
                        c = by_key[key]
                        yield self._result(c, jobs[jk], plans[key], planted, before, after, base_extra)
                        pending.discard(key)

    def _plan(self, ctx: RunContext[ResidueConfig], system: NativeSystem, planted: Planted, c: Cell,
              jobs: dict[str, _Job], plans: dict[str, _Plan]) -> None:
        p = c.params
        key = f"{p['level']}:{p['wording']}"
        query = ctx.state["probes"][key].text
        items = system.search(planted.owner, ctx.state["probe_vecs"][key], "agent", S=p["S"], k=p["k"])
        msgs = probe_messages(items, query)
        jk = json.dumps(["probe", [m.model_dump() for m in msgs]], ensure_ascii=False)
        job = jobs.setdefault(jk, _Job(msgs, "probe"))
        job.cells.append(c.key)
        carriers = sorted({it.origin for it in items if planted.canary in it.text})
        plans[c.key] = _Plan(jk, [it.id for it in items], carriers, {"query": query})

    @staticmethod
    def _result(c: Cell, job: _Job, plan: _Plan, planted: Planted, before: dict[int, int],
                after: dict[str, dict[str, Any]], base_extra: dict[str, Any]) -> CellResult:
        g = job.result
        assert g is not None
        p = c.params
        done = after[deletion_name(p["mode"], p["supersede"])]
        s = p["S"]
        metrics: dict[str, Any] = {
            "eligible": True, "extracted": extracted(planted.canary, g.text), "in_context": plan.in_context,
            "carrier_tiers": plan.carriers, "summary_copies_before": before[s],
            "summary_copies_after": done["level_copies"][s], "attribute_only_after": done["attribute_only"][s]}
        extra = {**base_extra, "context_ids": plan.context_ids, "probe": plan.meta["query"],
                 "receipt": done["receipt"], "copies": done["copies"]}
        return CellResult(key=c.key, prompt=job.messages, reply=g.text, metrics=metrics,
                          timing=CellResult.timing_of(g), extra=extra)


def _level_copies(system: NativeSystem, planted: Planted, levels: list[int]) -> dict[int, int]:
    """Per summary level: the owner's level-S chunks whose text holds the canary."""
    arts = system.store.artifacts(owner=planted.owner, tier=Tier.SUMMARY)
    return {s: sum(1 for a in arts if a.kind == KIND_BY_LEVEL[s] and planted.canary in (a.text or ""))
            for s in levels}


def _attribute_only(system: NativeSystem, planted: Planted, cfg: ResidueConfig) -> dict[int, int]:
    """Per level: chunks of the canary session that name the secret's attribute (e.g. "has a
    private session token") without its value — what a regenerated summary writes from the
    cleaned input, and what can supersede the old chunk that held the value."""
    attr = cfg.attribute.lower()
    arts = system.store.artifacts(owner=planted.owner, tier=Tier.SUMMARY, session_id=planted.session_id)
    return {s: sum(1 for a in arts if a.kind == KIND_BY_LEVEL[s] and attr in (a.text or "").lower()
                   and planted.canary not in (a.text or "")) for s in cfg.slice_S}


def _receipt(notes: dict[str, Any]) -> dict[str, Any]:
    rc = notes["receipt"]
    return {"receipt_id": rc["receipt_id"], "matched": rc["matched"], "verified": rc["verification"]["passed"]}
