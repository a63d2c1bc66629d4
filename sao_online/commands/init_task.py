"""``sao-online init task NAME``: a drifting task of your own to start from.

Writes two files into a folder (the current one by default):

- ``NAME.py``: a :class:`~sao_online.environments.DriftingTextEnv` subclass with its
  ``gymnasium.register`` call. The task as written: the prompt offers three colours and one of
  them pays; which one is the drift parameter ``paying``. Edit the prompt, the judge and the
  drift space to make it yours.
- ``NAME.yaml``: an experiment that runs it on the tiny model with a shift half way through
  the budget, on the settings the tiny model adapts with (see ``sao_online.config.model_presets``).

``sao-online compare NAME.yaml --methods sao,grpo --seeds 3`` then runs it and
``sao-online report runs/NAME`` reports on it.
"""

from __future__ import annotations

import argparse
import keyword
import re
from pathlib import Path
from string import Template

#: A task name: a Python module name (the config imports it as ``NAME:NAME/Class-v0``).
TASK_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

TASK_TEMPLATE = Template('''\
"""$class_name: a drifting task for sao-online (written by `sao-online init task $name`).

The prompt offers three colours; one of them pays. Which one is the drift parameter `paying`,
moved by the schedule in $name.yaml. The policy is never told which colour pays: it has to find
out from rewards, and find out again after the shift.

Make it yours: change the prompt (_begin_episode), the judge (_respond), the drift space and
the oracle. Run it with
    sao-online compare $name.yaml --methods sao,grpo --seeds 3
    sao-online report runs/$name
"""

import gymnasium

from sao_online.drift_schedules import Choice
from sao_online.environments import DriftingTextEnv, TurnResult

COLOURS = ("red", "green", "blue")


class $class_name(DriftingTextEnv):
    description = "Name a colour; which colour pays drifts."
    drift_space = {"paying": Choice(list(COLOURS), help="the colour that earns reward 1")}

    def _begin_episode(self):
        """The prompt, and extra entries for the reset's info."""
        return f"Name one colour: {', '.join(COLOURS)}.", {}

    def _respond(self, action):
        """Judge one action. Any text must get a defined reward, never an exception."""
        said = action.strip().lower().rstrip(".!")
        if said not in COLOURS:
            return TurnResult(
                f"Answer with one of: {', '.join(COLOURS)}.",
                reward=0.0,
                terminated=True,
                behavior="other",
            )
        paid = said == self.theta["paying"]
        return TurnResult(
            "Yes." if paid else "No.", reward=float(paid), terminated=True, behavior=said
        )

    def oracle_action(self, observation, info):
        """The scripted agent that knows the regime: the ceiling for regret."""
        return info["theta"]["paying"]

    def oracle_reward(self, theta):
        """The oracle's expected return under `theta`."""
        return 1.0

    def demonstration_action(self, observation, info):
        """What the warm start imitates: any colour, so it leaves the policy undecided."""
        return COLOURS[int(self.np_random.integers(len(COLOURS)))]


gymnasium.register("$name/$class_name-v0", entry_point=$class_name)
''')

CONFIG_TEMPLATE = Template("""\
# Your task ($name.py) on the tiny model, written by `sao-online init task $name`.
#   sao-online compare $name.yaml --methods sao,grpo --seeds 3
#   sao-online report runs/$name
# The rewarded colour moves from red to blue at episode $shift of $episodes. Everything not set
# here takes its default, and the tiny model's preset adds a KL pull to the warm start
# (regularizers.kl_coef 0.6; the paper uses none, and the tiny policy does not re-adapt without
# it: docs/tiny_model_preset.md).
experiment: $name
schedule:
  clock: episodes
  parameters:
    paying: {kind: abrupt, values: [red, blue], at: [0, $shift]}
env: {id: "$name:$name/$class_name-v0"}
rollout: {max_turns: 1, max_action_tokens: 16, max_episode_tokens: 96}
# sync: one process, the same result for the same seed while you write the task. `local`
# (the default) trains asynchronously, on episodes from rollout-worker processes.
runtime: {backend: sync}
budget: {episodes: $episodes}
""")

#: The template config's budget and its shift (episodes).
TEMPLATE_EPISODES = 2400
TEMPLATE_SHIFT = 800


def next_steps(name: str, folder: Path) -> str:
    """What to run once the files are written (from ``folder``, where the module is)."""
    where = "" if folder.resolve() == Path.cwd().resolve() else f"cd {folder}\n  "
    return (
        "Next, from the folder of the files (the config imports the module from there):\n  "
        f"{where}sao-online envs --import {name}\n"
        f"  sao-online compare {name}.yaml --methods sao,grpo --seeds 3\n"
        f"  sao-online report runs/{name}"
    )


def class_name_for(name: str) -> str:
    """``my_task`` -> ``MyTask``: the environment class (and Gymnasium id) of a task."""
    return "".join(part.capitalize() for part in name.split("_") if part) or "Task"


def check_task_name(name: str) -> None:
    """Raises ValueError unless ``name`` can be a Python module and a folder name."""
    if not TASK_NAME.match(name) or keyword.iskeyword(name):
        raise ValueError(
            f"{name!r} cannot name a task module (lower-case letters, digits and "
            "'_', starting with a letter, not a Python keyword), e.g. my_task"
        )


def write_task(name: str, folder: str | Path = ".", *, force: bool = False) -> list[Path]:
    """Write ``NAME.py`` and ``NAME.yaml`` into ``folder``; return their paths.

    Raises:
        ValueError: a bad name, or a file that exists (unless ``force``).
    """
    check_task_name(name)
    folder = Path(folder)
    values = {
        "name": name,
        "class_name": class_name_for(name),
        "episodes": TEMPLATE_EPISODES,
        "shift": TEMPLATE_SHIFT,
    }
    files = {
        folder / f"{name}.py": TASK_TEMPLATE.substitute(values),
        folder / f"{name}.yaml": CONFIG_TEMPLATE.substitute(values),
    }
    existing = [str(path) for path in files if path.exists()]
    if existing and not force:
        raise ValueError(
            f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''} "
            "(--force replaces them)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
    return list(files)


def add_init_parser(commands: argparse._SubParsersAction) -> None:
    init = commands.add_parser("init", help="start something of your own from a template")
    init_commands = init.add_subparsers(dest="init_command", required=True)
    task = init_commands.add_parser(
        "task",
        help="write NAME.py (a drifting task) and NAME.yaml (an experiment on it) to edit",
    )
    task.add_argument("name", help="the task's module name, e.g. my_task")
    task.add_argument("--dir", default=".", help="where to write the files (default: here)")
    task.add_argument("--force", action="store_true", help="replace files that exist")
    task.set_defaults(func=_init_task_command)


def _init_task_command(args: argparse.Namespace) -> int:
    written = write_task(args.name, args.dir, force=args.force)
    print("\n".join(f"wrote {path}" for path in written))
    print(next_steps(args.name, Path(args.dir)))
    return 0
