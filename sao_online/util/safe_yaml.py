"""YAML for user input, bounded: no aliases, no duplicate keys, no Python tags, a size and a
nesting limit.

``yaml.safe_load`` never runs code, but an alias bomb (a few hundred bytes of nested ``*ref``
lists) expands to billions of elements as soon as anything walks it: copying the config,
printing it in an error message, hashing it. Configs and schedules have no use for aliases, so
they are refused outright, with the line they are on.

A key given twice in one mapping is refused too, naming both lines: YAML loaders keep the last
value, so ``warm_start: false`` followed later by ``warm_start: true`` would silently undo the
first.

Text is checked before the parser sees it: a NUL byte (a binary file), a control character or a
byte that is not UTF-8 is one line naming the source, the line and the column, never the text
around it. Files (:func:`read_yaml_file`) must be regular files (not a FIFO, a device or a
folder, which could block or never end) and are read no further than the size limit.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

MAX_YAML_BYTES = 1 << 20
#: What a YAML reader refuses (PyYAML's own set): control characters other than tab, newlines
#: and NEL, surrogates, and the two non-characters U+FFFE and U+FFFF.
_NOT_PRINTABLE = re.compile(
    r"[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]"
)


class YamlInputError(ValueError):
    """YAML text that is malformed, too large, or uses what configs do not allow (one line)."""


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise YamlInputError(
                f"line {event.start_mark.line + 1}: YAML aliases (*{str(event.anchor)[:40]}) "
                f"are not allowed here; write the value out"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = first_line.get(key)
                except TypeError:  # an unhashable key: the base class names it
                    break
                line = key_node.start_mark.line + 1
                if seen is not None:
                    raise YamlInputError(
                        f"line {line}: duplicate key {key_text(key)!r} (first given at line "
                        f"{seen}); give each key once"
                    )
                first_line[key] = line
        return super().construct_mapping(node, deep=deep)


_NAME_LIKE = re.compile(r"^[\w .\-\[\]]+$")


def key_text(key: Any, limit: int = 40) -> str:
    """A mapping key as an error names it: its text cut to ``limit`` characters when it reads as
    a name; otherwise only its length (a key may be a line of a file that is no config at all,
    such as a password file's, which an error must not echo)."""
    text = str(key)
    if not _NAME_LIKE.match(text):
        return f"<a key of {len(text)} characters, not a name>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _position(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}"


def check_text(text: str, source: str) -> None:
    """Refuse text a config cannot hold: a NUL (binary content) or another control character.

    Raises:
        YamlInputError: naming ``source`` and the position, not the text around it.
    """
    found = _NOT_PRINTABLE.search(text)
    if found is None:
        return
    character = found.group()
    where = _position(text, found.start())
    if character == "\x00":
        raise YamlInputError(f"{source}: binary content (a NUL byte) at {where}; not a text file")
    raise YamlInputError(
        f"{source}: control character U+{ord(character):04X} at {where}; configs are plain "
        "text (remove it)"
    )


def read_yaml_file(path: str | Path, what: str = "file") -> str:
    """The text of a YAML file, checked: a regular file, at most ``MAX_YAML_BYTES``, UTF-8,
    without control characters.

    Args:
        path: the file.
        what: what the file is, for the messages (``config file``, ``suite file``).

    Raises:
        YamlInputError: one line naming the file and what is wrong (the position for bad
            bytes), never quoting its content.
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise YamlInputError(f"{path}: no such {what}") from None
    except OSError as error:
        raise YamlInputError(f"{path}: cannot read the {what} ({error.strerror})") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise YamlInputError(f"{path}: {kind}; a {what} must be a regular file")
    try:
        with open(path, "rb") as file:
            raw = file.read(MAX_YAML_BYTES + 1)
    except OSError as error:
        raise YamlInputError(f"{path}: cannot read the {what} ({error.strerror})") from None
    if len(raw) > MAX_YAML_BYTES:
        raise YamlInputError(f"{path}: more than the {MAX_YAML_BYTES} bytes allowed for a {what}")
    if b"\x00" in raw:
        text = raw[: raw.index(b"\x00")].decode("utf-8", errors="replace")
        where = _position(text + "\x00", len(text))
        raise YamlInputError(f"{path}: binary content (a NUL byte) at {where}; not a text file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        before = raw[: error.start].decode("utf-8", errors="replace")
        where = _position(before + "?", len(before))
        raise YamlInputError(
            f"{path}: not UTF-8 text (byte 0x{raw[error.start]:02x} at {where})"
        ) from None
    check_text(text, str(path))
    return text


def load_yaml_file(path: str | Path, what: str = "file") -> Any:
    """:func:`read_yaml_file`, parsed by :func:`load_yaml_text`."""
    return load_yaml_text(read_yaml_file(path, what), str(path))


def load_yaml_text(text: str, source: str = "<text>") -> Any:
    """Parse ``text`` as YAML with the limits above.

    Raises:
        YamlInputError: one line naming ``source``, and the line at fault where known.
    """
    if len(text) > MAX_YAML_BYTES:
        raise YamlInputError(
            f"{source}: {len(text)} characters, more than the {MAX_YAML_BYTES} allowed for a config"
        )
    check_text(text, source)
    loader = None
    try:
        loader = _NoAliasLoader(text)
        return loader.get_single_data()
    except YamlInputError as error:
        raise YamlInputError(f"{source}: {error}") from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = str(error.problem or error.context or "malformed")[:120]
        raise YamlInputError(f"{source}: not valid YAML{where}: {what}") from None
    except yaml.YAMLError as error:
        raise YamlInputError(
            f"{source}: not valid YAML: {str(error).splitlines()[0][:120]}"
        ) from None
    except RecursionError:
        raise YamlInputError(f"{source}: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()
