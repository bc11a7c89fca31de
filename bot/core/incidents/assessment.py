"""How an incident's findings are assessed: ranked, explained, and the actions they offer.

Why this exists apart from the correlator (`bot.core.incidents.correlator`), which
calls an `Assess` whenever an incident's set of findings changes: the daemon wraps it
in a time budget (`bot.daemon.budget`) and the wiring adjusts it with the configured
action values, neither of which is correlation. Each assessment's offers then go
through the same steps before a card shows them (`decided`): the live checks'
verdicts, what this pitcrew can finish, a plan's next step never before its change,
nothing for a failure whose cause is unknown, and KubeRay's own retries. Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

from bot.core.actions.facts import FactAnswer, settle
from bot.core.actions.order import held
from bot.core.actions.reach import Reach, within_reach
from bot.core.diagnosis import analysis
from bot.core.diagnosis.analysis import Facts, rank_findings
from bot.core.incidents import kuberay_retries
from bot.core.incidents.wrappers import unknown_withheld
from bot.core.model import Diagnosis, Finding, Incident, RayJobAttempt, Role
from bot.core.playbooks.library import Library


class Assess(Protocol):
    """Ranks an incident's findings and decides which actions are offered, with the
    live facts known so far."""

    def __call__(self, findings: Sequence[Finding], facts: Facts | None = None) -> Diagnosis: ...


def rank_only(findings: Sequence[Finding], facts: Facts | None = None) -> Diagnosis:
    """An assessment without a playbook library: precedence ranking, no actions."""
    ranked = rank_findings(findings)
    lines = [
        f"{'Root cause' if r.role is Role.PRIMARY else 'Also seen'}: {r.finding.title}"
        for r in ranked
    ]
    return Diagnosis(ranked, (), "\n".join(lines))


def assessor(library: Library, facts: Facts | None = None) -> Assess:
    """Ranking plus the library's offers and explanation, exactly as
    `bot.core.diagnosis.analysis` does for one input, re-run whenever an incident's set of
    findings changes."""
    known_facts: Facts = dict(facts or {})

    def assess(findings: Sequence[Finding], facts: Facts | None = None) -> Diagnosis:
        return analysis.assess(findings, library, {**known_facts, **(facts or {})})

    return assess


def adjusted(assess: Assess, adjust: Callable[[Diagnosis], Diagnosis]) -> Assess:
    """`assess`, each diagnosis then adjusted (with the configured action values,
    `bot.core.actions.tuning.tune`)."""

    def assess_adjusted(findings: Sequence[Finding], facts: Facts | None = None) -> Diagnosis:
        return adjust(assess(findings, facts))

    return assess_adjusted


def decided(
    diagnosis: Diagnosis,
    answer: FactAnswer,
    reach: Reach | None,
    attempts: Sequence[RayJobAttempt],
    incident: Incident,
) -> Diagnosis:
    """An assessment's offers decided for `incident`: KubeRay's retries first (`judged`:
    a fix aimed at a retried attempt's RayCluster aims at the RayJob, which is what the
    live checks were asked about), then the live checks' verdicts (`settle`), what this
    pitcrew can finish (`within_reach`), a plan's next step not before its change
    (`held`), and nothing for a failure whose cause is unknown (`unknown_withheld`)."""
    workload = str(incident.workload) if incident.workload else ""
    diagnosis = kuberay_retries.judged(diagnosis, attempts, incident.workload)
    diagnosis = within_reach(settle(diagnosis, answer), reach, incident.namespace, workload)
    offers = held(diagnosis.actions)
    if offers != diagnosis.actions:
        diagnosis = dataclasses.replace(diagnosis, actions=offers)
    return unknown_withheld(diagnosis)
