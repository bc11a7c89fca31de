"""A YAML document read with the line of every key, so a problem in a playbook or a
config is said at its line; a key given twice and bad YAML are refused with theirs."""

from __future__ import annotations

import pytest
import yaml

from bot.core.yamlsrc import describe_yaml_error, load_located

PLAYBOOK = """\
id: p
match:
  - name: one
    regex: x
  - name: two
    fields:
      reason: OOMKilled
"""


@pytest.mark.parametrize(
    ("path", "line"),
    [
        (("id",), 1),
        (("match",), 2),
        (("match", 0), 3),
        (("match", 1, "fields", "reason"), 7),
        (("match", 1, "fields", "nowhere"), 6),  # the nearest key that is there
        (("colour",), 1),
    ],
)
def test_every_key_path_has_its_line(path: tuple[str | int, ...], line: int) -> None:
    (document,) = load_located(PLAYBOOK, "p.yaml")
    assert document.line_of(path) == line


def test_several_documents_each_keep_their_own_lines() -> None:
    first, second = load_located("a: 1\n---\nb: 2\n", "two.yaml")
    assert (first.data, first.line_of(("a",)), second.data, second.line_of(("b",))) == (
        {"a": 1},
        1,
        {"b": 2},
        3,
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("id: a\ntitle: t\nid: b\n", ("3", "invalid YAML: duplicate key 'id' (lines 1 and 3)")),
        ("id: a\n  b: [\n", ("2", "invalid YAML: mapping values are not allowed here")),
    ],
)
def test_bad_yaml_is_said_with_its_line(text: str, said: tuple[str, str]) -> None:
    with pytest.raises(yaml.YAMLError) as refused:
        load_located(text, "p.yaml")
    assert describe_yaml_error(refused.value) == said
