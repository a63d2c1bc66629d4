"""The experiment configs shipped inside the package, reachable by name from anywhere.

Every command that takes a config (``run``, ``compare``, ``pretrain``, ``benchmark``, the API)
accepts a path or the name of a bundled config: ``demo``, ``demo.yaml`` and ``configs/demo.yaml``
all name ``sao_online/configs/demo.yaml`` when no such file exists where the command runs, so the
README's commands work from an installed package as from a clone. A file that exists always wins.

Example:
    >>> resolve_config("smoke").name
    'smoke.yaml'
    >>> sorted(bundled_configs())[:2]
    ['code_shift', 'demo']
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from sao_online.util.safe_yaml import YamlInputError, load_yaml_text
from sao_online.util.suggestions import did_you_mean

#: The folder prefix the README's commands use for bundled files (a clone's ``configs/``).
CONFIGS_PREFIX = "configs/"


def configs_folder() -> Path:
    """The installed ``sao_online/configs`` folder."""
    return Path(str(resources.files("sao_online.configs")))


def bundled_configs() -> dict[str, Path]:
    """Name (file name without ``.yaml``) -> path of every bundled experiment config."""
    return {path.stem: path for path in sorted(configs_folder().glob("*.yaml"))}


def bundled_schedules() -> dict[str, Path]:
    """Name (``schedules/<stem>``) -> path of every bundled schedule file."""
    folder = configs_folder() / "schedules"
    return {f"schedules/{path.stem}": path for path in sorted(folder.glob("*.yaml"))}


def _bundled_key(text: str) -> str:
    key = text.strip()
    if key.startswith(CONFIGS_PREFIX):
        key = key[len(CONFIGS_PREFIX) :]
    return key.removesuffix(".yaml")


def resolve_config(name_or_path: str | Path, *, what: str = "config") -> Path:
    """The file ``name_or_path`` names: an existing path, else a bundled config or schedule.

    Args:
        name_or_path: a path to a YAML file, or a bundled name: ``demo``, ``demo.yaml``,
            ``configs/demo.yaml``, ``schedules/style_shift_demo`` (``configs/`` and ``.yaml``
            are optional).
        what: what the file is, for the error message.

    Raises:
        FileNotFoundError: neither a file nor a bundled name; the message lists the bundled
            names, with the closest one first when there is one.
    """
    path = Path(name_or_path)
    if path.is_file():
        return path
    key = _bundled_key(str(name_or_path))
    known = {**bundled_configs(), **bundled_schedules()}
    if key in known:
        return known[key]
    if path.exists():  # a folder, a FIFO, a device: never read (one could block or never end)
        raise FileNotFoundError(f"{name_or_path}: not a regular file; a {what} must be a file")
    raise _not_found(f"{what} file not found: {name_or_path}", key, list(known))


def _not_found(message: str, key: str, known: list[str]) -> FileNotFoundError:
    return FileNotFoundError(
        f"{message}{did_you_mean(key, known)}; bundled configs: "
        f"{', '.join(bundled_configs())} (`sao-online configs list` describes them)"
    )


def describe(path: Path) -> str:
    """The first sentence of a bundled file's leading comment (its one-line description)."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(lines)
    end = text.find(". ")
    return text[: end + 1] if end >= 0 else text


def schedule_file_of(config_path: Path) -> str | None:
    """The relative schedule path a config file names (``schedule: schedules/x.yaml``), if any."""
    try:
        data = load_yaml_text(config_path.read_text(), str(config_path))
    except YamlInputError:
        return None
    schedule = data.get("schedule") if isinstance(data, dict) else None
    if isinstance(schedule, str) and not Path(schedule).is_absolute():
        return schedule
    return None


def copy_config(name: str, destination: str | Path = ".", *, force: bool = False) -> list[Path]:
    """Copy a bundled config (and the schedule file it names) to ``destination``.

    Args:
        name: a bundled config's name (``configs list`` shows them).
        destination: a folder (the file keeps its name) or a ``.yaml`` file path.
        force: replace files that exist.

    Returns:
        The files written: the config, then its schedule file (kept at the same relative path,
        so the copy loads as the original does).

    Raises:
        FileNotFoundError: ``name`` is not a bundled config.
        FileExistsError: a target exists and ``force`` is not set.
    """
    configs = bundled_configs()
    key = _bundled_key(name)
    if key not in configs:
        raise _not_found(f"configs copy: no bundled config {name!r}", key, list(configs))
    source = configs[key]
    destination = Path(destination)
    target = destination if destination.suffix in (".yaml", ".yml") else destination / source.name
    copies = [(source, target)]
    schedule = schedule_file_of(source)
    if schedule is not None:
        copies.append((source.parent / schedule, target.parent / schedule))
    existing = [str(dst) for _, dst in copies if dst.exists()]
    if existing and not force:
        raise FileExistsError(
            f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''} "
            "(--force replaces them)"
        )
    for src, dst in copies:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    return [dst for _, dst in copies]
