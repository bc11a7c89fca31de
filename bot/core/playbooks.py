"""Playbooks: the schema, parsing a playbook's text, and the cross-checks.

A playbook is data (one YAML file) describing a failure class: what it looks
like, how to explain it, which remediations it may offer and under which
guards, and examples that prove it. A bad playbook fails at load with
`file:line: field: reason`; nothing half-loaded is ever used. Reading the
files (and the user's cache of what they make) is `bot.adapters.files.playbooks`;
this module takes their text and returns values.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, Literal

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
from bot.core.actions.catalog import CATALOG, FACTS
from bot.core.errors import PlaybookError
from bot.core.model import SourceKind
from bot.core.taxonomy import Category

if TYPE_CHECKING:
    from bot.core.yamlsrc import Located

NOISE_FILE = "noise.yaml"
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

    @property
    def captures(self) -> frozenset[str]:
        return frozenset(re.compile(self.regex).groupindex) if self.regex else frozenset()


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
        if value not in CATALOG:
            raise ValueError(f"unknown action {value!r}; known: {', '.join(sorted(CATALOG))}")
        return value

    @model_validator(mode="after")
    def _params_known(self) -> ActionRule:
        known = CATALOG[self.action].params.model_fields
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
        import jinja2  # Jinja is loaded to read a playbook's file, not to use a cached one

        from bot.core.templating import compile_template

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


@dataclass(frozen=True)
class LoadedPlaybook:
    playbook: Playbook
    source: str
    lines: Mapping[tuple[str | int, ...], int] = field(default_factory=dict)

    def line_of(self, *path: str | int) -> int | None:
        from bot.core.yamlsrc import Located

        return Located(None, dict(self.lines)).line_of(path)


@dataclass(frozen=True)
class Library:
    """A validated set of playbooks plus the benign-noise list."""

    playbooks: tuple[LoadedPlaybook, ...]
    noise: tuple[NoiseRule, ...] = ()
    # jinja's Python for the templates, by source, and the jinja that made it (see
    # `with_template_code`); empty for a library read from its files.
    template_code: Mapping[str, str] = field(default_factory=dict)
    jinja_version: str = ""

    @cached_property
    def by_id(self) -> dict[str, LoadedPlaybook]:
        return {p.playbook.id: p for p in self.playbooks}

    def actions_by_playbook(self) -> dict[str, tuple[str, ...]]:
        """The actions each playbook may offer (its `actions:`), by playbook id."""
        return {p.playbook.id: tuple(r.action for r in p.playbook.actions) for p in self.playbooks}

    def code_of(self, template: str) -> str | None:
        """jinja's Python for one of this library's templates, if kept by this jinja."""
        import jinja2  # loaded to compile the template this code is for

        if self.jinja_version != jinja2.__version__:
            return None
        return self.template_code.get(template)

    def __len__(self) -> int:
        return len(self.playbooks)


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
    """The one YAML mapping a playbook (or the noise list) file holds, with its lines.
    PyYAML is imported here: a cached library (see bot.adapters.files.playbooks) needs none."""
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
        playbook = Playbook.model_validate(document.data)
    except ValidationError as error:
        raise _validation_error(error, source, document) from None
    loaded = LoadedPlaybook(playbook, source, document.lines)
    _cross_check_playbook(loaded)
    return loaded


def _cross_check_playbook(loaded: LoadedPlaybook) -> None:
    import jinja2

    from bot.core.templating import compile_template

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
        return tuple(NoiseList.model_validate(document.data).noise)
    except ValidationError as error:
        raise _validation_error(error, source, document) from None


def with_template_code(library: Library) -> Library:
    """`library` carrying jinja's Python for every template it holds (diagnoses and
    action parameters): for a library kept in the user's cache."""
    import jinja2

    from bot.core.templating import template_code

    sources = {loaded.playbook.diagnosis for loaded in library.playbooks} | {
        value
        for loaded in library.playbooks
        for rule in loaded.playbook.actions
        for value in rule.params.values()
        if isinstance(value, str)
    }
    code = {source: template_code(source) for source in sorted(sources)}
    return replace(library, template_code=code, jinja_version=jinja2.__version__)


def assemble(playbooks: Iterable[LoadedPlaybook], noise: Iterable[NoiseRule] = ()) -> Library:
    """One library of playbooks with unique ids (a second one of an id is an error
    naming both files)."""
    kept: list[LoadedPlaybook] = []
    seen: dict[str, str] = {}
    for loaded in playbooks:
        pid = loaded.playbook.id
        if pid in seen:
            raise PlaybookError(
                loaded.source,
                str(loaded.line_of("id") or ""),
                f"id: {pid!r} is already defined in {seen[pid]}",
            )
        seen[pid] = loaded.source
        kept.append(loaded)
    return Library(tuple(kept), tuple(noise))


def json_schema() -> dict[str, Any]:
    """The playbook schema for editors (`playbooks/schema.json`)."""
    schema = Playbook.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://pitcrew.dev/schemas/playbook.json"
    return schema


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
