"""A playbook file read into the one playbook model (`bot.core.playbooks.library`): its
YAML parsed with each value's line, the data checked into the model, every problem said
as `file:line: field: reason`, the checks across fields that need the file's lines, and
the JSON Schema editors use (`playbooks/schema.json`).

Why this exists apart from the model: reading a file takes PyYAML, pydantic (to check
the data, `bot.core.validation`) and Jinja (a template is compiled to be checked); using
a playbook takes none of them, so a library the user's cache kept is read back, and a
`pitcrew diagnose` runs, without loading them. Nothing half-loaded is used.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jinja2
from pydantic import ValidationError

from bot.core.errors import PlaybookError
from bot.core.playbooks.library import (
    GUARDS,
    CaptureGuard,
    LoadedPlaybook,
    NoiseRule,
    Playbook,
)
from bot.core.playbooks.templating import compile_template
from bot.core.validation import STRICT, json_schema, validate

if TYPE_CHECKING:
    from bot.core.yamlsrc import Located


@dataclass(frozen=True, kw_only=True)
class NoiseList:
    """The benign-noise file (`noise.yaml`): its one key, the rules."""

    __pydantic_config__ = STRICT

    noise: list[NoiseRule] = field(
        metadata={"description": "benign lines: a candidate match on one is dropped"}
    )


def _format_loc(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _validation_error(error: ValidationError, source: str, doc: Located) -> PlaybookError:
    """All problems, one per line, each as `file:line: field: reason`."""
    problems = [_describe_problem(problem, doc) for problem in error.errors()[:MAX_PROBLEMS]]
    first_line, first_reason = problems[0]
    rest = [
        f"{source}:{line}: {reason}" if line else f"{source}: {reason}"
        for line, reason in problems[1:]
    ]
    more = len(error.errors()) - MAX_PROBLEMS
    if more > 0:
        rest.append(f"{source}: … and {more} more problems")
    return PlaybookError(source, first_line, "\n".join([first_reason, *rest]))


MAX_PROBLEMS = 10


def _describe_problem(problem: Any, doc: Located) -> tuple[str, str]:
    loc = _without_union_tags(tuple(problem["loc"]))
    line = doc.line_of(loc)
    message = str(problem["msg"]).removeprefix("Value error, ")
    if problem["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        message = "unknown key"
    elif problem["type"] == "missing":
        message = "required key is missing"
    elif problem["type"] in ("enum", "literal_error"):
        message = _enum_message(problem)
    where = str(line) if line else ""
    return where, f"{_format_loc(loc)}: {message}" if loc else message


def _enum_message(problem: Any) -> str:
    """`'pod_oom_kiled' is not a category; did you mean 'pod_oom_killed'?` rather than
    every allowed value, when one is close."""
    allowed = re.findall(r"'([^']*)'", str(problem.get("ctx", {}).get("expected", "")))
    given = str(problem.get("input", ""))
    close = difflib.get_close_matches(given, allowed, n=1, cutoff=0.75)
    if close:
        return f"{given!r} is not one of the allowed values; did you mean {close[0]!r}?"
    return str(problem["msg"])


_GUARD_TAGS = set(GUARDS.members)


def _without_union_tags(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """Pydantic puts the guard's union tag in the location (`guards.0.fact.fact`); drop it."""
    out: list[str | int] = []
    for index, part in enumerate(loc):
        after_guard = index >= 2 and loc[index - 2] == "guards" and isinstance(loc[index - 1], int)
        if after_guard and part in _GUARD_TAGS:
            continue
        out.append(part)
    return tuple(out)


def parse_document(text: str, source: str) -> Located:
    """The one YAML mapping a playbook (or the noise list) file holds, with its lines."""
    import yaml

    from bot.core.yamlsrc import describe_yaml_error, load_located

    try:
        documents = load_located(text, source)
    except yaml.YAMLError as error:
        line, reason = describe_yaml_error(error)
        raise PlaybookError(source, line, reason) from None
    if len(documents) != 1 or not isinstance(documents[0].data, dict):
        raise PlaybookError(source, "1", "expected exactly one YAML mapping")
    return documents[0]


def parse_playbook(text: str, source: str) -> LoadedPlaybook:
    """A playbook from its file's text (`source` names the file in errors)."""
    document = parse_document(text, source)
    try:
        playbook = validate(Playbook, document.data)
    except ValidationError as error:
        raise _validation_error(error, source, document) from None
    loaded = LoadedPlaybook(playbook, source, document.lines)
    _cross_check_playbook(loaded)
    return loaded


def _cross_check_playbook(loaded: LoadedPlaybook) -> None:
    playbook = loaded.playbook
    names = {c for s in playbook.match for c in s.captures} | {
        f for s in playbook.match for f in s.fields
    }
    for a_index, rule in enumerate(playbook.actions):
        for g_index, guard in enumerate(rule.guards):
            if isinstance(guard, CaptureGuard) and guard.capture not in names:
                raise PlaybookError(
                    loaded.source,
                    str(loaded.line_of("actions", a_index, "guards", g_index) or ""),
                    f"actions[{a_index}].guards[{g_index}].capture: {guard.capture!r} is "
                    "not a named group or field of any signature",
                )
        for key, value in rule.params.items():
            if isinstance(value, str):
                try:
                    compile_template(value)
                except jinja2.TemplateSyntaxError as error:
                    raise PlaybookError(
                        loaded.source,
                        str(loaded.line_of("actions", a_index, "params", key) or ""),
                        f"actions[{a_index}].params.{key}: template: {error.message}",
                    ) from None


def parse_noise(text: str, source: str) -> tuple[NoiseRule, ...]:
    """The benign-noise list from its file's text."""
    document = parse_document(text, source)
    try:
        return tuple(validate(NoiseList, document.data).noise)
    except ValidationError as error:
        raise _validation_error(error, source, document) from None


def playbook_json_schema() -> dict[str, Any]:
    """The playbook schema for editors (`playbooks/schema.json`)."""
    schema = json_schema(Playbook)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://pitcrew.dev/schemas/playbook.json"
    return schema


def json_schema_text() -> str:
    return json.dumps(playbook_json_schema(), indent=2, sort_keys=True) + "\n"
