"""Summarise the runs of the tiny-model preset measurement into ``runs.csv`` (one row per run).

Usage: python collect.py SETTING=RUNS_FOLDER [SETTING=RUNS_FOLDER ...] > runs.csv

Each folder holds ``<experiment>/<method>/seed-<k>`` runs of the template task
(``sao-online init task my_task``); SETTING names what they were run with.
"""

from __future__ import annotations

import sys

import pandas as pd

from sao_online.analysis import load_runs, recovery_metrics
from sao_online.util.defaults import DEFAULT_ORACLE_FRACTION

#: The share of a phase (its last episodes) that says where the phase ended up.
END_SHARE = 0.25


def run_rows(setting: str, folder: str) -> list[dict]:
    episodes = load_runs(folder)
    shifts = recovery_metrics(episodes, oracle_fraction=DEFAULT_ORACLE_FRACTION)
    rows = []
    for (method, seed), run in episodes.groupby(["method", "seed"]):
        run = run.sort_values("world_time")
        after = run[run["phase"] == 1]
        end = after.tail(int(len(after) * END_SHARE))
        [shift] = shifts[(shifts["method"] == method) & (shifts["seed"] == seed)].itertuples()
        rows.append(
            {
                "setting": setting,
                "method": method,
                "seed": int(seed),
                "phase0_end_reward": round(
                    run[run["phase"] == 0].tail(len(end))["reward"].mean(), 4
                ),
                "phase1_end_reward": round(end["reward"].mean(), 4),
                # answers that name no colour at all ("ed", "lue", cut by a cap): collapse
                "phase1_end_no_colour_share": round(
                    (~end["behavior"].isin(["red", "green", "blue"])).mean(), 4
                ),
                "episodes_to_half_oracle": float(shift.time_to_oracle_fraction),
                "reached_half_oracle": not bool(shift.oracle_fraction_censored),
            }
        )
    return rows


if __name__ == "__main__":
    rows = []
    for argument in sys.argv[1:]:
        setting, folder = argument.split("=", 1)
        rows += run_rows(setting, folder)
    pd.DataFrame(rows).to_csv(sys.stdout, index=False)
