"""``sao-online configs list`` and ``configs copy NAME [DEST]``: the bundled experiment configs."""

from __future__ import annotations

import argparse
from pathlib import Path

from sao_online.config.bundled import bundled_configs, copy_config, describe


def add_configs_parser(commands: argparse._SubParsersAction) -> None:
    configs = commands.add_parser(
        "configs", help="the bundled experiment configs: list them, copy one to edit"
    )
    config_commands = configs.add_subparsers(dest="configs_command", required=True)
    config_commands.add_parser("list", help="name and description of each bundled config")
    copy = config_commands.add_parser(
        "copy", help="copy a bundled config (and its schedule file) to edit it"
    )
    copy.add_argument("name", help="a bundled config's name (`sao-online configs list`)")
    copy.add_argument(
        "dest", nargs="?", default=".", help="a folder or a .yaml file (default: here)"
    )
    copy.add_argument("--force", action="store_true", help="replace files that exist")
    configs.set_defaults(func=_configs_command)


def _configs_command(args: argparse.Namespace) -> int:
    if args.configs_command == "list":
        print(format_config_list())
    else:
        print(copy_and_describe(args.name, args.dest, force=args.force))
    return 0


def format_config_list() -> str:
    """One line per bundled config: its name and what it runs."""
    configs = bundled_configs()
    width = max(len(name) for name in configs)
    lines = [f"{name:<{width}}  {describe(path)}" for name, path in configs.items()]
    lines.append("")
    lines.append(
        "Run one by name (`sao-online run smoke`, `sao-online compare demo ...`) or copy it to "
        "edit: `sao-online configs copy NAME [DEST]`."
    )
    return "\n".join(lines)


def copy_and_describe(name: str, destination: str | Path = ".", *, force: bool = False) -> str:
    """Copy a bundled config (with its schedule file); return what was written, for the user."""
    written = copy_config(name, destination, force=force)
    config = written[0]
    lines = [f"wrote {path}" for path in written]
    lines.append(f"run it: sao-online run {config}")
    return "\n".join(lines)
