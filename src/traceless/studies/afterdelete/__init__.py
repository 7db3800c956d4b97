"""AfterDeleteBench (paper 001): paired post-deletion audits of persistent-memory agents.

The study package holds everything the paper defines: the frozen profile generator
(4 domains × 4 structures, IID and generator-held-out OOD splits), paired clean/forget
worlds over ``traceless.memory`` + ``traceless.forget``, memory conditions, the response
contracts and official parser, the auditors (seven templates, budget ten), the learned
auditors' training and frozen checkpoints, the R/C/A/E lifecycle, the transformed-memory
module C0–C3 and the paired-bootstrap statistics. Contracts and auditors live here (not
in ``traceless.audit``) because they are defined by this paper's protocol; the audit
layer's canary/probe machinery is paper 000's.

Run it with ``traceless study run afterdelete`` and read it with ``traceless report DIR``.
"""

from traceless.studies.afterdelete._auditors import (
    AUDITORS,
    BUDGET,
    SUBMIT,
    TEMPLATES,
    Auditor,
    AuditView,
    Decision,
    code_like,
    make_auditor,
)
from traceless.studies.afterdelete._contracts import (
    CONTRACTS,
    PREAMBLE,
    PROMPT_KEYS,
    AuditTurn,
    Contract,
    Parsed,
    build_messages,
    official_parse,
    private_prompt,
    target_anywhere,
)
from traceless.studies.afterdelete._episodes import (
    ACTIVATION_WORDINGS,
    EpisodeResult,
    ProbeResult,
    run_activation,
    run_audits,
)
from traceless.studies.afterdelete._profiles import (
    DOMAINS,
    SPLIT_SEEDS,
    STRUCTURES,
    Profile,
    generate_profiles,
)
from traceless.studies.afterdelete._stats import (
    BOOTSTRAP_SEED,
    RESAMPLES,
    Interval,
    PairedGap,
    clopper_pearson,
    paired_gap,
)
from traceless.studies.afterdelete._study import BLOCKS, AfterDelete, AfterDeleteConfig
from traceless.studies.afterdelete._training import (
    TRAINABLE,
    ReplyTable,
    TrainConfig,
    auditor_from_checkpoint,
    collect_reply_table,
    load_checkpoint,
    train_auditor,
)
from traceless.studies.afterdelete._worlds import (
    CONDITIONS,
    WORLDS,
    MemoryCondition,
    World,
    build_world,
    state_digest,
)

__all__ = [
    "ACTIVATION_WORDINGS",
    "AUDITORS",
    "AfterDelete",
    "AfterDeleteConfig",
    "AuditTurn",
    "AuditView",
    "Auditor",
    "BLOCKS",
    "BOOTSTRAP_SEED",
    "RESAMPLES",
    "BUDGET",
    "CONDITIONS",
    "CONTRACTS",
    "Contract",
    "DOMAINS",
    "Decision",
    "EpisodeResult",
    "Interval",
    "MemoryCondition",
    "PREAMBLE",
    "PROMPT_KEYS",
    "PairedGap",
    "Parsed",
    "ProbeResult",
    "Profile",
    "ReplyTable",
    "SPLIT_SEEDS",
    "STRUCTURES",
    "SUBMIT",
    "TEMPLATES",
    "TRAINABLE",
    "TrainConfig",
    "WORLDS",
    "World",
    "auditor_from_checkpoint",
    "build_messages",
    "build_world",
    "clopper_pearson",
    "code_like",
    "collect_reply_table",
    "generate_profiles",
    "load_checkpoint",
    "make_auditor",
    "official_parse",
    "paired_gap",
    "private_prompt",
    "run_activation",
    "run_audits",
    "state_digest",
    "target_anywhere",
    "train_auditor",
    "train_auditor_for_model",
]


def train_auditor_for_model(
    auditor: str, out: str, *, model: str | None = None, n_train: int = 24, seed: int | None = None,
    contract: str = "aligned", max_new_tokens: int = 96,
) -> str:
    """What ``traceless study train-auditor afterdelete`` runs: collect the training-split
    reply table with ``model`` (default: the study's default model), fit ``auditor``
    (greedy_ig, bandit, ppo_a, ppo_b, ppo) and write its frozen checkpoint to ``out``."""
    from traceless.errors import ConfigError
    from traceless.models import load_backend

    kind = "ppo" if auditor.startswith("ppo") else auditor
    if kind not in TRAINABLE:
        raise ConfigError(f"auditor {auditor!r} is not trainable; trainable auditors: greedy_ig, bandit, ppo_a, ppo_b")
    backend = load_backend(model or AfterDelete.default_model)
    try:
        table = collect_reply_table(backend, generate_profiles("train", n_train), CONDITIONS.get("hier_exact"),
                                    contract=contract, max_new_tokens=max_new_tokens)
    finally:
        backend.close()
    s = seed if seed is not None else (1 if auditor == "ppo_b" else 0)
    return str(train_auditor(kind, table, out, TrainConfig(seed=s), label=auditor))
