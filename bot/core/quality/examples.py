"""`pitcrew playbooks test`: run every playbook's own examples through the whole engine.

Each example is diagnosed exactly as `pitcrew diagnose` would (with the full
library loaded, so precedence and suppression between playbooks count), and
compared with what the example expects. A failure reads as a diff.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bot.core.diagnosis.engine import Engine
from bot.core.model import Diagnosis
from bot.core.playbooks.library import Example, LoadedPlaybook


@dataclass(frozen=True)
class ExampleResult:
    playbook: str
    source: str
    line: int | None
    name: str
    problems: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.problems


def run_examples(engine: Engine) -> Iterator[ExampleResult]:
    for loaded in engine.library.playbooks:
        for index, example in enumerate(loaded.playbook.examples):
            diagnosis = engine.diagnose_text(example.input, f"{loaded.playbook.id}#{index}")
            yield ExampleResult(
                loaded.playbook.id,
                loaded.source,
                loaded.line_of("examples", index),
                example.name,
                tuple(check_example(loaded, example, diagnosis)),
            )


def unrendered(playbook_id: str, diagnosis: Diagnosis) -> Iterator[str]:
    """The playbook's diagnosis template failed (or ran over its budget) for a finding."""
    for failure in diagnosis.unrendered:
        if failure.playbook == playbook_id:
            yield f"diagnosis template: {failure.reason}"


def check_example(loaded: LoadedPlaybook, example: Example, diagnosis: Diagnosis) -> Iterator[str]:
    playbook_id = loaded.playbook.id
    category = loaded.playbook.category
    ranked = [
        r
        for r in diagnosis.findings
        if r.finding.playbook == playbook_id and r.finding.category == category
    ]
    mine = [r.finding for r in ranked]
    own = [r for r in ranked if r.symptom_of is None]
    got = [
        f"{r.finding.playbook} ({r.finding.category}, {r.finding.strength} x{r.finding.count}"
        f"{', ' + r.role if r.role == 'secondary' else ''})"
        for r in own
    ]
    if mine:
        yield from unrendered(playbook_id, diagnosis)
    expect = example.expect
    if expect.match and not mine:
        yield f"expected a finding of {playbook_id}, got none; findings: {_all(diagnosis)}"
    if not expect.match and own:
        yield f"expected no finding of {playbook_id}, got {', '.join(got)}"
    if expect.symptom_of is not None:
        causes = [str(r.symptom_of) for r in ranked]
        if str(expect.symptom_of) not in causes:
            yield f"expected a symptom of {expect.symptom_of}, got symptom of {causes or 'none'}"
    captures: dict[str, str] = {}
    for finding in mine:
        for key, value in finding.captures.items():
            captures.setdefault(key, value)
    for key, want in expect.captures.items():
        have = captures.get(key)
        if have != want:
            yield f"capture {key}: expected {want!r}, got {have!r}"
    if expect.primary is not None:
        primary = diagnosis.primary
        have_primary = str(primary.category) if primary else "none"
        if have_primary != expect.primary:
            yield f"primary: expected {expect.primary}, got {have_primary}"
    offered = {a.action for a in diagnosis.actions if a.offered}
    for action in expect.offered:
        if action not in offered:
            reasons = [a.reason for a in diagnosis.actions if a.action == action]
            yield f"action {action}: expected offered, got {reasons or 'not considered'}"
    for action in expect.withheld:
        if action in offered:
            yield f"action {action}: expected withheld, got offered"
        elif not any(a.action == action for a in diagnosis.actions):
            yield f"action {action}: expected withheld with a reason, got not considered"


def _all(diagnosis: Diagnosis) -> str:
    names = [f"{r.finding.playbook}/{r.finding.category}" for r in diagnosis.findings]
    return ", ".join(names) or "none"
