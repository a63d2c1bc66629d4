"""The generated parts of the documentation, written from the code so they cannot go stale.

A page marks each generated part with a pair of comments; what lies between them is replaced:

    <!-- generated: drift-space StyleShiftEnv -->
    ... (written by this script) ...
    <!-- end generated -->

Kinds: ``drift-spaces`` (every built-in environment's drift parameters), ``drift-space CLASS``
(one environment class of ``sao_online.environments``), ``config-reference`` (every config
field, from the pydantic models), ``methods`` (the built-in methods, as the registry builds
them), ``cli`` (every command and option, from the argument parser) and ``demo-seeds SET
SHIFT`` (the demo's per-seed results, from ``docs/demo_seed_sets.csv``).

    python docs/generate.py            # rewrite the generated parts of every page
    python docs/generate.py --check    # change nothing; exit 1 naming each stale page

``tests/docs/test_docs_pages.py`` runs the check, and the site's build (``make docs``) fails on a
stale page too (``docs/hooks.py``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<kind>[\w-]+)(?: (?P<argument>[^>]*?))? -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- end generated -->)",
    flags=re.S,
)


def cell(text: Any) -> str:
    """``text`` as one Markdown table cell: pipes escaped, HTML brackets as entities."""
    return (
        str(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")
    )


def yaml_value(value: Any) -> str:
    """A default as a config file would spell it (``null``, ``true``, ``[difficulty]``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(yaml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {yaml_value(item)}" for key, item in value.items()) + "}"
    return str(value)


def number(value: float) -> str:
    """``4294967295`` rather than ``4.29497e+09``; ``0.3`` rather than ``0.30000``."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def code(text: str) -> str:
    """Inline code that survives a table cell (backticks inside are not expected)."""
    return "`" + text.replace("|", "\\|") + "`"


# ----------------------------------------------------------------------------- drift spaces


def _builtin_env_classes() -> list[tuple[str, type]]:
    """(registered id, class) of every built-in environment, by id."""
    import gymnasium

    from sao_online.environments.registry import BUILTIN_ENVS, drifting_entry_class

    return [(env_id, drifting_entry_class(gymnasium.spec(env_id))) for env_id in BUILTIN_ENVS]


def _describe_values(spec: Any) -> str:
    from sao_online.drift_schedules import Range

    if isinstance(spec, Range):
        return f"a number in [{number(spec.low)}, {number(spec.high)}]"
    return ", ".join(code(str(value)) for value in spec.values)


def drift_table(space: dict[str, Any]) -> str:
    """One row per drift parameter: its values, default and what it changes."""
    from sao_online.drift_schedules import normalize_space

    rows = ["| parameter | values | default | what it changes |", "|---|---|---|---|"]
    for name, spec in normalize_space(space).items():
        rows.append(
            f"| `{name}` | {_describe_values(spec)} | {code(str(spec.default))} | "
            f"{cell(spec.help)} |"
        )
    return "\n".join(rows)


def render_drift_space(class_name: str) -> str:
    """The drift parameters of one environment class, and the id it is registered under."""
    import sao_online.environments as environments

    env_class = getattr(environments, class_name, None)
    if not isinstance(env_class, type):
        raise ValueError(f"drift-space: no class {class_name!r} in sao_online.environments")
    ids = [env_id for env_id, cls in _builtin_env_classes() if cls is env_class]
    registered = ", ".join(f"`{env_id}`" for env_id in ids) or "not registered"
    return (
        f"Registered as {registered}. Its drift parameters (`{class_name}.drift_space`):\n\n"
        + drift_table(env_class.drift_space)
    )


def render_drift_spaces(argument: str | None = None) -> str:
    """Every built-in environment: its id, its one-line description, its drift parameters."""
    parts = []
    for env_id, env_class in _builtin_env_classes():
        parts.append(
            f"**`{env_id}`** (`{env_class.__name__}`): {env_class.description}\n\n"
            + drift_table(env_class.drift_space)
        )
    return "\n\n".join(parts)


# ----------------------------------------------------------------------------- config


def _allowed(schema: dict[str, Any]) -> str:
    """What a JSON Schema fragment allows, in words."""
    if "anyOf" in schema:
        return " or ".join(_allowed(option) for option in schema["anyOf"])
    if "enum" in schema:
        return ", ".join(code(yaml_value(value)) for value in schema["enum"])
    if "const" in schema:
        return code(yaml_value(schema["const"]))
    kind = schema.get("type")
    if kind in ("integer", "number"):
        low = (
            ("[", schema["minimum"])
            if "minimum" in schema
            else ("(", schema.get("exclusiveMinimum"))
        )
        high = (
            ("]", schema["maximum"])
            if "maximum" in schema
            else (")", schema.get("exclusiveMaximum"))
        )
        name = "integer" if kind == "integer" else "number"
        if low[1] is None and high[1] is None:
            return name
        if high[1] is None:
            return f"{name} {'>=' if low[0] == '[' else '>'} {number(low[1])}"
        if low[1] is None:
            return f"{name} {'<=' if high[0] == ']' else '<'} {number(high[1])}"
        return f"{name} in {low[0]}{number(low[1])}, {number(high[1])}{high[0]}"
    if kind == "boolean":
        return "`true`, `false`"
    if kind == "null":
        return "`null`"
    if kind == "string":
        return "string"
    if kind == "array":
        return "list of " + _allowed(schema.get("items", {}))
    if kind == "object":
        values = schema.get("additionalProperties")
        if isinstance(values, dict) and values:
            return "mapping of names to " + _allowed(values)
        return "mapping"
    return "any"


def render_config_reference(argument: str | None = None) -> str:
    """Every config field by section: what it allows, its default and its help text."""
    from pydantic import BaseModel

    from sao_online.config import ExperimentConfig, describe_fields
    from sao_online.config.schema import config_json_schema

    schema = config_json_schema()
    defaults = {name: (default, text) for name, default, text in describe_fields()}

    def is_section(spec: Any) -> bool:
        return isinstance(spec.annotation, type) and issubclass(spec.annotation, BaseModel)

    def table(model: type[BaseModel], properties: dict[str, Any], prefix: str) -> str:
        rows = ["| field | allowed | default | what it sets |", "|---|---|---|---|"]
        for name, spec in model.model_fields.items():
            if is_section(spec):
                continue  # a section of its own, below
            default, text = defaults[prefix + name]
            rows.append(
                f"| `{prefix}{name}` | {_allowed(properties[name])} | "
                f"{code(yaml_value(default))} | {cell(text)} |"
            )
        return "\n".join(rows)

    def sections(model: type[BaseModel], prefix: str) -> Iterable[tuple[str, type[BaseModel]]]:
        for name, spec in model.model_fields.items():
            if is_section(spec):
                yield prefix + name, spec.annotation
                yield from sections(spec.annotation, f"{prefix}{name}.")

    parts = ["### Top level\n\n" + table(ExperimentConfig, schema["properties"], "")]
    for path, model in sections(ExperimentConfig, ""):
        properties = schema["$defs"][model.__name__]["properties"]
        summary = (model.__doc__ or "").strip().splitlines()[0]
        parts.append(f"### `{path}`\n\n{summary}\n\n" + table(model, properties, path + "."))
    return "\n\n".join(parts)


# ----------------------------------------------------------------------------- methods


def render_methods(argument: str | None = None) -> str:
    """The built-in methods as the registry builds them from a default config."""
    from sao_online.algorithms import METHODS, build_method
    from sao_online.config import load_config

    rows = [
        "| method | rollouts per prompt | advantage estimator | policy objective | critic |",
        "|---|---|---|---|---|",
    ]
    for name in METHODS:
        method = build_method(load_config({"algorithm": {"name": name}}))
        rows.append(
            f"| `{name}` | {method.group_size} | `{type(method.estimator).__name__}` | "
            f"`{type(method.objective).__name__}` | {'yes' if method.uses_critic else 'no'} |"
        )
    return "\n".join(rows)


# ----------------------------------------------------------------------------- command line


def _help_text(action: argparse.Action) -> str:
    # As argparse expands it: %(default)s and the like.
    if not action.help:
        return ""
    params = {key: value for key, value in vars(action).items() if value is not argparse.SUPPRESS}
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(choice) for choice in params["choices"])
    return action.help % params


def _option_name(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar or action.dest
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar or action.dest.upper()
    return f"{names} {metavar}"


def _commands(
    parser: argparse.ArgumentParser, prefix: str
) -> Iterable[tuple[str, str, argparse.ArgumentParser]]:
    """(command line, help, parser) of every command below ``parser``, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", helps.get(name) or "", sub
                yield from _commands(sub, f"{prefix} {name}")


def render_cli(argument: str | None = None) -> str:
    """Every ``sao-online`` command with its arguments and options, from the parser."""
    from sao_online.cli import build_parser

    return cli_reference(build_parser())


def cli_reference(parser: argparse.ArgumentParser) -> str:
    """A section per command of ``parser`` (a group of commands with options of its own gets
    one too), a table of its arguments in each."""
    global_options = [
        action for action in parser._actions if action.option_strings and action.dest != "help"
    ]
    rows = ["| option | what it does |", "|---|---|"]
    for action in global_options:
        rows.append(
            f"| {code('sao-online ' + _option_name(action))} | {cell(_help_text(action))} |"
        )
    parts = [f"### `{parser.prog}`\n\n" + "\n".join(rows)]
    for command, summary, sub in _commands(parser, parser.prog):
        arguments = [
            action
            for action in sub._actions
            if action.dest != "help"
            and "--verbose" not in action.option_strings
            and not isinstance(action, argparse._SubParsersAction)
        ]
        has_commands = any(
            isinstance(action, argparse._SubParsersAction) for action in sub._actions
        )
        if has_commands and not arguments:
            continue  # only a group of commands: its commands follow
        part = f"### `{command}`\n\n{cell(summary[:1].upper() + summary[1:])}."
        if arguments:
            rows = ["| argument | default | what it does |", "|---|---|---|"]
            for action in arguments:
                default = action.default
                unset = default is None or default is False or default is argparse.SUPPRESS
                shown = "" if unset or default == [] else code(yaml_value(default))
                rows.append(
                    f"| {code(_option_name(action))} | {shown} | {cell(_help_text(action))} |"
                )
            part += "\n\n" + "\n".join(rows)
        parts.append(part)
    return "\n\n".join(parts)


# ----------------------------------------------------------------------------- demo seeds

DEMO_SEEDS = DOCS / "demo_seed_sets.csv"
DEMO_COLUMNS = {
    "reward before the shift": ("reward_before", None),
    "episodes to 0.5 x oracle": ("episodes_to_half_oracle", "episodes_censored"),
    "seconds to 0.5 x oracle": ("seconds_to_half_oracle", "seconds_censored"),
    "time to recovery (0.9 x own pre-shift level), episodes": (
        "time_to_recovery",
        "recovery_censored",
    ),
    "regret / episode over the phase": ("regret_per_episode", None),
}


def demo_seed_rows() -> list[dict[str, str]]:
    """The demo's per-seed results, one row per seed set, seed, shift and method, as kept."""
    import csv

    with DEMO_SEEDS.open(newline="") as kept:
        return list(csv.DictReader(kept))


def render_demo_seeds(argument: str | None) -> str:
    """One seed set's table for one shift (``SET SHIFT``): per method, the per-seed values in
    seed order, ``+`` marking a censored time."""
    try:
        seed_set, shift = argument.split()
    except (AttributeError, ValueError):
        raise ValueError(f"demo-seeds: expected 'SET SHIFT', got {argument!r}") from None
    rows = [row for row in demo_seed_rows() if (row["seed_set"], row["shift"]) == (seed_set, shift)]
    if not rows:
        raise ValueError(f"demo-seeds: no rows for seed set {seed_set}, shift {shift}")
    methods = list(dict.fromkeys(row["method"] for row in rows))
    table = [
        "| method | " + " | ".join(DEMO_COLUMNS) + " |",
        "|---" * (len(DEMO_COLUMNS) + 1) + "|",
    ]
    for method in methods:
        seeds = sorted(
            (row for row in rows if row["method"] == method), key=lambda r: int(r["seed"])
        )
        cells = []
        for value, censored in DEMO_COLUMNS.values():
            cells.append(
                ", ".join(
                    row[value] + ("+" if censored and row[censored] == "1" else "") for row in seeds
                )
            )
        table.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(table)


# ----------------------------------------------------------------------------- pages

RENDERERS: dict[str, Callable[[str | None], str]] = {
    "drift-spaces": render_drift_spaces,
    "drift-space": render_drift_space,
    "config-reference": render_config_reference,
    "methods": render_methods,
    "cli": render_cli,
    "demo-seeds": render_demo_seeds,
}


def render(page: str, where: str = "page") -> str:
    """``page`` with every generated part written afresh.

    Raises:
        ValueError: a part of an unknown kind, or a class the code does not have.
    """

    def fill(match: re.Match) -> str:
        kind = match["kind"]
        if kind not in RENDERERS:
            raise ValueError(
                f"{where}: unknown generated part {kind!r}; kinds: {', '.join(RENDERERS)}"
            )
        body = RENDERERS[kind](match["argument"])
        return f"{match['open']}{body}\n{match['close']}"

    return BLOCK.sub(fill, page)


def pages() -> list[Path]:
    """The documentation pages with generated parts."""
    return sorted(path for path in DOCS.rglob("*.md") if "<!-- generated: " in path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the generated parts of the docs.")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = []
    for path in pages():
        text = path.read_text()
        fresh = render(text, where=str(path.relative_to(DOCS.parent)))
        if fresh != text:
            stale.append(path.relative_to(DOCS.parent))
            if not args.check:
                path.write_text(fresh)
    if args.check and stale:
        names = ", ".join(str(path) for path in stale)
        print(f"stale generated docs: {names}; run: python docs/generate.py", file=sys.stderr)
        return 1
    for path in stale:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
