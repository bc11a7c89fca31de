"""The failure-looking lines of an observation that no playbook knows, where they go.

Why this exists: such lines are the playbook a team should write next, so they are kept
by shape (`pitcrew unmatched`); and when they came with a failed workload whose cause
no playbook knows (only the wrappers say it failed: `bot.core.incidents.wrappers`),
they are the lines a person reads first, so they go on its card too
(`Correlator.unexplained`): a license server refusing connections, not the
entrypoint's exit code. The lines are read with the engine's own detector
(`Engine.unknown_lines`), on the classification budget; a line that is evidence of
the incident's findings (the wrapper's own) is not repeated as unknown.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from bot.core.diagnosis.unmatched import FailureLine, part_lines
from bot.core.errors import PitcrewError
from bot.core.incidents.correlator import Change, Correlator
from bot.core.incidents.workloads import key_of
from bot.core.incidents.wrappers import cause_unknown, says_only_it_failed
from bot.core.model import Incident, IncidentState
from bot.core.origins import short_source
from bot.daemon.budget import BudgetedClassifier
from bot.daemon.feed import Observation
from bot.daemon.ports import PipelineStore

log = logging.getLogger("pitcrew.pipeline")


class Unexplained:
    """Keeps an observation's unknown failure lines: by shape, and on the card of a
    failure whose cause is unknown."""

    def __init__(
        self, store: PipelineStore, correlator: Correlator, classifier: BudgetedClassifier
    ) -> None:
        self._store = store
        self._correlator = correlator
        self._classifier = classifier

    def keep(
        self, observation: Observation, touched: Mapping[str, Incident], now: datetime
    ) -> list[Change]:
        """Unmatched lines of an observation with no finding are kept by shape; the
        unknown lines of one that touched (or, with no finding, names the workload of) an
        open incident whose cause is unknown go to that incident: its changes."""
        incidents = [i for i in touched.values() if _unknown(i)]
        if not touched:
            self._keep_shapes(observation, now)
            home = self._home(observation)
            incidents = [home] if home is not None and _unknown(home) else []
        if not incidents:
            return []
        classifier = self._classifier
        parts = observation.parts
        found = classifier.budget.run(
            "classification", lambda: classifier.engine.unknown_lines(parts)
        )
        changes = []
        for incident in incidents:
            lines = _not_evidence(found, incident)
            change = self._correlator.unexplained(incident.id, lines, now) if lines else None
            if change is not None:
                changes.append(change)
        return changes

    def _keep_shapes(self, observation: Observation, now: datetime) -> None:
        lines = part_lines(observation.parts)
        if lines:
            try:
                self._store.record_unmatched(lines, now)
            except PitcrewError as error:
                log.warning("could not keep unmatched failures: %s", error)

    def _home(self, observation: Observation) -> Incident | None:
        """The open incident of the workload the observation's sender named, if any."""
        context = observation.context
        if context.workload is None:
            return None
        return self._correlator.find(key_of(context.cluster, context.workload))


def _unknown(incident: Incident) -> bool:
    return incident.state is IncidentState.OPEN and cause_unknown(incident.diagnosis)


def _not_evidence(lines: list[FailureLine], incident: Incident) -> list[str]:
    """`origin:line: text` of each line that is no evidence of the incident's findings
    and says more than that a container exited."""
    seen = [
        " ".join(e.text.split()) for r in incident.diagnosis.findings for e in r.finding.evidence
    ]
    shown = []
    for line in lines:
        text = " ".join(line.text.split())
        if says_only_it_failed(text) or any(
            text in known or known in text for known in seen if known
        ):
            continue
        origin = short_source(line.origin)
        shown.append(f"{origin}:{line.line}: {text}" if origin else text)
    return shown
