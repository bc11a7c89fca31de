"""Live checks: the one way pitcrew asks a cluster for the facts a withheld action waits
on, and the daemon's workers that do it off the pipeline thread.

Why this exists: a live fact (is this actor still alive, does the node pool have room)
is never fetched inside the core or on the pipeline thread (docs/design.md, "Live
facts"). The core names the offers that wait on one (`bot.core.actions.facts.awaiting`,
keyed on `ActionOffer.pending_fact`); here they are checked:

- `ask` runs each offer's check and merges what they found into one `FactAnswer`,
  naming the actions whose check failed (what an exception means is the action seam's
  one policy, `bot.daemon.executor.outcome_of`: a bug is logged with its traceback,
  counted, and withholds the offer);
- `LiveChecks` is the daemon's: `request` returns at once, a worker (`OffThread`)
  runs `ask`, and the answer (or, past the timeout, "did not answer within N s") goes
  back on the pipeline's queue as a `LiveFacts` item for the incident's next assessment;
- `decide` is the same rule for callers that may wait (`pitcrew diagnose --kube`,
  `--ray-job`, `/pitcrew diagnose`): ask, then assess the evidence again with the
  answer, offers whose check gave no answer withheld with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.actions.approvals import LiveCheck
from bot.core.actions.facts import (
    FactAnswer,
    awaiting,
    merged,
    offer_key,
    refusal,
    settle,
    to_confirm,
)
from bot.core.actions.step import Step
from bot.core.diagnosis.analysis import Facts
from bot.core.model import ActionOffer, ActionResult, Diagnosis
from bot.daemon.executor import Registry, Stage, checked, outcome_of
from bot.daemon.feed import LiveFacts
from bot.daemon.metrics import Metrics
from bot.daemon.offthread import OffThread
from bot.daemon.ports import Executor, Sink

log = logging.getLogger("pitcrew.live")

Check = Callable[[ActionOffer], LiveCheck]
"""One action's live check of an offer: the facts found, the live preview (what the
check saw), and why a fact does not hold. Raises when it cannot tell."""

DEFAULT_TIMEOUT = 5.0


@dataclass(frozen=True)
class Checked:
    """What `ask` found: the answer, and each checked offer's note by `offer_key`."""

    answer: FactAnswer
    notes: Mapping[tuple[str, str], str] = field(default_factory=dict)


def ask(
    offers: Iterable[ActionOffer], checks: Mapping[str, Check], metrics: Metrics | None = None
) -> Checked:
    """Each offer's check, by its action; an action without a check is not asked. A
    fact two checks disagree on is false; a check that raises names the action in the
    answer's problems (a waiting offer is then withheld with the reason, an offered one
    stays: approval checks again), unless it met a pitcrew bug (`outcome_of`: logged,
    counted in `metrics`), which withholds an offered one too; an offered action whose
    precondition is false now is refused with the check's reason."""
    found: list[Mapping[str, bool]] = []
    problems: dict[str, str] = {}
    refused: dict[tuple[str, str], str] = {}
    notes: dict[tuple[str, str], str] = {}
    for offer in offers:
        check = checks.get(offer.action)
        if check is None:
            continue
        try:
            found_now = check(offer)
        except Exception as error:
            what = f"the live check of {offer.action}"
            result, text = outcome_of(error, Stage.LIVE_CHECK, what, metrics)
            problems[offer.action] = f"the live check could not tell: {text}"
            if result is ActionResult.BUG:
                refused[offer_key(offer)] = problems[offer.action]
            else:  # the world did not answer: the offer stays as it was
                log.warning("live check of %s failed: %s", offer.action, text)
            continue
        found.append(found_now.facts)
        notes[offer_key(offer)] = found_now.diff or found_now.preview or ""
        why = refusal(offer, found_now)
        if why:
            refused[offer_key(offer)] = why
    return Checked(FactAnswer(merged(found), problems, refused), notes)


def decide(
    first: Diagnosis,
    reassess: Callable[[Facts], Diagnosis],
    checks: Mapping[str, Check],
    also: Sequence[ActionOffer] = (),
) -> tuple[Diagnosis, Checked]:
    """For callers that may wait: the offers of `first` waiting on a live fact and the
    offered ones to confirm (and `also`, checked for their notes) asked, and the
    evidence assessed again with the facts found (`reassess`); offers whose check gave
    no answer stay withheld, saying why, and offered ones the check refused are
    withheld with its reason."""
    asked = {offer_key(o): o for o in (*awaiting(first), *to_confirm(first), *also)}
    checked = ask(asked.values(), checks)
    facts = checked.answer.facts
    return settle(reassess(facts) if facts else first, checked.answer), checked


def executor_checks(registry: Registry) -> dict[str, Check]:
    """Each registered action's live check of an offer: `executor.checked`, the very
    call the approval's re-check and the runner make."""
    checks: dict[str, Check] = {}
    for action in registry.actions():
        executor = registry.get(action)
        if executor is not None:
            checks[action] = _executor_check(executor, registry.preconditions(action))
    return checks


def _executor_check(executor: Executor, preconditions: tuple[str, ...]) -> Check:
    def check(offer: ActionOffer) -> LiveCheck:
        return checked(executor, Step.of_offer(offer, preconditions)).live

    return check


# -- the daemon's workers ----------------------------------------------------------------


class LiveChecks:
    """The pipeline's live checks, on a few threads of their own (`OffThread`); the
    pipeline never waits. Each request is answered exactly once on `sink`: with what the
    checks found, or, when they take longer than `timeout` seconds (a dashboard that
    accepts and never replies), with every asked action's offer decided as withheld
    for that reason. A check that answers after that is ignored."""

    def __init__(
        self,
        checks: Mapping[str, Check],
        sink: Sink,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        workers: int = 2,
        metrics: Metrics | None = None,
    ) -> None:
        """`metrics` counts the bugs a check meets (`pitcrew_internal_errors_total`)."""
        self.timeout = timeout
        self._metrics = metrics
        self._checks = dict(checks)
        self._work: OffThread[LiveFacts] = OffThread(
            sink.submit, name="pitcrew-live", workers=workers
        )

    def request(self, incident_id: str, offers: Sequence[ActionOffer]) -> bool:
        """Check the offers of one incident in the background (returns at once); True
        when an answer will come, False when no offer has a check."""
        asked = tuple(o for o in offers if o.action in self._checks)
        if not asked:
            return False

        def run() -> LiveFacts:
            return LiveFacts(incident_id, ask(asked, self._checks, self._metrics).answer)

        def late(why: str) -> LiveFacts:
            log.warning("live check for incident %s: %s", incident_id, why)
            problems = dict.fromkeys((o.action for o in asked), f"the live check {why}")
            return LiveFacts(incident_id, FactAnswer(problems=problems))

        return self._work.run(run, late, self.timeout, f"the live check of {incident_id}")

    def close(self) -> None:
        """Start no more checks; a check in flight is abandoned (its thread ends with it)."""
        self._work.close()
