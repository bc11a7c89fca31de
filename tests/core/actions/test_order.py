"""Which offers are one plan, and a plan's next step never before its change: the kill of a
stale actor then the resubmission is one plan; while the kill waits for its live check,
the resubmission is not offered alone; the pods of a running workload are replaced only
as the next step of a change."""

from __future__ import annotations

import pytest

from bot.core.actions.facts import FactAnswer, settle
from bot.core.actions.order import grouped, held
from bot.core.model import ActionOffer, Diagnosis

CLASH = "named-actor-conflict"
KILL_PENDING = "needs a live check that the actor is detached or its owner job has finished"


def offer(
    action: str, playbook: str = "pod-oom-killed", offered: bool = True, pending: str = ""
) -> ActionOffer:
    reason = KILL_PENDING if pending else "why"
    return ActionOffer(action, {}, offered, reason, playbook, pending_fact=pending)


@pytest.mark.parametrize(
    ("offers", "plans"),
    [
        # the kill of a stale actor and the resubmission it clears the way for: one plan
        (
            [offer("ray.resubmit_job", CLASH), offer("ray.kill_actor", CLASH)],
            [["ray.kill_actor", "ray.resubmit_job"]],
        ),
        # the bump's next step is the first offered one of its playbook (before the live
        # check decides between them, the recreate, as the playbook lists it first) ...
        (
            [
                offer("k8s.bump_memory"),
                offer("kuberay.recreate_rayjob"),
                offer("k8s.replace_worker_pods"),
            ],
            [["k8s.bump_memory", "kuberay.recreate_rayjob"]],
        ),
        # ... and the pods' replacement once the live check found the RayJob running
        (
            [
                offer("k8s.bump_memory"),
                offer("kuberay.recreate_rayjob", offered=False),
                offer("k8s.replace_worker_pods"),
            ],
            [["k8s.bump_memory", "k8s.replace_worker_pods"], ["kuberay.recreate_rayjob"]],
        ),
        # replacing pods is no fix of its own: never offered without the change before it
        ([offer("k8s.replace_worker_pods")], []),
        # a rerun alone is an offer of its own (nothing to change first)
        ([offer("ray.resubmit_job", CLASH)], [["ray.resubmit_job"]]),
    ],
)
def test_which_offers_are_one_plan(offers: list[ActionOffer], plans: list[list[str]]) -> None:
    assert [[o.action for o in group] for group in grouped(offers)] == plans


def test_a_resubmission_waits_while_the_kill_before_it_waits_for_its_live_check() -> None:
    kill = offer("ray.kill_actor", CLASH, offered=False, pending="ray.actor_stale")
    resubmit = offer("ray.resubmit_job", CLASH)
    assert held([kill, resubmit]) == (
        kill,
        ActionOffer(
            "ray.resubmit_job",
            {},
            False,
            f"not before ray.kill_actor, which waits for a live check ({KILL_PENDING}): "
            "run first, it would meet the same failure",
            CLASH,
        ),
    )


def test_a_resubmission_of_another_playbook_is_not_held() -> None:
    kill = offer("ray.kill_actor", "stale-detached-actor", offered=False, pending="ray.actor_stale")
    resubmit = offer("ray.resubmit_job", CLASH)
    assert held([kill, resubmit]) == (kill, resubmit)


def test_when_the_kills_check_gives_no_answer_the_resubmission_stays_withheld() -> None:
    kill = offer("ray.kill_actor", CLASH, offered=False, pending="ray.actor_stale")
    resubmit = offer("ray.resubmit_job", CLASH)
    answer = FactAnswer(problems={"ray.kill_actor": "the live check did not answer within 5 s"})
    settled = settle(Diagnosis((), (kill, resubmit), ""), answer).actions
    assert [(o.action, o.offered, o.reason, o.pending_fact) for o in settled] == [
        (
            "ray.kill_actor",
            False,
            f"{KILL_PENDING} (the live check did not answer within 5 s)",
            "",  # not asked again
        ),
        (
            "ray.resubmit_job",
            False,
            f"not before ray.kill_actor, which waits for a live check ({KILL_PENDING} (the "
            "live check did not answer within 5 s)): run first, it would meet the same failure",
            "",
        ),
    ]
