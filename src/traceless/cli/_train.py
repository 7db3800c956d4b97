"""``traceless study train-auditor``: fit an AfterDeleteBench auditor policy and freeze it."""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["train_auditor_cmd"]


def train_auditor_cmd(
    auditor: str = typer.Argument(..., help="Trainable auditor: greedy_ig, bandit, ppo_a, ppo_b."),
    out: Path = typer.Option(..., "--out", "-o", help="Checkpoint file to write."),
    model: str = typer.Option(None, "--model", "-m", help="Backend spec (default: the study's default model)."),
    n_train: int = typer.Option(24, "--n-train", min=1, help="Training-split profiles (seed 20260828)."),
    seed: int = typer.Option(None, "--seed", help="Training seed (default: 0; 1 for ppo_b)."),
    contract: str = typer.Option("aligned", "--contract", help="Response contract: aligned or legacy."),
) -> None:
    """Collect training-split replies with MODEL, fit AUDITOR on them and save a frozen
    checkpoint that `traceless study run afterdelete` can load (paper 001 §3 auditors)."""
    from traceless.studies.afterdelete import train_auditor_for_model

    path = train_auditor_for_model(auditor, str(out), model=model, n_train=n_train, seed=seed, contract=contract)
    typer.echo(f"checkpoint written to {path}")
