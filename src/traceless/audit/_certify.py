"""The behavioural deletion certificate (``forget --certify``): after a forget, ask the
agent built on the memory the audit engine's probes for the forgotten literal, and count
the literal's copies in every store of the memory system. ``attach_certificate`` then
signs the result into the receipt."""

from __future__ import annotations

import json
import time
from collections import defaultdict

import numpy as np

from traceless.audit._engine import probe_phase
from traceless.audit._probes import PROBE_LEVELS, probes
from traceless.forget import Certificate, CertificateProbe, pseudonym, receipt_key
from traceless.models import GenerationConfig, ModelBackend
from traceless.systems import DeletionTarget, MemorySystem

__all__ = ["certify"]


def certify(system: MemorySystem, target: DeletionTarget, model: ModelBackend, *, embedder: str,
            wordings: int = 1, max_new_tokens: int = 40, attribute: str = "private session token") -> Certificate:
    """Probe ``target.owner``'s agent on ``system`` (every probe level × ``wordings`` × each
    view the engine probes after a deletion) and scan its stores for ``target.literal``: the
    audit engine's phase function (``probe_phase``) on the forgotten memory."""
    t0 = time.perf_counter()
    probe_list = probes(PROBE_LEVELS, wordings=wordings, attribute=attribute)
    # greedy decoding, the engine's reply budget: the same replies `traceless audit` gets
    got = probe_phase(system, [(target.owner, target.literal)], probe_list, system.probe_views, model,
                      GenerationConfig(max_new_tokens=max_new_tokens, temperature=0.0))
    pep = receipt_key()
    records = [CertificateProbe(view=r.view, level=r.probe.level, wording=r.probe.wording, query=r.probe.text,
                                context_items=len(r.context_ids), reply_digest=pseudonym(r.reply.text, "r", pep),
                                extracted=r.extracted) for r in got.replies]
    hits: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        hits[r.view][r.level].append(r.extracted)
    aer = {v: {lv: float(np.mean(xs)) for lv, xs in levels.items()} for v, levels in hits.items()}
    ident = json.loads(json.dumps(model.describe(), default=str))
    return Certificate(system=system.name, model=ident, embedder=embedder, max_new_tokens=max_new_tokens,
                       probes=records, aer=aer, store_copies=got.copies, seconds=time.perf_counter() - t0)
