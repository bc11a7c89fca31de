"""YAML loading that remembers where each value came from, so errors can name a line.

Playbooks and config files are YAML written by people; when one is wrong the
message must say `file:line: field: reason`, which plain `yaml.safe_load` loses.
A key given twice in one mapping is an error naming both lines (plain YAML
loading keeps the last one silently).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Located:
    """A YAML document's data and the 1-based line of every key path in it."""

    data: Any
    lines: dict[Path_, int]

    def line_of(self, path: Path_) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one."""
        probe = tuple(path)
        while probe:
            if probe in self.lines:
                return self.lines[probe]
            probe = probe[:-1]
        return self.lines.get((), None)


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A mapping names the same key twice; marks the second, names the first's line."""


def load_located(text: str, source: str) -> list[Located]:
    """Every document in `text`, each with its line map. Raises yaml.YAMLError on bad YAML."""
    loader = yaml.SafeLoader(text)
    loader.name = source
    try:
        documents: list[Located] = []
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            lines: dict[Path_, int] = {}
            _walk(node, (), lines)
            documents.append(Located(loader.construct_document(node), lines))
        return documents
    finally:
        loader.dispose()


def _walk(node: yaml.Node, path: Path_, lines: dict[Path_, int]) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        first_lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            _refuse_duplicate(key_node, key, first_lines)
            child = (*path, key)
            _walk(value_node, child, lines)
            lines[child] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), lines)


def _refuse_duplicate(key_node: yaml.Node, key: str, first_lines: dict[str, int]) -> None:
    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
        return
    line = key_node.start_mark.line + 1
    if key in first_lines:
        problem = f"duplicate key {key!r} (lines {first_lines[key]} and {line})"
        raise DuplicateKeyError(problem=problem, problem_mark=key_node.start_mark)
    first_lines[key] = line


def describe_yaml_error(error: yaml.YAMLError) -> tuple[str, str]:
    """(line, reason) for a YAML syntax error."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    reason = f"{context}, {problem}" if context else str(problem)
    return (str(mark.line + 1) if mark is not None else "", f"invalid YAML: {reason}")
