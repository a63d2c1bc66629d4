"""``sao-online configs list`` and ``configs copy NAME [DEST]``: the bundled experiment configs."""

from __future__ import annotations

from pathlib import Path

from sao_online.bundled_configs import bundled_configs, copy_config, describe


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
