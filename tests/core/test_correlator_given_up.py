"""A correlator call whose assessment raises (the daemon gave it up over its budget, or
a bug) changes nothing: the same call made again gives what it would have given had
the first never been made, and the open incidents are as they were.

Each case runs twice, on two correlators fed the same findings: on one the call is made
once; on the other it is first made with an assessment that raises (the counters,
keys, notes and owners it had begun to change must be undone), then again."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from bot.core.actions.facts import FactAnswer
from bot.core.diagnosis.analysis import Facts
from bot.core.incidents.assessment import rank_only
from bot.core.incidents.correlator import Change, Correlator
from bot.core.model import Diagnosis, Finding
from tests.support.incidents import at, oom
from tests.support.owners import OWNER, driver_log, oom_of_the_rayjob

Step = Callable[[Correlator], object]


class GivenUpError(Exception):
    """What the daemon raises when it stops waiting for an assessment."""


@dataclass
class Assessing:
    """`rank_only`, or a raise while `failing`."""

    failing: bool = False

    def __call__(self, findings: Sequence[Finding], facts: Facts | None = None) -> Diagnosis:
        if self.failing:
            raise GivenUpError("correlation took over its budget of 0.2s")
        return rank_only(findings, facts)


def _learn(correlator: Correlator) -> tuple[Change, ...]:
    (incident,) = correlator.open_incidents()
    change = correlator.learn(incident.id, FactAnswer(facts={"holder_stale": True}), at(20))
    return () if change is None else (change,)


CASES: dict[str, tuple[tuple[Step, ...], Step]] = {
    "opening": ((), lambda c: c.add(oom(), at(0))),
    "absorbing": (
        (lambda c: c.add(oom("worker-1"), at(0)),),
        lambda c: c.add(oom("worker-2"), at(5)),
    ),
    "resolving-a-stale-one-then-opening": (
        (lambda c: c.add(oom(), at(0)),),
        lambda c: c.add(oom(), at(3600)),
    ),
    "adopting-on-the-rayjobs-status": (
        (lambda c: c.add(driver_log(), at(0)),),
        lambda c: c.own(OWNER, at(30)),
    ),
    "merging-into-the-rayjobs-own": (
        (lambda c: c.add(oom_of_the_rayjob(), at(0)), lambda c: c.add(driver_log(), at(5))),
        lambda c: c.own(OWNER, at(30)),
    ),
    "learning-a-live-fact": ((lambda c: c.add(oom(), at(0)),), _learn),
}


@pytest.mark.parametrize(("before", "call"), CASES.values(), ids=CASES.keys())
def test_a_call_given_up_changes_nothing(before: tuple[Step, ...], call: Step) -> None:
    untouched, assessing = Correlator(Assessing()), Assessing()
    given_up = Correlator(assessing)
    for step in before:
        step(untouched)
        step(given_up)
    kept = given_up.open_incidents()

    assessing.failing = True
    with pytest.raises(GivenUpError):
        call(given_up)
    assert given_up.open_incidents() == kept
    assessing.failing = False

    assert call(given_up) == call(untouched)
    assert given_up.open_incidents() == untouched.open_incidents()
    # what comes next finds the same incidents, keys and owners
    assert given_up.add(driver_log(), at(40)) == untouched.add(driver_log(), at(40))
    assert given_up.add(oom("worker-3"), at(45)) == untouched.add(oom("worker-3"), at(45))
