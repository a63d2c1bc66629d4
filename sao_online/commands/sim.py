"""``sao-online sim``: the simulated runtime's cost model, fitted to real runs and checked.

- ``sim fit RUN_DIR... [--out FILE]``: fit ``runtime.sim`` to the timings that runs of the
  ``local`` or ``ray`` backend logged (``sao_online.runtime.simulation.fit``) and print the YAML
  block a config uses to run on it; ``--out`` writes the first run's own config instead, on the
  simulated backend with the fitted cost model, ready for ``sao-online run``;
- ``sim compare RUN_DIR...``: what the runtime did in each run, side by side (JSON): the
  staleness of the trained episodes, how busy the learner was, how many tokens DIS masked,
  episodes per second, the learner's waits. Run it on a real run and on the simulated run of
  the same config with the fitted cost model to see where the simulation differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml


def add_sim_parser(commands: argparse._SubParsersAction) -> None:
    sim = commands.add_parser("sim", help="the simulated runtime's cost model: fit it, check it")
    sim_commands = sim.add_subparsers(dest="sim_command", required=True, metavar="SUBCOMMAND")
    fit = sim_commands.add_parser(
        "fit", help="fit runtime.sim to the timings of local or ray runs (prints YAML)"
    )
    fit.add_argument("runs", nargs="+", help="run directories of the local or ray backend")
    fit.add_argument(
        "--out",
        default=None,
        help="write the first run's config on the simulated backend with the fitted cost model "
        "to this file (a config sao-online run takes)",
    )
    fit.set_defaults(func=_fit_command)
    compare = sim_commands.add_parser(
        "compare", help="staleness, learner busy share, DIS masking, speed of runs (JSON)"
    )
    compare.add_argument("runs", nargs="+", help="run directories")
    compare.set_defaults(func=_compare_command)


def read_timings(paths: list[Path]) -> tuple[Any, Any, Any]:
    """(decoding rounds, updates with ``critic_updates``, episodes) of runs, pooled.

    Raises:
        ValueError: a folder is not a run of the local or ray backend, or lacks a timing.
    """
    import pandas as pd

    from sao_online.analysis.loading import read_table
    from sao_online.rundir.layout import read_config_file
    from sao_online.runtime.loop import DECODE_ROUNDS_FILE

    rounds, updates, episodes = [], [], []
    for path in paths:
        if not (path / "config.yaml").is_file():
            raise ValueError(f"sim fit: {path} is not a run directory (no config.yaml)")
        rounds_file = path / DECODE_ROUNDS_FILE
        if not rounds_file.is_file():
            raise ValueError(
                f"sim fit: {path} has no {DECODE_ROUNDS_FILE}: fit to runs of the local or ray "
                "backend (their rollout workers log their decoding rounds)"
            )
        run_updates = read_table(path, "updates")
        needed = {"charts/batch_tokens", "charts/learner_policy_seconds", "charts/publish_seconds"}
        if missing := sorted(needed - set(run_updates.columns)):
            raise ValueError(f"sim fit: {path}/updates.parquet lacks {', '.join(missing)}")
        algorithm = read_config_file(path / "config.yaml").get("algorithm", {})
        uses_critic = bool((run_updates["charts/learner_critic_seconds"] > 0).any())
        run_updates["critic_updates"] = int(algorithm.get("critic_updates", 0)) * uses_critic
        run_updates["run"] = str(path)
        rounds.append(pd.read_csv(rounds_file))
        updates.append(run_updates)
        episodes.append(read_table(path, "episodes"))
    return (
        pd.concat(rounds, ignore_index=True),
        pd.concat(updates, ignore_index=True),
        pd.concat(episodes, ignore_index=True),
    )


def simulated_config(run: Path, costs: dict[str, float]) -> dict[str, Any]:
    """The config of the run at ``run`` (as it resolved it) on the simulated backend with
    ``costs`` as its cost model."""
    from sao_online.config import ExperimentConfig
    from sao_online.rundir.layout import read_config_file

    resolved = read_config_file(run / "config.yaml")
    config = {key: value for key, value in resolved.items() if key in ExperimentConfig.model_fields}
    config["runtime"] = {**config.get("runtime", {}), "backend": "simulated", "sim": costs}
    return config


def _fit_command(args: argparse.Namespace) -> int:
    from sao_online.config import load_config
    from sao_online.runtime.simulation.fit import fit_costs

    paths = [Path(run) for run in args.runs]
    fit = fit_costs(*read_timings(paths))
    heading = (
        f"# runtime.sim fitted by `sao-online sim fit` to {len(paths)} run(s): "
        f"{', '.join(str(p) for p in paths)}\n"
    )
    decode = fit.diagnostics["decode"]
    print(
        f"sim fit: decoding step fitted to {decode['rounds']:.0f} rounds "
        f"({decode['rounds_left_out']:.0f} left out as outliers); median relative error "
        f"{decode['median_relative_error']:.1%}, total seconds off by "
        f"{decode['total_seconds_error']:+.1%}",
        file=sys.stderr,
    )
    if not args.out:
        print(heading + yaml.safe_dump(fit.to_config(), sort_keys=False), end="")
        return 0
    config = simulated_config(paths[0], fit.costs.to_dict())
    load_config(config)  # what is written runs
    Path(args.out).write_text(heading + yaml.safe_dump(config, sort_keys=False))
    print(f"sim fit: {args.out} ({paths[0]}'s config, simulated)", file=sys.stderr)
    return 0


def runtime_profile(path: Path) -> dict[str, Any]:
    """What the runtime did in the run at ``path``, in steady state (from its first update to
    its last, so the workers' start-up is left out): the staleness shares of the trained
    episodes, episodes per second, the learner's busy share (its updates) and waits, the share
    spent publishing weights, and the share of action tokens DIS masked. Times are the run's own
    seconds (virtual for a simulated run)."""
    from sao_online.analysis.loading import read_table
    from sao_online.rundir.layout import read_config_file

    config = read_config_file(path / "config.yaml")
    episodes = read_table(path, "episodes")
    updates = read_table(path, "updates").sort_values("version")
    if "dropped" in episodes:
        episodes = episodes[~episodes["dropped"].astype(bool)]
    trained = episodes[episodes["staleness"] >= 0]
    shares = trained["staleness"].value_counts(normalize=True).sort_index()
    steady = updates.iloc[1:]  # what happened between the first update and the last
    seconds = float(updates["wall_time"].iloc[-1] - updates["wall_time"].iloc[0])
    tokens = steady["charts/action_tokens"]
    masked = sum(
        steady[column]
        for column in ("charts/masked_below_fraction", "charts/masked_above_fraction")
        if column in steady
    )
    waits = {
        cause: float(steady[f"charts/learner_wait_{cause}_seconds"].sum()) / seconds
        for cause in ("bound", "episodes")
        if f"charts/learner_wait_{cause}_seconds" in steady
    }
    return {
        "run": str(path),
        "backend": config.get("runtime", {}).get("backend"),
        "episodes": len(trained),
        "updates": len(updates),
        "first_update_seconds": float(updates["wall_time"].iloc[0]),
        "steady_seconds": seconds,
        "episodes_per_second": float(steady["charts/action_tokens"].size)
        * config["rollout"]["batch_size"]
        / seconds
        if seconds > 0
        else None,
        "staleness_shares": {int(k): float(v) for k, v in shares.items()},
        "staleness_mean": float(trained["staleness"].mean()),
        "learner_busy_share": float(steady["charts/learner_seconds"].sum()) / seconds
        if seconds > 0
        else None,
        "learner_wait_shares": waits,
        "publish_share": float(steady["charts/publish_seconds"].sum()) / seconds
        if seconds > 0 and "charts/publish_seconds" in steady
        else None,
        "dis_masked_share": float((masked * tokens).sum() / tokens.sum())
        if isinstance(masked, type(tokens))
        else 0.0,
    }


def _compare_command(args: argparse.Namespace) -> int:
    profiles = [runtime_profile(Path(run)) for run in args.runs]
    print(json.dumps(profiles, indent=2))
    return 0
