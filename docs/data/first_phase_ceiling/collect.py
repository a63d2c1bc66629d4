"""What held StyleShift's and ReasonShift's first phase near the learnable mark: ``runs.csv``.

Usage: python collect.py [--methods A,B] SETTING=FOLDER [...] > runs.csv

Each FOLDER is a run directory or a benchmark folder (its runs under
``runs/<task>/<method>/seed-<k>/``); SETTING names the settings it ran at. One row per run, over
the second half of its first phase (where a learner has had time to learn): the share of
episodes that make the regime's rewarded choice (StyleShift: a line in the preferred style;
ReasonShift: a first answer in the live format), the mean reward of those episodes (what
making the right choice is worth: the policy's competence at the rest of the task), the mean
reward of all, and the prompt kind (task and level) whose right-choice episodes earn least;
beside them, the mean reward of the whole first phase, which ties a row to the benchmark run it
repeats (its ``phases.csv``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from sao_online.analysis.loading import read_table
from sao_online.analysis.prompt_groups import prompt_key_columns

#: Per family, the drift parameter that names the rewarded choice, as the episodes record it.
CHOICE = {"StyleShift": "preferred", "ReasonShift": "answer_format"}
#: Fewest right-choice episodes of a prompt kind for it to be the weakest one named.
MIN_PROMPT_EPISODES = 10


def _runs(folder: Path) -> list[Path]:
    if (folder / "episodes.parquet").is_dir():
        return [folder]
    runs = sorted(path.parent for path in folder.glob("runs/*/*/seed-*/episodes.parquet"))
    if not runs:
        raise ValueError(f"{folder}: neither a run directory nor a benchmark folder with runs")
    return runs


def run_row(setting: str, run: Path) -> dict:
    episodes = read_table(run, "episodes").sort_values("episode")
    config = _config(run)
    task = _family(config["env"]["id"])
    first = episodes[episodes["phase"] == 0]
    late = first.iloc[len(first) // 2 :]
    wanted = late["theta"].map(lambda theta: json.loads(theta)[CHOICE[task]])
    right = late[late["behavior"] == wanted]
    row = {
        "setting": setting,
        "task": task,
        "method": config["algorithm"]["name"],
        "seed": int(config["seed"]),
        "episodes": len(late),
        "right_choice_share": round(len(right) / len(late), 4),
        "right_choice_reward": round(float(right["reward"].mean()), 4),
        "reward_mean": round(float(late["reward"].mean()), 4),
        "first_phase_reward": round(float(first["reward"].mean()), 4),
        "weakest_prompt": "",
        "weakest_prompt_reward": None,
    }
    keys = prompt_key_columns(right)
    if keys:
        kinds = right.groupby(keys)["reward"].agg(["size", "mean"])
        kinds = kinds[kinds["size"] >= MIN_PROMPT_EPISODES]
        if len(kinds):
            weakest = kinds["mean"].idxmin()
            label = weakest if isinstance(weakest, tuple) else (weakest,)
            row["weakest_prompt"] = " level ".join(str(part) for part in label)
            row["weakest_prompt_reward"] = round(float(kinds["mean"].min()), 4)
    return row


def _config(run: Path) -> dict:
    import yaml

    return yaml.safe_load((run / "config.yaml").read_text())


def _family(env_id: str) -> str:
    name = env_id.split("/")[-1].split("-v")[0]
    if name not in CHOICE:
        raise ValueError(f"{env_id}: not a family this table reads ({', '.join(CHOICE)})")
    return name


def main(arguments: list[str]) -> int:
    methods = None
    if arguments[:1] == ["--methods"] and len(arguments) > 1:
        methods, arguments = set(arguments[1].split(",")), arguments[2:]
    if not arguments or any("=" not in argument for argument in arguments):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    rows = []
    for argument in arguments:
        setting, folder = argument.split("=", 1)
        rows += [run_row(setting, run) for run in _runs(Path(folder))]
    frame = pd.DataFrame(rows)
    if methods is not None:
        frame = frame[frame["method"].isin(methods)]
    frame.to_csv(sys.stdout, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
