"""Summarise the critic warm-up runs into ``runs.csv`` (one row per run and shift).

Usage: python collect.py FAMILY:SEED_SET=RUNS_FOLDER [FAMILY:SEED_SET=RUNS_FOLDER ...] > runs.csv

Each folder holds ``<experiment>/sao/seed-<k>`` runs made by ``sao-online compare``; FAMILY and
SEED_SET name what they are. The warm-up a run had is read from its own ``config.yaml``, so a
folder run with ``--set algorithm.critic_warmup_steps=0`` lands in the rows of warm-up 0.
The measures are the report's (``sao-online report --oracle-fraction 0.5``), per seed.
"""

from __future__ import annotations

import sys

import pandas as pd

from sao_online.analysis import load_run_configs, load_runs, recovery_metrics

#: The absolute recovery level: half the oracle's reward (the demo's measure).
ORACLE_FRACTION = 0.5


def _warmups(folder: str) -> dict[int, tuple[int, int, str]]:
    """seed -> (critic-only updates, episodes they span, backend), from each run's config."""
    configs = load_run_configs(folder)
    warmups = {}
    for run in configs.itertuples(index=False):
        if run.method != "sao":
            raise ValueError(f"{run.path}: expected sao runs only, found {run.method}")
        config = run.config
        steps = int(config["algorithm"]["critic_warmup_steps"])
        batch = int(config["rollout"]["batch_size"])
        warmups[int(run.seed)] = (steps, steps * batch, str(config["runtime"]["backend"]))
    return warmups


def _check_finished(episodes: pd.DataFrame, folder: str) -> None:
    """A run still going (or cut short) would pass for one censored early: refuse it."""
    budgets = {int(run.seed): run.budget_episodes for run in load_run_configs(folder).itertuples()}
    for seed, count in episodes.groupby("seed").size().items():
        if count < budgets[int(seed)]:
            raise ValueError(f"{folder}: seed {seed} has {count} of {budgets[seed]} episodes")


def run_rows(family: str, seed_set: str, folder: str) -> list[dict]:
    episodes = load_runs(folder)
    _check_finished(episodes, folder)
    evals = load_runs(folder, table="evals")
    in_episodes = recovery_metrics(episodes, evals=evals, oracle_fraction=ORACLE_FRACTION)
    in_seconds = recovery_metrics(episodes, x="seconds", oracle_fraction=ORACLE_FRACTION)
    in_seconds = in_seconds.set_index(["seed", "change_point"])
    warmups = _warmups(folder)
    rows = []
    for shift in in_episodes.sort_values(["seed", "change_point"]).itertuples():
        steps, warmup_episodes, backend = warmups[int(shift.seed)]
        seconds = in_seconds.loc[(shift.seed, shift.change_point)]
        rows.append(
            {
                "family": family,
                "seed_set": seed_set,
                "seed": int(shift.seed),
                "critic_warmup_steps": steps,
                "warmup_episodes": warmup_episodes,
                "backend": backend,
                "shift": int(shift.change_point),
                "shift_episode": int(shift.tau_clock),
                "reward_before": round(float(shift.pre_level), 4),
                "episodes_to_half_oracle": round(float(shift.time_to_oracle_fraction), 1),
                "episodes_censored": bool(shift.oracle_fraction_censored),
                "seconds_to_half_oracle": round(float(seconds.time_to_oracle_fraction), 1),
                "seconds_censored": bool(seconds.oracle_fraction_censored),
                "regret_per_episode": round(float(shift.dynamic_regret_per_episode), 4),
            }
        )
    return rows


if __name__ == "__main__":
    rows = []
    for argument in sys.argv[1:]:
        label, folder = argument.split("=", 1)
        family, seed_set = label.split(":", 1)
        rows += run_rows(family, seed_set, folder)
    pd.DataFrame(rows).to_csv(sys.stdout, index=False)
