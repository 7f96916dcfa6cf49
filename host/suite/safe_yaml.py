"""The one loader for YAML from users (waiver files, scenario files, the clause catalogue).

YAML aliases let a few hundred bytes stand for millions of nodes. The document is composed first,
its size after alias expansion counted (each alias counts the whole node it names), and it is
refused past limit `yaml_nodes`, before any value is built; files past limit `yaml_bytes` are not
read. Both refusals are `YamlRefused`, a `yaml.YAMLError`, so every caller's one-line message applies.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from floor.limits import limit, over
from floor.safe_io import read_regular

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlRefused(yaml.YAMLError):
    """The YAML is over a limit of the kit (size, or nodes after alias expansion)."""


def _expanded_size(root: yaml.Node, bound: int) -> int:
    """Nodes in the document with every alias expanded; stops counting once past `bound`."""
    plain = _tree_size(root, bound)
    return plain if plain is not None else _shared_size(root, bound)


def _tree_size(root: yaml.Node, bound: int) -> int | None:
    """The node count of a document in which no node is reached twice (no alias: every scenario file),
    or None as soon as one is, or the count is past `bound`, so the full expansion must decide."""
    seen: set[int] = set()
    stack: list[yaml.Node] = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            return None
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append(key)
                stack.append(value)
        if len(seen) > bound:
            return None
    return len(seen)


def _shared_size(root: yaml.Node, bound: int) -> int:
    """`_expanded_size` for a document with aliases: each alias counts the whole node it names."""
    sizes: dict[int, int] = {}
    # iterative post-order walk; a node seen again (an alias) reuses its computed size
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    active: set[int] = set()
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if key in sizes and not expanded:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if not expanded:
            if key in active:
                return bound + 1  # a node that contains itself expands without end
            active.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        active.discard(key)
        total = 1
        for child in children:
            total += sizes.get(id(child), bound + 1)
            if total > bound:
                return bound + 1
        sizes[key] = total
    return sizes.get(id(root), bound + 1)


def load_yaml_text(text: str, source: str) -> object:
    """Parse one YAML document from a user, within limit `yaml_nodes`."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        bound = limit("yaml_nodes")
        size = _expanded_size(node, bound)
        if size > bound:
            raise YamlRefused(over("yaml_nodes", f"{source} expands to more than {bound} nodes (aliases counted)"))
        try:
            return loader.construct_document(node)
        except ValueError as exc:
            # a well-formed value YAML cannot build, such as the timestamp 2026-13-01
            raise yaml.YAMLError(f"a value that cannot be read ({exc})") from None
    finally:
        loader.dispose()


def read_yaml_bytes(path: Path) -> bytes:
    """The bytes of a YAML file from a user, within limit `yaml_bytes` (OSError as is)."""
    bound = limit("yaml_bytes")
    data = read_regular(path, bound)  # a FIFO or a device is refused, never waited on or read without end
    if len(data) > bound:
        raise YamlRefused(over("yaml_bytes", f"{path} is larger than {bound} bytes"))
    return data


def load_yaml_file(path: Path) -> object:
    """Read and parse a YAML file from a user, within limits `yaml_bytes` and `yaml_nodes` (OSError as is)."""
    return load_yaml_text(read_yaml_bytes(path).decode("utf-8", errors="replace"), str(path))
