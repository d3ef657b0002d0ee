"""Strict YAML loading for every YAML the project reads (vendor configs, simulator profiles, threshold
presets): a key given twice in one mapping is an error, aliases cannot expand without bound, and every
problem is an InputError naming the file and the line. Layer: inputs (a leaf: the simulator uses it too).

Alias limit: a document whose aliases would expand it to more than :data:`MAX_YAML_NODES` nodes is refused
(the "billion laughs": 698 bytes of nested aliases in an ``extra_body`` expanded to 2.3 GB). Each node counts
once, and each alias counts the whole subtree it repeats, every time it appears (sizes memoised per node, so
counting is linear in the file). An alias to a collection that contains it is refused too: inputs are JSON-like.
"""

from __future__ import annotations

import yaml

from avv_core.errors import InputError
from avv_core.json_types import JSONValue

#: The most nodes a YAML document may expand to through its aliases (scalars, lists and mappings).
MAX_YAML_NODES = 100_000


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently,
    which dropped a whole model's vendors when a config had two blocks of the same model) and aliases that
    expand the document past :data:`MAX_YAML_NODES`."""

    def __init__(self, stream: object) -> None:
        super().__init__(stream)
        self._expanded = 0  # nodes of the document as its aliases expand it
        self._sizes: dict[int, int] = {}  # id(node) → nodes in its expanded subtree

    def compose_node(self, parent: object, index: object) -> yaml.Node:
        alias = self.peek_event() if self.check_event(yaml.AliasEvent) else None
        node = super().compose_node(parent, index)
        if alias is None:
            self._expanded += 1
            return node
        if isinstance(node, yaml.CollectionNode) and node.end_mark is None:  # still being composed
            raise InputError(f"line {alias.start_mark.line + 1}: alias *{alias.anchor} is inside the node it "
                             "refers to (a recursive structure)")
        self._expanded += self._size(node)
        if self._expanded > MAX_YAML_NODES:
            raise InputError(f"line {alias.start_mark.line + 1}: alias *{alias.anchor} expands the document past "
                             f"{MAX_YAML_NODES:,} nodes (an alias bomb?)")
        return node

    def _size(self, node: object) -> int:
        size = self._sizes.get(id(node))
        if size is None:
            size = 1
            if isinstance(node, yaml.SequenceNode):
                size += sum(self._size(child) for child in node.value)
            elif isinstance(node, yaml.MappingNode):
                size += sum(self._size(key) + self._size(value) for key, value in node.value)
            self._sizes[id(node)] = size
        return size


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> JSONValue:
    seen: dict[str | int | float | bool, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: merged keys may be overridden here
            continue
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, (str, int, float, bool)) and key in seen:
            raise InputError(f"line {key_node.start_mark.line + 1}: key {key!r} appears twice in one mapping "
                             f"(first on line {seen[key]})")
        if isinstance(key, (str, int, float, bool)):
            seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def load_yaml(path: str, what: str) -> JSONValue:
    """Parse a YAML file strictly (module docstring); InputError naming the file and line."""
    try:
        with open(path, encoding="utf-8") as fh:
            return _load(fh, path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what} ({exc.strerror})") from None


def loads_yaml(text: str, where: str) -> JSONValue:
    """Parse YAML text strictly (module docstring); InputError naming ``where`` (a file, an option) and line."""
    return _load(text, where)


def _load(stream: object, where: str) -> JSONValue:
    try:
        return yaml.load(stream, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    except RecursionError:  # PyYAML composes and constructs recursively
        raise InputError(f"{where}: nested too deeply to read") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}" if mark else "?"
        raise InputError(f"{where}: {at}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
