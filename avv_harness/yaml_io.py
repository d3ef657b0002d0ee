"""Strict YAML loading for the inputs: a key given twice in one mapping is an error, and every problem is an
InputError naming the file and the line. Layer: inputs.
"""

from __future__ import annotations

from typing import Any

import yaml

from .errors import InputError


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently,
    which dropped a whole model's vendors when a config had two blocks of the same model)."""


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, (str, int, float, bool)) and key in seen:
            raise InputError(f"line {key_node.start_mark.line + 1}: key {key!r} appears twice in one mapping "
                             f"(first on line {seen[key]})")
        if isinstance(key, (str, int, float, bool)):
            seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def load_yaml(path: str, what: str) -> Any:
    """Parse a YAML file strictly (duplicate keys are errors); InputError naming the file and line."""
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.load(fh, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what} ({exc.strerror})") from None
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "?"
        raise InputError(f"{path}: {where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
