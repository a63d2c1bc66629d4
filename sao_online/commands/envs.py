"""``sao-online envs``: the registered drifting tasks, with their drift parameters."""

from __future__ import annotations

import argparse


def add_envs_parser(commands: argparse._SubParsersAction) -> None:
    envs = commands.add_parser("envs", help="list environments and their drift parameters")
    envs.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (a module that calls gymnasium.register) and list "
        "its drifting tasks too; an experiment names it as env.id: "
        "MODULE:namespace/Name-v0",
    )
    envs.set_defaults(func=_envs_command)


def _envs_command(args: argparse.Namespace) -> int:
    print(describe_envs(args.imports), end="")
    return 0


def describe_envs(imports: list[str]) -> str:
    """Each drifting task's id, description and drift parameters, one block per task.

    ``imports``: modules to import first (each calls ``gymnasium.register``); the tasks they
    register are listed after the built-in ones.

    Raises:
        ValueError: the modules of ``imports`` registered no drifting task.
    """
    import gymnasium  # here, not on top: the command line builds its parser without it

    from sao_online.environments import import_env_module, list_envs

    before = set(gymnasium.registry)
    for module in imports:
        import_env_module(module)
    added = set(gymnasium.registry) - before
    if imports and not list_envs(ids=added):
        raise ValueError(
            f"envs --import: {', '.join(imports)} registered no drifting task "
            "(an env class with a drift_space, registered with gymnasium.register)"
        )
    lines = []
    for env_id, description, drift_space in list_envs() + list_envs(ids=added):
        lines.append(f"{env_id}\n    {description}")
        for name, spec in drift_space.items():
            lines.append(
                f"    drift {name}: {spec.describe()}" + (f" — {spec.help}" if spec.help else "")
            )
    return "".join(line + "\n" for line in lines)
