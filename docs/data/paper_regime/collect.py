"""Summarise the paper-regime runs into ``runs.csv``, ``shifts.csv`` and ``curves.csv``.

Usage: python collect.py SEED_SET=FOLDER [SEED_SET=FOLDER ...]

Each FOLDER holds the runs ``sao-online compare`` made of a paper-regime config
(``<experiment>/<method>/seed-<k>``) and ``source.json``, the provenance of the code that ran
them (``produce.sh`` writes it; a folder without it is refused). ``runs.csv`` gets one row per
run: what the runtime did (``sao-online sim compare``'s profile: staleness, DIS masking, the
learner's busy share, virtual and real seconds); ``shifts.csv`` one row per run and shift: the
report's recovery measures on the episodes axis and on the virtual-seconds axis (``sao-online
report --oracle-fraction 0.5``); ``curves.csv`` each run's training reward in bins of 128
episodes, with each bin's mean episode and virtual second. The files are written beside this
script with ``provenance.json`` (each folder's source and this script's own); a run that did not
finish is refused. Seed sets collected earlier and not named again keep their rows and their
source, so sets run at different times (from different commits) are collected one by one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from sao_online.analysis import load_run_configs, load_runs, recovery_metrics
from sao_online.analysis.loading import read_table
from sao_online.commands.sim import runtime_profile
from sao_online.rundir.provenance import provenance

HERE = Path(__file__).resolve().parent
#: The absolute recovery level: half the oracle's reward (the demo's measure).
ORACLE_FRACTION = 0.5
#: Episodes per point of the kept curves: four updates of the quarter-scale config.
CURVE_BIN = 128
FILES = ("runs.csv", "shifts.csv", "curves.csv")


def run_rows(seed_set: str, folder: str) -> list[dict]:
    rows = []
    for run in load_run_configs(folder).itertuples(index=False):
        path = Path(run.path)
        episodes = read_table(path, "episodes")
        trained = episodes[~episodes["dropped"].astype(bool)]
        if len(trained) < run.budget_episodes:
            raise ValueError(f"{path}: {len(trained)} of {run.budget_episodes} episodes trained")
        updates = read_table(path, "updates")
        profile = runtime_profile(path)
        shares = profile["staleness_shares"]
        bound = int(run.config["runtime"]["max_staleness"])
        tokens = updates["charts/action_tokens"]
        masked = {
            side: float((updates[f"charts/masked_{side}_fraction"].fillna(0) * tokens).sum())
            / float(tokens.sum())
            if f"charts/masked_{side}_fraction" in updates
            else 0.0
            for side in ("below", "above")
        }
        rows.append(
            {
                "seed_set": seed_set,
                "experiment": run.experiment,
                "method": run.method,
                "seed": int(run.seed),
                "episodes": len(trained),
                "dropped": int(episodes["dropped"].astype(bool).sum()),
                "updates": int(updates["version"].max()),
                "staleness_mean": round(profile["staleness_mean"], 4),
                "share_at_bound": round(shares.get(bound, 0.0), 4),
                "share_fresh": round(shares.get(0, 0.0), 4),
                "masked_below": round(masked["below"], 5),
                "masked_above": round(masked["above"], 5),
                "learner_busy_share": round(profile["learner_busy_share"], 4),
                "publish_share": round(profile["publish_share"] or 0.0, 4),
                "learner_wait_episodes_share": round(
                    profile["learner_wait_shares"].get("episodes", 0.0), 4
                ),
                "learner_wait_bound_share": round(
                    profile["learner_wait_shares"].get("bound", 0.0), 4
                ),
                "virtual_seconds": round(float(updates["wall_time"].max()), 2),
                "real_seconds": round(float(updates["sim/real_seconds"].max()), 1),
            }
        )
    return rows


def curve_rows(seed_set: str, folder: str) -> list[dict]:
    """Each run's training reward in bins of ``CURVE_BIN`` consecutive episodes (in the order the
    schedule issued them), with the bin's mean episode and mean virtual second of completion."""
    episodes = load_runs(folder)
    episodes = episodes[~episodes["dropped"].astype(bool)]
    rows = []
    for (method, seed), run in episodes.groupby(["method", "seed"]):
        run = run.sort_values("world_time").reset_index(drop=True)
        for _, chunk in run.groupby(run.index // CURVE_BIN):
            rows.append(
                {
                    "seed_set": seed_set,
                    "experiment": str(chunk["experiment"].iloc[0]),
                    "method": method,
                    "seed": int(seed),
                    "episode": round(float(chunk["world_time"].mean()), 1),
                    "second": round(float(chunk["wall_time"].mean()), 2),
                    "reward": round(float(chunk["reward"].mean()), 4),
                }
            )
    return rows


def shift_rows(seed_set: str, folder: str) -> list[dict]:
    episodes = load_runs(folder)
    axes = {
        axis: recovery_metrics(episodes, x=x, oracle_fraction=ORACLE_FRACTION).set_index(
            ["method", "seed", "change_point"]
        )
        for axis, x in (("episodes", "world_time"), ("seconds", "seconds"))
    }
    rows = []
    for key, shift in axes["episodes"].sort_index().iterrows():
        in_seconds = axes["seconds"].loc[key]
        method, seed, change_point = key
        rows.append(
            {
                "seed_set": seed_set,
                "method": method,
                "seed": int(seed),
                "shift": int(change_point),
                "shift_episode": int(shift["tau_clock"]),
                "shift_second": round(float(in_seconds["tau"]), 2),
                "reward_before": round(float(shift["pre_level"]), 4),
                "episodes_to_half_oracle": round(float(shift["time_to_oracle_fraction"]), 1),
                "episodes_censored": bool(shift["oracle_fraction_censored"]),
                "seconds_to_half_oracle": round(float(in_seconds["time_to_oracle_fraction"]), 2),
                "seconds_censored": bool(in_seconds["oracle_fraction_censored"]),
                "regret_per_episode": round(float(shift["dynamic_regret_per_episode"]), 4),
            }
        )
    return rows


def source(folder: str) -> dict:
    path = Path(folder) / "source.json"
    if not path.is_file():
        raise SystemExit(f"collect.py: {path} is missing: which code ran these runs?")
    record = json.loads(path.read_text())
    if record.get("dirty") is not False:
        raise SystemExit(f"collect.py: {path}: the runs did not come from a committed tree")
    return record


def _kept(name: str, named: set[str]) -> list[dict]:
    """The rows of ``name`` already beside this script, less those of the seed sets in ``named``."""
    path = HERE / name
    if not path.is_file():
        return []
    frame = pd.read_csv(path)
    return frame[~frame["seed_set"].astype(str).isin(named)].to_dict("records")


if __name__ == "__main__":
    arguments = dict(argument.split("=", 1) for argument in sys.argv[1:])
    if not arguments:
        raise SystemExit(__doc__)
    named = set(arguments)
    previous = HERE / "provenance.json"
    earlier = json.loads(previous.read_text()) if previous.is_file() else {}
    sources = {k: v for k, v in earlier.get("sources", {}).items() if k not in named}
    commands = [c for c in earlier.get("commands", []) if "collect.py" in c]
    runs, shifts, curves = (_kept(name, named) for name in FILES)
    for seed_set, folder in arguments.items():
        sources[seed_set] = source(folder)
        runs += run_rows(seed_set, folder)
        shifts += shift_rows(seed_set, folder)
        curves += curve_rows(seed_set, folder)
    for name, rows in zip(FILES, (runs, shifts, curves)):
        pd.DataFrame(rows).to_csv(HERE / name, index=False)
    record = {
        "what": "StyleShift on the simulated backend with the gpu-fleet cost model, max "
        "staleness 4, env latency mean 2 s sigma 1, one rollout per prompt, weights published "
        "after every update: configs/paper_regime_quarter.yaml as written (2 workers x 32 slots, "
        "batch 32, 3,072 episodes) for sao, sao_running_mean, grpo_dis and grpo on seeds 0-2 "
        "(set-1) and 3-5 (set-2); configs/paper_regime.yaml as written (4 workers x 64 slots, "
        "batch 128, 12,288 episodes), where collected, as the seed set named full",
        "commands": [
            "docs/data/paper_regime/produce.sh OUT",
            *commands,
            "python docs/data/paper_regime/collect.py " + " ".join(sys.argv[1:]),
            "python docs/data/paper_regime/table.py",
        ],
        "load": "the runs shared the machine with other work: a simulated run's results do not "
        "depend on it (only its real seconds do)",
        "sources": dict(sorted(sources.items())),
        "provenance": provenance(),
    }
    previous.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {', '.join(FILES)} ({len(runs)} runs) and provenance.json in {HERE}")
