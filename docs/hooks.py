"""MkDocs hooks of the documentation site (``hooks:`` in mkdocs.yml).

- The API reference reads the package's source with griffe, which looks for ``sao_online`` as
  one folder. Three of its subpackages live in top-level folders instead (``environments/`` is
  ``sao_online.environments``, through setuptools' ``package-dir``), so before the build this
  hook lays out ``build/docs-api/sao_online/``: links to ``sao_online/``'s entries and to each
  mapped folder, the package as it is installed. mkdocs.yml points mkdocstrings there.
- The package's docstrings are Google style with two habits griffe does not read: an
  ``Example:`` section (griffe knows ``Examples:``) and Sphinx roles (``:func:`name```).
  :class:`DocstringHabits`, a griffe extension named in mkdocs.yml, rewrites both before the
  docstrings are parsed, so examples render as code and roles as inline code.
- A page whose generated parts (``docs/generate.py``) no longer match the code stops the build,
  naming the page and the command that rewrites it.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import tomllib
from pathlib import Path

import griffe
from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
API_SOURCE = ROOT / "build" / "docs-api"


def package_layout(root: Path = ROOT) -> dict[str, Path]:
    """``sao_online`` and each of its subpackages that lives elsewhere -> its folder, from
    pyproject.toml's ``[tool.setuptools] package-dir``."""
    settings = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {name: root / folder for name, folder in settings["package-dir"].items()}


def lay_out_package(target: Path = API_SOURCE, root: Path = ROOT) -> Path:
    """Build ``target/sao_online`` as links, shaped as the installed package; returns it."""
    layout = package_layout(root)
    package = target / "sao_online"
    shutil.rmtree(target, ignore_errors=True)
    package.mkdir(parents=True)
    for entry in layout["sao_online"].iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in layout.items():
        parts = name.split(".")
        if len(parts) == 2 and not (package / parts[1]).exists():
            (package / parts[1]).symlink_to(folder)
    return package


EXAMPLE_SECTION = re.compile(r"^(\s*)Example:[ \t]*$", flags=re.M)
SPHINX_ROLE = re.compile(r":(?:func|class|meth|attr|data|mod|exc|obj):`~?([^`]+)`")


class DocstringHabits(griffe.Extension):
    """``Example:`` read as ``Examples:`` (doctest lines render as code), and ``:func:`f```
    as ``f`` in inline code."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            text = EXAMPLE_SECTION.sub(r"\1Examples:", obj.docstring.value)
            obj.docstring.value = SPHINX_ROLE.sub(r"`\1`", text)


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on_startup(command, dirty, **kwargs):
    # Before any plugin reads its config: mkdocstrings drops search paths that do not exist.
    lay_out_package()


def on_page_markdown(markdown, page, config, files, **kwargs):
    if "<!-- generated: " in markdown:
        generate = _generator()
        where = f"docs/{page.file.src_path}"
        try:
            fresh = generate.render(markdown, where=where)
        except ValueError as error:
            raise PluginError(str(error)) from None
        if fresh != markdown:
            raise PluginError(
                f"{where}: its generated parts differ from the code; run: python docs/generate.py"
            )
    return markdown
