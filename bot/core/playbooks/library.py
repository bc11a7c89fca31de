"""Playbooks as the core uses them: plain values, made from validated files.

A playbook is data (one YAML file) describing a failure class: what it looks
like, how to explain it, which remediations it may offer and under which
guards, and examples that prove it. Its schema, its parsing and the checks that
make a bad playbook fail at load with `file:line: field: reason` are
`bot.core.playbooks.schema`; what they make are the values here, which need
neither pydantic nor PyYAML nor Jinja, so a library kept in the user's cache
(`bot.adapters.files.playbooks`) is read back without them. Each class here has
the fields of the schema's model of the same name (a test holds them together).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal

from bot.core.errors import PlaybookError
from bot.core.model import SourceKind
from bot.core.taxonomy import Category

NOISE_FILE = "noise.yaml"


@dataclass(frozen=True, kw_only=True)
class Signature:
    """One way a failure shows itself. Every condition given must hold."""

    name: str
    sources: list[SourceKind] = field(default_factory=list)
    reason: str | None = None
    not_reason: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    regex: str | None = None
    ignore_case: bool = False
    unless: list[str] = field(default_factory=list)
    weak: bool = False
    otherwise: Category | None = None
    suppressed_by: list[Category] = field(default_factory=list)

    @property
    def captures(self) -> frozenset[str]:
        return frozenset(re.compile(self.regex).groupindex) if self.regex else frozenset()


@dataclass(frozen=True, kw_only=True)
class PrimaryGuard:
    """Offered only when this finding is the root cause."""

    primary: Literal[True]
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class EvidenceGuard:
    """Offered only when one of these categories is found too."""

    evidence_of: list[Category]
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class NoEvidenceGuard:
    """Offered only when none of these categories is found."""

    no_evidence_of: list[Category]
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class CaptureGuard:
    """Offered only when a capture or signal field matches (or does not match) a regex."""

    capture: str
    matches: str | None = None
    not_matches: str | None = None
    reason: str


@dataclass(frozen=True, kw_only=True)
class FactGuard:
    """Offered only when a live fact, checked against the cluster, holds."""

    fact: str
    reason: str | None = None


Guard = PrimaryGuard | EvidenceGuard | NoEvidenceGuard | CaptureGuard | FactGuard


@dataclass(frozen=True, kw_only=True)
class ActionRule:
    """An action the playbook may offer; string params are templates over the finding."""

    action: str
    params: dict[str, str | int | float | bool] = field(default_factory=dict)
    guards: list[Guard] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class EvidenceSpec:
    """How many evidence lines a finding keeps, with how much context."""

    max_lines: int = 5
    context_before: int = 0
    context_after: int = 0


@dataclass(frozen=True, kw_only=True)
class Expect:
    """What an example must produce."""

    match: bool
    symptom_of: Category | None = None
    captures: dict[str, str] = field(default_factory=dict)
    primary: Category | Literal["none"] | None = None
    offered: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Example:
    """An input of the playbook's own, and what diagnosing it must give."""

    name: str
    input: str
    expect: Expect


@dataclass(frozen=True, kw_only=True)
class Playbook:
    """One failure class: how to recognise it, explain it and what may be done about it."""

    id: str
    title: str
    category: Category
    severity: Literal["info", "warning", "error", "critical"]
    description: str = ""
    match: list[Signature]
    unless: list[str] = field(default_factory=list)
    evidence: EvidenceSpec = field(default_factory=EvidenceSpec)
    diagnosis: str
    remediation: list[str] = field(default_factory=list)
    actions: list[ActionRule] = field(default_factory=list)
    runbook: list[str] = field(default_factory=list)
    examples: list[Example]


@dataclass(frozen=True, kw_only=True)
class NoiseRule:
    """A benign line (TAXONOMY.md §1.26): a candidate match on it is dropped."""

    regex: str
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
