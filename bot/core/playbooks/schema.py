"""The playbook file format: the schema a playbook's YAML is validated against (and the
JSON Schema editors use), its parsing, and the checks across its fields.

Why this exists apart from `bot.core.playbooks.library`: validating takes pydantic, and reading
a file takes PyYAML and Jinja (a template is compiled to be checked); using a playbook
takes none of them. Each model here checks one part of the file and is turned into the
plain value of the same name in `bot.core.playbooks.library` (`_as_value`), so a library the
user's cache kept is read back, and a `pitcrew diagnose` runs, without loading them. A
bad playbook fails here with `file:line: field: reason`; nothing half-loaded is used.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

import jinja2
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from bot.core import linear
from bot.core.actions.specs import ACTION_SPECS, FACTS
from bot.core.errors import PlaybookError
from bot.core.model import SourceKind
from bot.core.playbooks import library as playbooks
from bot.core.playbooks.library import LoadedPlaybook
from bot.core.playbooks.templating import compile_template
from bot.core.taxonomy import Category

if TYPE_CHECKING:
    from bot.core.yamlsrc import Located

_ID = r"^[a-z0-9][a-z0-9-]*[a-z0-9]$"
_NAME = r"^[a-z0-9][a-z0-9_-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _check_regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as error:
        raise ValueError(f"regex does not compile: {error}") from None
    try:
        linear.check(value)
    except linear.LinearError as error:
        raise ValueError(f"regex {value!r}: {error}") from None
    return value


class Signature(_Strict):
    """One way a failure shows itself. Every condition given must hold."""

    name: str = Field(pattern=_NAME, description="unique within the playbook")
    sources: list[SourceKind] = Field(
        default_factory=list, description="where it may appear; empty means anywhere"
    )
    reason: str | None = Field(
        default=None, description="regex that must match the whole signal reason"
    )
    not_reason: str | None = Field(
        default=None, description="regex that must not match the whole signal reason"
    )
    fields: dict[str, str] = Field(
        default_factory=dict, description="field name -> regex matching the whole value"
    )
    regex: str | None = Field(
        default=None,
        description="regex searched in the text; named groups become captures; may span lines",
    )
    ignore_case: bool = False
    unless: list[str] = Field(
        default_factory=list, description="regexes; a match whose evidence matches one is benign"
    )
    weak: bool = Field(
        default=False,
        description="suggestive only: counts when a strong signature of the category matched too",
    )
    otherwise: Category | None = Field(
        default=None, description="the category a weak match alone is reported as (else dropped)"
    )
    suppressed_by: list[Category] = Field(
        default_factory=list, description="dropped when any of these categories is found too"
    )

    @field_validator("reason", "not_reason", "regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        return None if value is None else _check_regex(value)

    @field_validator("unless")
    @classmethod
    def _unless_compile(cls, values: list[str]) -> list[str]:
        return [_check_regex(v) for v in values]

    @field_validator("fields")
    @classmethod
    def _fields_compile(cls, values: dict[str, str]) -> dict[str, str]:
        for pattern in values.values():
            _check_regex(pattern)
        return values

    @model_validator(mode="after")
    def _has_a_condition(self) -> Signature:
        if self.reason is None and not self.fields and self.regex is None:
            raise ValueError("a signature needs at least one of reason, fields, regex")
        if self.otherwise is not None and not self.weak:
            raise ValueError("`otherwise` applies only to a weak signature")
        return self


class PrimaryGuard(_Strict):
    primary: Literal[True] = Field(description="offered only when this finding is the root cause")
    reason: str | None = None


class EvidenceGuard(_Strict):
    evidence_of: list[Category] = Field(min_length=1, description="one of these must be found")
    reason: str | None = None


class NoEvidenceGuard(_Strict):
    no_evidence_of: list[Category] = Field(min_length=1, description="none of these may be found")
    reason: str | None = None


class CaptureGuard(_Strict):
    capture: str = Field(description="a capture or signal field")
    matches: str | None = Field(default=None, description="regex the value must match")
    not_matches: str | None = Field(default=None, description="regex the value must not match")
    reason: str = Field(description="why the action is withheld when the guard fails")

    @field_validator("matches", "not_matches")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        return None if value is None else _check_regex(value)

    @model_validator(mode="after")
    def _one_test(self) -> CaptureGuard:
        if (self.matches is None) == (self.not_matches is None):
            raise ValueError("a capture guard needs exactly one of matches, not_matches")
        return self


class FactGuard(_Strict):
    fact: str = Field(description="a live fact checked against the cluster")
    reason: str | None = None

    @field_validator("fact")
    @classmethod
    def _known_fact(cls, value: str) -> str:
        if value not in FACTS:
            raise ValueError(f"unknown fact {value!r}; known: {', '.join(sorted(FACTS))}")
        return value


def _guard_kind(value: Any) -> str | None:
    if isinstance(value, Mapping):
        for key in ("primary", "evidence_of", "no_evidence_of", "capture", "fact"):
            if key in value:
                return key
    if isinstance(value, BaseModel):
        return {
            PrimaryGuard: "primary",
            EvidenceGuard: "evidence_of",
            NoEvidenceGuard: "no_evidence_of",
            CaptureGuard: "capture",
            FactGuard: "fact",
        }.get(type(value))
    return None


Guard = Annotated[
    Annotated[PrimaryGuard, Tag("primary")]
    | Annotated[EvidenceGuard, Tag("evidence_of")]
    | Annotated[NoEvidenceGuard, Tag("no_evidence_of")]
    | Annotated[CaptureGuard, Tag("capture")]
    | Annotated[FactGuard, Tag("fact")],
    Discriminator(
        _guard_kind,
        custom_error_type="unknown_guard",
        custom_error_message=(
            "a guard is one of primary, evidence_of, no_evidence_of, capture, fact"
        ),
    ),
]


class ActionRule(_Strict):
    """An action the playbook may offer; string params are templates over the finding."""

    action: str
    params: dict[str, str | int | float | bool] = Field(default_factory=dict)
    guards: list[Guard] = Field(default_factory=list)

    @field_validator("action")
    @classmethod
    def _known_action(cls, value: str) -> str:
        if value not in ACTION_SPECS:
            raise ValueError(f"unknown action {value!r}; known: {', '.join(sorted(ACTION_SPECS))}")
        return value

    @model_validator(mode="after")
    def _params_known(self) -> ActionRule:
        known = ACTION_SPECS[self.action].params.model_fields
        unknown = sorted(set(self.params) - set(known))
        if unknown:
            raise ValueError(
                f"{self.action} has no parameter {', '.join(unknown)}; it takes {', '.join(known)}"
            )
        return self


class EvidenceSpec(_Strict):
    max_lines: int = Field(default=5, ge=1, le=50)
    context_before: int = Field(default=0, ge=0, le=20)
    context_after: int = Field(default=0, ge=0, le=20)


class Expect(_Strict):
    match: bool = Field(
        description="this playbook must (or must not) produce a finding of its own; "
        "a finding listed only as another finding's symptom does not count as one"
    )
    symptom_of: Category | None = Field(
        default=None, description="the finding is listed as a symptom of this category"
    )
    captures: dict[str, str] = Field(default_factory=dict, description="a subset that must match")
    primary: Category | Literal["none"] | None = Field(
        default=None, description="the primary category of the whole example (`none`: no failure)"
    )
    offered: list[str] = Field(default_factory=list)
    withheld: list[str] = Field(default_factory=list)


class Example(_Strict):
    name: str = Field(min_length=1)
    input: str = Field(min_length=1, description="any input `pitcrew diagnose` accepts")
    expect: Expect


class Playbook(_Strict):
    """One failure class: how to recognise it, explain it and what may be done about it."""

    id: str = Field(pattern=_ID)
    title: str = Field(min_length=3, max_length=150)
    category: Category
    severity: Literal["info", "warning", "error", "critical"]
    description: str = ""
    match: list[Signature] = Field(min_length=1)
    unless: list[str] = Field(
        default_factory=list,
        description="regexes; a match of any signature whose evidence matches one is benign",
    )
    evidence: EvidenceSpec = Field(default_factory=EvidenceSpec)
    diagnosis: str = Field(min_length=1, description="Jinja2 template")
    remediation: list[str] = Field(default_factory=list, description="suggested steps for people")
    actions: list[ActionRule] = Field(default_factory=list)
    runbook: list[str] = Field(default_factory=list)
    examples: list[Example] = Field(min_length=1)

    @field_validator("unless")
    @classmethod
    def _unless_compile(cls, values: list[str]) -> list[str]:
        return [_check_regex(v) for v in values]

    @field_validator("diagnosis")
    @classmethod
    def _template_compiles(cls, value: str) -> str:
        try:
            compile_template(value)
        except jinja2.TemplateSyntaxError as error:
            raise ValueError(f"template line {error.lineno}: {error.message}") from None
        return value

    @field_validator("match")
    @classmethod
    def _unique_signature_names(cls, signatures: list[Signature]) -> list[Signature]:
        seen: set[str] = set()
        for signature in signatures:
            if signature.name in seen:
                raise ValueError(f"signature name {signature.name!r} is used twice")
            seen.add(signature.name)
        return signatures


class NoiseRule(_Strict):
    regex: str = Field(description="regex of a benign line: a candidate match on it is dropped")
    why: str

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return _check_regex(value)


class NoiseList(_Strict):
    """Benign lines (TAXONOMY.md §1.26): a candidate match on such a line is dropped."""

    noise: list[NoiseRule]


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
    if problem["type"] == "extra_forbidden":
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


_GUARD_TAGS = {"primary", "evidence_of", "no_evidence_of", "capture", "fact"}


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
        playbook = _as_value(Playbook.model_validate(document.data))
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
            if isinstance(guard, playbooks.CaptureGuard) and guard.capture not in names:
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


def parse_noise(text: str, source: str) -> tuple[playbooks.NoiseRule, ...]:
    """The benign-noise list from its file's text."""
    document = parse_document(text, source)
    try:
        return tuple(_as_value(NoiseList.model_validate(document.data).noise))
    except ValidationError as error:
        raise _validation_error(error, source, document) from None


def _as_value(value: Any) -> Any:
    """A validated model as the plain value of the same name in `bot.core.playbooks.library`
    (lists, mappings and what they hold likewise)."""
    if isinstance(value, BaseModel):
        kind = getattr(playbooks, type(value).__name__)
        return kind(**{name: _as_value(getattr(value, name)) for name in type(value).model_fields})
    if isinstance(value, list):
        return [_as_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_value(item) for key, item in value.items()}
    return value


def json_schema() -> dict[str, Any]:
    """The playbook schema for editors (`playbooks/schema.json`)."""
    schema = Playbook.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://pitcrew.dev/schemas/playbook.json"
    return schema


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
