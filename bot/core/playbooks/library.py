"""A playbook: the one model of a failure class, as the core uses it and as its file says it.

A playbook is data (one YAML file) describing a failure class: what it looks like,
how to explain it, which remediations it may offer and under which guards, and
examples that prove it. Its values are the frozen dataclasses here, and so are its
rules: each field's constraints and description sit in its `metadata`, a rule of our
own in its type (`Check`, `OneOf`: `bot.core.validation`), a rule across fields in
`__post_init__`. `bot.core.playbooks.schema` reads a file into them (pydantic, PyYAML,
Jinja, loaded then) and says each problem as `file:line: field: reason`; a library kept
in the user's cache (`bot.adapters.files.playbooks`) is read back as these values,
checked when their file was read, without any of those packages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Literal, NamedTuple

from bot.core import linear
from bot.core.errors import PlaybookError
from bot.core.model import SourceKind
from bot.core.taxonomy import Category
from bot.core.validation import STRICT, Check, OneOf

if TYPE_CHECKING:
    from bot.core.actions.specs import ActionSpec

NOISE_FILE = "noise.yaml"
_ID = r"^[a-z0-9][a-z0-9-]*[a-z0-9]$"
_NAME = r"^[a-z0-9][a-z0-9_-]*$"


def regex_runs(value: str) -> str:
    """A regex that compiles and that RE2 runs in linear time (`bot.core.linear`)."""
    try:
        re.compile(value)
    except re.error as error:
        raise ValueError(f"regex does not compile: {error}") from None
    try:
        linear.check(value)
    except linear.LinearError as error:
        raise ValueError(f"regex {value!r}: {error}") from None
    return value


def template_compiles(value: str) -> str:
    """A Jinja template the sandbox compiles (Jinja is loaded to check it)."""
    import jinja2

    from bot.core.playbooks.templating import compile_template

    try:
        compile_template(value)
    except jinja2.TemplateSyntaxError as error:
        raise ValueError(f"template line {error.lineno}: {error.message}") from None
    return value


def _known_action(value: str) -> str:
    from bot.core.actions.specs import ACTION_SPECS  # checked when a playbook is parsed

    if value not in ACTION_SPECS:
        raise ValueError(f"unknown action {value!r}; known: {', '.join(sorted(ACTION_SPECS))}")
    return value


def _known_fact(value: str) -> str:
    from bot.core.actions.specs import FACTS

    if value not in FACTS:
        raise ValueError(f"unknown fact {value!r}; known: {', '.join(sorted(FACTS))}")
    return value


def _names_unique(signatures: list[Signature]) -> list[Signature]:
    seen: set[str] = set()
    for signature in signatures:
        if signature.name in seen:
            raise ValueError(f"signature name {signature.name!r} is used twice")
        seen.add(signature.name)
    return signatures


Regex = Annotated[str, Check(regex_runs)]


def _each_regex_runs(values: dict[str, str]) -> dict[str, str]:
    for pattern in values.values():
        regex_runs(pattern)
    return values


# Alertmanager's matcher syntax (pkg/labels/parse.go): name, operator, quoted value.
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')


class LabelMatcher(NamedTuple):
    """`name="v"`, `name!="v"`, `name=~"re"`, `name!~"re"`: a label missing is ""."""

    name: str
    op: str
    value: str

    @property
    def regex(self) -> str:
        """The whole-value regex the matcher's value is (an equality's, escaped)."""
        return self.value if "~" in self.op else re.escape(self.value)

    @property
    def negated(self) -> bool:
        return self.op.startswith("!")


def label_matcher(text: str) -> LabelMatcher:
    """A matcher as Alertmanager's routes and silences write it; raises ValueError."""
    found = _MATCHER.fullmatch(text)
    if found is None:
        raise ValueError(
            f'label matcher {text!r}: expected name="value", name!="value", '
            'name=~"regex" or name!~"regex"'
        )
    name, op, quoted = found.groups()
    matcher = LabelMatcher(name, op, re.sub(r"\\(.)", r"\1", quoted))
    try:
        regex_runs(matcher.regex)
    except ValueError as error:
        raise ValueError(f"label matcher {text!r}: {error}") from None
    return matcher


def _matcher_reads(text: str) -> str:
    label_matcher(text)
    return text


@dataclass(frozen=True, kw_only=True)
class AlertMatch:
    """What an Alertmanager alert (source `alert`) must look like: its name, its labels
    as Alertmanager's own matchers, its annotations. Every condition given must hold."""

    __pydantic_config__ = STRICT

    alertname: Regex | None = field(
        default=None, metadata={"description": "regex that must match the alert's whole name"}
    )
    labels: list[Annotated[str, Check(_matcher_reads)]] = field(
        default_factory=list,
        metadata={
            "description": 'label selectors as Alertmanager writes them: name="value", '
            'name!="value", name=~"regex", name!~"regex" (anchored; a missing label is "")'
        },
    )
    annotations: dict[str, Regex] = field(
        default_factory=dict,
        metadata={"description": "annotation name -> regex searched in its text"},
    )

    def __post_init__(self) -> None:
        if self.alertname is None and not self.labels and not self.annotations:
            raise ValueError("an alert match needs at least one of alertname, labels, annotations")

    @property
    def matchers(self) -> tuple[LabelMatcher, ...]:
        return tuple(label_matcher(text) for text in self.labels)


@dataclass(frozen=True, kw_only=True)
class Signature:
    """One way a failure shows itself. Every condition given must hold."""

    __pydantic_config__ = STRICT

    name: str = field(metadata={"pattern": _NAME, "description": "unique within the playbook"})
    sources: list[SourceKind] = field(
        default_factory=list, metadata={"description": "where it may appear; empty means anywhere"}
    )
    reason: Regex | None = field(
        default=None, metadata={"description": "regex that must match the whole signal reason"}
    )
    not_reason: Regex | None = field(
        default=None,
        metadata={"description": "regex that must not match the whole signal reason"},
    )
    fields: Annotated[dict[str, str], Check(_each_regex_runs)] = field(
        default_factory=dict,
        metadata={"description": "field name -> regex matching the whole value"},
    )
    regex: Regex | None = field(
        default=None,
        metadata={
            "description": "regex searched in the text; named groups become captures; "
            "may span lines"
        },
    )
    ignore_case: bool = False
    unless: list[Regex] = field(
        default_factory=list,
        metadata={"description": "regexes; a match whose evidence matches one is benign"},
    )
    weak: bool = field(
        default=False,
        metadata={
            "description": "suggestive only: counts when a strong signature of the "
            "category matched too"
        },
    )
    otherwise: Category | None = field(
        default=None,
        metadata={"description": "the category a weak match alone is reported as (else dropped)"},
    )
    suppressed_by: list[Category] = field(
        default_factory=list,
        metadata={"description": "dropped when any of these categories is found too"},
    )
    same_event: bool = field(
        default=False,
        metadata={
            "description": "with `suppressed_by`: a match one of those categories explains "
            "was that category's own evidence (a task's OutOfMemoryError is no worker death), "
            "so it is dropped, never kept as its symptom"
        },
    )
    alert: AlertMatch | None = field(
        default=None,
        metadata={
            "description": "an Alertmanager alert's name, labels and annotations; "
            "the signature then matches alerts only"
        },
    )

    def __post_init__(self) -> None:
        if self.reason is None and not self.fields and self.regex is None and self.alert is None:
            raise ValueError("a signature needs at least one of reason, fields, regex, alert")
        if self.otherwise is not None and not self.weak:
            raise ValueError("`otherwise` applies only to a weak signature")
        if self.alert is not None and (self.reason is not None or self.not_reason is not None):
            raise ValueError("an alert's name is `alert.alertname`, not `reason`")
        if self.alert is not None and set(self.sources) - {SourceKind.ALERT}:
            raise ValueError("a signature with `alert` matches alerts only: sources: [alert]")

    @property
    def captures(self) -> frozenset[str]:
        return frozenset(re.compile(self.regex).groupindex) if self.regex else frozenset()


@dataclass(frozen=True, kw_only=True)
class PrimaryGuard:
    """Offered only when this finding is the root cause."""

    __pydantic_config__ = STRICT

    primary: Literal[True] = field(
        metadata={"description": "offered only when this finding is the root cause"}
    )
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class EvidenceGuard:
    """Offered only when one of these categories is found too."""

    __pydantic_config__ = STRICT

    evidence_of: list[Category] = field(
        metadata={"min_length": 1, "description": "one of these must be found"}
    )
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class NoEvidenceGuard:
    """Offered only when none of these categories is found."""

    __pydantic_config__ = STRICT

    no_evidence_of: list[Category] = field(
        metadata={"min_length": 1, "description": "none of these may be found"}
    )
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class CaptureGuard:
    """Offered only when a capture or signal field matches (or does not match) a regex."""

    __pydantic_config__ = STRICT

    capture: str = field(metadata={"description": "a capture or signal field"})
    matches: Regex | None = field(
        default=None, metadata={"description": "regex the value must match"}
    )
    not_matches: Regex | None = field(
        default=None, metadata={"description": "regex the value must not match"}
    )
    reason: str = field(metadata={"description": "why the action is withheld when the guard fails"})

    def __post_init__(self) -> None:
        if (self.matches is None) == (self.not_matches is None):
            raise ValueError("a capture guard needs exactly one of matches, not_matches")


@dataclass(frozen=True, kw_only=True)
class FactGuard:
    """Offered only when a live fact, checked against the cluster, holds."""

    __pydantic_config__ = STRICT

    fact: Annotated[str, Check(_known_fact)] = field(
        metadata={"description": "a live fact checked against the cluster"}
    )
    reason: str | None = None

    @property
    def said(self) -> str:
        """The fact in words (`bot.core.actions.specs.FACTS`)."""
        from bot.core.actions.specs import FACTS

        return FACTS[self.fact]


Guard = PrimaryGuard | EvidenceGuard | NoEvidenceGuard | CaptureGuard | FactGuard
GUARDS = OneOf(
    {
        "primary": PrimaryGuard,
        "evidence_of": EvidenceGuard,
        "no_evidence_of": NoEvidenceGuard,
        "capture": CaptureGuard,
        "fact": FactGuard,
    },
    "a guard is one of primary, evidence_of, no_evidence_of, capture, fact",
)


@dataclass(frozen=True, kw_only=True)
class ActionRule:
    """An action the playbook may offer; string params are templates over the finding."""

    __pydantic_config__ = STRICT

    action: Annotated[str, Check(_known_action)]
    params: dict[str, str | int | float | bool] = field(default_factory=dict)
    guards: list[Annotated[Guard, GUARDS]] = field(default_factory=list)

    def __post_init__(self) -> None:
        from bot.core.actions.specs import ACTION_SPECS  # not for a library read back

        spec = ACTION_SPECS.get(self.action)
        known = spec.params.names() if spec else ()
        unknown = sorted(set(self.params) - set(known))
        if spec and unknown:
            raise ValueError(
                f"{self.action} has no parameter {', '.join(unknown)}; it takes {', '.join(known)}"
            )

    @property
    def spec(self) -> ActionSpec:
        """What pitcrew knows of the action: its parameters, preview and summary."""
        from bot.core.actions.specs import ACTION_SPECS  # the actions' modules: for offers

        return ACTION_SPECS[self.action]


@dataclass(frozen=True, kw_only=True)
class EvidenceSpec:
    """How many evidence lines a finding keeps, with how much context."""

    __pydantic_config__ = STRICT

    max_lines: int = field(default=5, metadata={"ge": 1, "le": 50})
    context_before: int = field(default=0, metadata={"ge": 0, "le": 20})
    context_after: int = field(default=0, metadata={"ge": 0, "le": 20})


@dataclass(frozen=True, kw_only=True)
class Expect:
    """What an example must produce."""

    __pydantic_config__ = STRICT

    match: bool = field(
        metadata={
            "description": "this playbook must (or must not) produce a finding of its own; "
            "a finding listed only as another finding's symptom does not count as one"
        }
    )
    symptom_of: Category | None = field(
        default=None,
        metadata={"description": "the finding is listed as a symptom of this category"},
    )
    captures: dict[str, str] = field(
        default_factory=dict, metadata={"description": "a subset that must match"}
    )
    primary: Category | Literal["none"] | None = field(
        default=None,
        metadata={"description": "the primary category of the whole example (`none`: no failure)"},
    )
    offered: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Example:
    """An input of the playbook's own, and what diagnosing it must give."""

    __pydantic_config__ = STRICT

    name: str = field(metadata={"min_length": 1})
    input: str = field(
        metadata={"min_length": 1, "description": "any input `pitcrew diagnose` accepts"}
    )
    expect: Expect


@dataclass(frozen=True, kw_only=True)
class Playbook:
    """One failure class: how to recognise it, explain it and what may be done about it."""

    __pydantic_config__ = STRICT

    id: str = field(metadata={"pattern": _ID})
    title: str = field(metadata={"min_length": 3, "max_length": 150})
    category: Category
    severity: Literal["info", "warning", "error", "critical"]
    description: str = ""
    match: Annotated[list[Signature], Check(_names_unique)] = field(metadata={"min_length": 1})
    unless: list[Regex] = field(
        default_factory=list,
        metadata={
            "description": "regexes; a match of any signature whose evidence matches one is benign"
        },
    )
    evidence: EvidenceSpec = field(default_factory=EvidenceSpec)
    diagnosis: Annotated[str, Check(template_compiles)] = field(
        metadata={"min_length": 1, "description": "Jinja2 template"}
    )
    remediation: list[str] = field(
        default_factory=list, metadata={"description": "suggested steps for people"}
    )
    actions: list[ActionRule] = field(default_factory=list)
    runbook: list[str] = field(default_factory=list)
    examples: list[Example] = field(metadata={"min_length": 1})


@dataclass(frozen=True, kw_only=True)
class NoiseRule:
    """A benign line (docs/failure-classes.md, "Benign noise"): a candidate match on it is
    dropped."""

    __pydantic_config__ = STRICT

    regex: Regex = field(
        metadata={"description": "regex of a benign line: a candidate match on it is dropped"}
    )
    why: str


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


def with_template_code(library: Library) -> Library:
    """`library` carrying jinja's Python for every template it holds (diagnoses and
    action parameters): for a library kept in the user's cache."""
    import jinja2

    from bot.core.playbooks.templating import template_code

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
