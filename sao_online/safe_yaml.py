"""YAML for user input, bounded: no aliases, no duplicate keys, no Python tags, a size and a
nesting limit.

``yaml.safe_load`` never runs code, but an alias bomb (a few hundred bytes of nested ``*ref``
lists) expands to billions of elements as soon as anything walks it: copying the config,
printing it in an error message, hashing it. Configs and schedules have no use for aliases, so
they are refused outright, with the line they are on.

A key given twice in one mapping is refused too, naming both lines: YAML loaders keep the last
value, so ``warm_start: false`` followed later by ``warm_start: true`` would silently undo the
first.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_YAML_BYTES = 1 << 20


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
                        f"line {line}: duplicate key {str(key)[:60]!r} (first given at line "
                        f"{seen}); give each key once"
                    )
                first_line[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml_text(text: str, source: str = "<text>") -> Any:
    """Parse ``text`` as YAML with the limits above.

    Raises:
        YamlInputError: one line naming ``source``, and the line at fault where known.
    """
    if len(text) > MAX_YAML_BYTES:
        raise YamlInputError(
            f"{source}: {len(text)} characters, more than the {MAX_YAML_BYTES} allowed for a config"
        )
    loader = _NoAliasLoader(text)
    try:
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
        loader.dispose()
