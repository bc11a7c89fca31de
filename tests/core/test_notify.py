"""Notification policy, read as a specification (Alertmanager's meanings): the first
post waits group_wait, updates come at most once per group_interval, open incidents
are brought up again every repeat_interval, silences mute until they expire, and
routes pick the channel. A storm or a change of root cause is one card, updated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime, timedelta

import pytest
from pydantic import ValidationError

from bot.core.incidents.correlator import Correlator
from bot.core.incidents.notify import (
    Delivery,
    DeliveryPlan,
    Hold,
    NotifyConfig,
    Route,
    Wait,
    decide,
    evidence_hold,
    labels,
    route,
    silence_active,
    silence_matches,
    silenced_by,
)
from bot.core.incidents.reports import build_report
from bot.core.model import (
    Incident,
    Notification,
    NotificationKind,
    ObjectRef,
    Signal,
    Silence,
    SourceKind,
    frozen_map,
)
from tests.support.incidents import CLUSTER, NS, T0, at, clash, oom

CONFIG = NotifyConfig()  # group_wait 30 s, group_interval 1 min, repeat_interval 4 h
POST, UPDATE, REPLY = NotificationKind.POST, NotificationKind.UPDATE, NotificationKind.REPLY
WORKLOAD = f"{NS}/raycluster/{CLUSTER}"


def opened(at_time: datetime = T0) -> Incident:
    return Correlator().add(oom(), at_time)[0].incident


def step(
    incident: Incident,
    delivery: Delivery | None,
    now: datetime,
    silences: Iterable[Silence] = (),
    config: NotifyConfig = CONFIG,
    urgent: bool = False,
) -> DeliveryPlan:
    return decide(incident, build_report(incident), delivery, silences, config, now, urgent=urgent)


def kinds(notifications: Iterable[Notification]) -> list[str]:
    return [str(n.kind) for n in notifications]


# -- group_wait, group_interval, repeat_interval -------------------------------------


@pytest.mark.parametrize(
    ("seconds", "sent", "next_at"),
    [
        (0, [], at(30)),
        (29, [], at(30)),
        (30, ["post"], at(30) + timedelta(hours=4)),
        (300, ["post"], at(300) + timedelta(hours=4)),
    ],
)
def test_the_first_post_waits_for_group_wait(
    seconds: int, sent: list[str], next_at: datetime
) -> None:
    decision = step(opened(), None, at(seconds))
    assert kinds(decision.notifications) == sent
    assert decision.next_at == next_at


def test_a_post_goes_to_the_routed_channel_with_the_card_and_a_summary() -> None:
    incident = opened()
    (post,) = step(incident, None, at(30)).notifications
    assert post == Notification(
        incident_id=incident.id,
        kind=POST,
        channel="pitcrew",
        report=build_report(incident),
        text=f"pod_oom_killed on {WORKLOAD}",
        created_at=at(30),
    )


def test_changes_are_sent_at_most_once_per_group_interval() -> None:
    correlator = Correlator()
    incident = correlator.add(oom("w-1"), T0)[0].incident
    posted = step(incident, None, at(30))
    incident = correlator.add(oom("w-2"), at(40))[0].incident
    waiting = step(incident, posted.delivery, at(40))
    assert (waiting.notifications, waiting.next_at) == ((), at(90))
    assert kinds(step(incident, waiting.delivery, at(89)).notifications) == []
    updated = step(incident, waiting.delivery, at(90))
    assert kinds(updated.notifications) == ["update"]
    assert updated.notifications[0].channel == "pitcrew"
    quiet = step(incident, updated.delivery, at(91))
    assert (quiet.notifications, quiet.next_at) == ((), at(90) + timedelta(hours=4))


def test_a_persons_click_updates_the_card_at_once() -> None:
    correlator = Correlator()
    incident = correlator.add(oom("w-1"), T0)[0].incident
    posted = step(incident, None, at(30))
    incident = correlator.add(oom("w-2"), at(40))[0].incident
    assert kinds(step(incident, posted.delivery, at(41), urgent=True).notifications) == ["update"]


def test_an_open_incident_is_brought_up_again_every_repeat_interval() -> None:
    incident = opened()
    posted = step(incident, None, at(30))
    early = step(incident, posted.delivery, at(30) + timedelta(hours=3, minutes=59))
    assert early.notifications == ()
    reminded = step(incident, posted.delivery, at(30) + timedelta(hours=4))
    (reply,) = reminded.notifications
    assert (reply.kind, reply.channel, reply.text) == (
        REPLY,
        "pitcrew",
        f"Still open: pod_oom_killed on {WORKLOAD}",
    )
    assert reminded.next_at == at(30) + timedelta(hours=8)


# -- ranking over time and storms: one card ------------------------------------------


def test_a_root_cause_arriving_later_updates_the_card_not_a_second_post() -> None:
    correlator = Correlator()
    incident = correlator.add(clash(), T0)[0].incident
    posted = step(incident, None, at(30))
    assert posted.notifications[0].report is not None
    assert posted.notifications[0].report.primary.startswith("named_actor_conflict")
    change = correlator.add(oom(), at(45))[0]
    assert change.primary_changed
    held = step(change.incident, posted.delivery, at(45))
    assert held.notifications == ()
    (update,) = step(change.incident, held.delivery, at(90)).notifications
    assert update.kind is UPDATE
    assert update.report is not None
    assert (update.report.primary, update.report.secondary) == (
        "pod_oom_killed: Pod OOMKilled at its memory limit",
        ("named_actor_conflict: Named actor already taken: symptom of pod_oom_killed",),
    )


@pytest.mark.slow
def test_a_storm_of_10000_signals_on_1000_pods_is_one_card_and_one_update() -> None:
    """The benchmark's shape: 10,000 findings in 60 s, 9,000 across 1,000 pods of one
    RayCluster and 1,000 of background noise from 20 other workloads; decisions after
    every change and whenever a decision asked to be called again."""
    correlator = Correlator()
    deliveries: dict[str, Delivery] = {}
    due: dict[str, datetime] = {}
    sent: list[tuple[str, Notification]] = []
    storm_findings = 0

    def run(incident: Incident, now: datetime) -> None:
        decision = step(incident, deliveries.get(incident.id), now)
        deliveries[incident.id] = decision.delivery
        sent.extend((incident.key, n) for n in decision.notifications)
        if decision.next_at is not None:
            due[incident.id] = decision.next_at

    def tick(now: datetime) -> None:
        for incident_id, when in list(due.items()):
            current = correlator.get(incident_id)
            if when <= now and current is not None:
                del due[incident_id]
                run(current, now)

    for i in range(10_000):
        now = T0 + timedelta(microseconds=6000 * i)
        tick(now)
        if i % 10 == 5:
            finding = oom("bg", cluster=f"bg-{i // 10 % 20}")
        else:
            finding = oom(f"worker-{storm_findings % 1000}")
            storm_findings += 1
        for change in correlator.add(finding, now):
            run(change.incident, now)
    for second in range(60, 121):
        tick(at(second))

    storm = [(n.kind, n.created_at, n.text) for key, n in sent if key.endswith(CLUSTER)]
    assert [(kind, when, text.split("\n")[0]) for kind, when, text in storm] == [
        (POST, at(30), f"pod_oom_killed (x1000) on {WORKLOAD}"),
        (REPLY, at(30), "Evidence (5 lines):"),  # the card's full evidence, in its thread
        (UPDATE, at(90), f"pod_oom_killed (x1000) on {WORKLOAD}"),
    ]
    assert len(correlator) == 21
    assert len(sent) == 21 * 2 + 1  # a post and an update each; the storm card's thread too


# -- resolution -------------------------------------------------------------------------


def test_an_incident_resolved_before_it_was_posted_is_never_posted() -> None:
    correlator = Correlator()
    correlator.add(oom(), T0)
    (change,) = correlator.healthy(f"/{NS}/RayCluster/{CLUSTER}", at(10))
    decision = step(change.incident, None, at(30))
    assert (decision.notifications, decision.done) == ((), True)


def test_a_posted_card_says_when_the_incident_resolved() -> None:
    correlator = Correlator()
    incident = correlator.add(oom(), T0)[0].incident
    posted = step(incident, None, at(30))
    healthy = Signal(SourceKind.RAY_CLUSTER, "ready", workload=ObjectRef("RayCluster", CLUSTER, NS))
    (change,) = correlator.healthy(healthy, at(60))
    held = step(change.incident, posted.delivery, at(60))
    assert (held.notifications, held.next_at, held.done) == ((), at(90), False)
    final = step(change.incident, held.delivery, at(90))
    (update,) = final.notifications
    assert (update.kind, update.text, final.done, final.next_at) == (
        UPDATE,
        f"resolved: pod_oom_killed on {WORKLOAD}",
        True,
        None,
    )
    assert update.report is not None
    assert update.report.status == "resolved: the workload is healthy again"
    assert step(change.incident, final.delivery, at(600)) == DeliveryPlan(
        (), final.delivery, done=True
    )


# -- silences ---------------------------------------------------------------------------


def silence(matchers: dict[str, str], starts: int = 0, ends: int = 3600) -> Silence:
    return Silence("s-1", matchers, at(starts), at(ends), author="U_ALICE", reason="known issue")


@pytest.mark.parametrize(
    ("matchers", "matches"),
    [
        ({"playbook": "pod-oom-killed"}, True),
        ({"playbook": "named-actor-conflict"}, False),  # only a symptom here
        ({"category": "pod_oom_killed"}, True),
        ({"category": "pod_*"}, True),
        ({"namespace": NS}, True),
        ({"namespace": "ml-*"}, True),
        ({"namespace": "default"}, False),
        ({"workload": CLUSTER}, True),
        ({"workload": f"raycluster/{CLUSTER}"}, True),
        ({"workload": f"RayCluster/{CLUSTER}"}, True),
        ({"workload": f"{NS}/raycluster/{CLUSTER}"}, True),
        ({"workload": "other"}, False),
        ({"namespace": NS, "playbook": "pod-oom-killed"}, True),
        ({"namespace": NS, "playbook": "cuda-oom"}, False),
        ({"team": "rl"}, False),  # an unknown key never matches
        ({}, False),  # a silence must say what it silences
    ],
)
def test_silence_matchers(matchers: dict[str, str], matches: bool) -> None:
    correlator = Correlator()
    correlator.add(oom(), T0)
    incident = correlator.add(clash(), at(1))[0].incident
    assert silence_matches(silence(matchers), incident) is matches


def test_a_silence_can_name_one_incident() -> None:
    incident = opened()
    assert silence_matches(silence({"incident": incident.id}), incident)
    assert not silence_matches(silence({"incident": "inc-0000000000"}), incident)


@pytest.mark.parametrize(
    ("seconds", "active"), [(-1, False), (0, True), (3599, True), (3600, False)]
)
def test_a_silence_is_active_from_its_start_until_it_expires(seconds: int, active: bool) -> None:
    assert silence_active(silence({"namespace": NS}), at(seconds)) is active


def test_the_longest_matching_active_silence_mutes() -> None:
    incident = opened()
    short = silence({"namespace": NS}, ends=600)
    long = Silence("s-2", {"playbook": "pod-oom-killed"}, T0, at(7200), "U_BOB")
    expired = Silence("s-3", {"namespace": NS}, at(-7200), at(-1), "U_BOB")
    assert silenced_by(incident, [short, long, expired], at(10)) == long
    assert silenced_by(incident, [expired], at(10)) is None


def test_a_silenced_incident_is_posted_when_the_silence_expires() -> None:
    incident = opened()
    mute = silence({"playbook": "pod-oom-killed"}, ends=600)
    muted = step(incident, None, at(30), [mute])
    assert (muted.notifications, muted.muted_by, muted.next_at) == ((), mute, at(600))
    after = step(incident, muted.delivery, at(600), [mute])
    assert kinds(after.notifications) == ["post"]


def test_a_silence_mutes_updates_and_reminders_but_not_the_resolution() -> None:
    correlator = Correlator()
    incident = correlator.add(oom("w-1"), T0)[0].incident
    posted = step(incident, None, at(30))
    mute = silence({"namespace": NS}, ends=86_400)
    incident = correlator.add(oom("w-2"), at(40))[0].incident
    assert step(incident, posted.delivery, at(200), [mute]).notifications == ()
    assert step(incident, posted.delivery, at(30) + timedelta(hours=5), [mute]).notifications == ()
    (change,) = correlator.tick(at(40) + timedelta(minutes=30))
    final = step(change.incident, posted.delivery, change.incident.updated_at, [mute])
    assert kinds(final.notifications) == ["update"]
    assert final.done


# -- routes ----------------------------------------------------------------------------

ROUTED = NotifyConfig(
    default_channel="ops",
    routes=(
        Route(
            channel="rl-critical",
            namespaces=("ml-*",),
            labels={"severity": "critical", "team": "rl"},
        ),
        Route(channel="ml-team", namespaces=("ml-*",)),
        Route(channel="serving", labels={"kind": "Deployment"}),
    ),
)


def _routed(namespace: str, **fields: str) -> Incident:
    finding = oom(**fields)
    if namespace != NS:  # a Deployment's pod elsewhere
        finding = dataclasses.replace(
            finding,
            obj=ObjectRef("Pod", "web-1", namespace),
            workload=ObjectRef("Deployment", "web", namespace),
            fields=frozen_map({"namespace": namespace, **fields}),
        )
    return Correlator().add(finding, T0)[0].incident


@pytest.mark.parametrize(
    ("incident", "channel"),
    [
        (_routed(NS, **{"label.team": "rl"}), "rl-critical"),
        (_routed(NS), "ml-team"),
        (_routed("shop"), "serving"),
        (_routed("default", **{"label.team": "rl"}), "serving"),
    ],
)
def test_routes_pick_the_first_matching_channel(incident: Incident, channel: str) -> None:
    assert route(incident, ROUTED) == channel


def test_unrouted_incidents_go_to_the_default_channel() -> None:
    unowned = dataclasses.replace(
        oom(), obj=None, workload=None, fields=frozen_map({"namespace": "batch"})
    )
    incident = Correlator().add(unowned, T0)[0].incident
    assert route(incident, ROUTED) == "ops"
    assert labels(incident) == {
        "incident": incident.id,
        "namespace": "batch",
        "cluster": "",
        "playbook": "pod-oom-killed",
        "category": "pod_oom_killed",
        "severity": "critical",
    }


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"group_interval": timedelta(0)}, "group_interval must be positive"),
        ({"group_wait": timedelta(seconds=-1)}, "group_wait cannot be negative"),
        (
            {"repeat_interval": timedelta(seconds=30)},
            "repeat_interval cannot be shorter than group_interval",
        ),
        ({"default_channel": ""}, "at least 1 character"),
        ({"routes": [{"channel": "x", "match": {}}]}, "Extra inputs are not permitted"),
    ],
)
def test_bad_notify_config_is_refused(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        NotifyConfig.model_validate(settings)


@pytest.mark.parametrize(
    ("asked_after", "held_after"),
    [
        (0, 20),  # asked at once: the evidence's own deadline
        (25, 40),  # asked late: never past group_wait plus the deadline
    ],
    ids=["deadline", "capped"],
)
def test_a_first_post_waits_for_outstanding_evidence_within_its_bound(
    asked_after: int, held_after: int
) -> None:
    config = NotifyConfig(group_wait=timedelta(seconds=20))
    opened = T0
    asked = opened + timedelta(seconds=asked_after)
    hold = evidence_hold(opened, asked, timedelta(seconds=20), config)
    assert hold == opened + timedelta(seconds=held_after)


@pytest.mark.parametrize(
    ("seconds", "urgent", "sent", "next_at"),
    [
        (30, False, [], at(50)),  # group_wait passed, the evidence is still outstanding
        (49, False, [], at(50)),
        (50, False, ["post"], at(50) + timedelta(hours=4)),  # its deadline: out it goes
        (30, True, ["post"], at(30) + timedelta(hours=4)),  # a person's click does not wait
    ],
    ids=["held", "still-held", "deadline", "click"],
)
def test_the_first_post_waits_for_outstanding_evidence(
    seconds: int, urgent: bool, sent: list[str], next_at: datetime
) -> None:
    incident = opened()
    plan = decide(
        incident,
        build_report(incident),
        None,
        (),
        CONFIG,
        at(seconds),
        urgent=urgent,
        hold=Hold(Wait.EVIDENCE, at(50)),
    )
    assert (kinds(plan.notifications)[:1], plan.next_at) == (sent, next_at)


# -- which wait holds a card: the one answer to "why is this card late?" ----------------


def _changed_after_posting() -> tuple[Incident, Delivery]:
    """An incident whose card was posted at 30 s and that changed at 40 s."""
    correlator = Correlator()
    posted = step(correlator.add(oom("w-1"), T0)[0].incident, None, at(30)).delivery
    return correlator.add(oom("w-2"), at(40))[0].incident, posted


EVIDENCE_50 = Hold(Wait.EVIDENCE, at(50))
EVIDENCE_20 = Hold(Wait.EVIDENCE, at(20))
LIVE_45 = Hold(Wait.LIVE_CHECK, at(45))


@pytest.mark.parametrize(
    ("posted", "hold", "seconds", "urgent", "held", "sent", "next_at"),
    [
        (False, None, 10, False, Wait.GROUP_WAIT, [], at(30)),
        (False, EVIDENCE_50, 10, False, Wait.EVIDENCE, [], at(50)),
        (False, EVIDENCE_20, 10, False, Wait.GROUP_WAIT, [], at(30)),  # group_wait is later
        (False, EVIDENCE_50, 10, True, None, ["post"], at(10) + timedelta(hours=4)),
        (False, LIVE_45, 40, False, Wait.LIVE_CHECK, [], at(45)),  # past group_wait
        (False, LIVE_45, 40, True, Wait.LIVE_CHECK, [], at(45)),  # a click does not skip it
        (False, LIVE_45, 45, False, None, ["post"], at(45) + timedelta(hours=4)),
        (True, None, 40, False, Wait.GROUP_INTERVAL, [], at(90)),
        (True, LIVE_45, 40, True, Wait.LIVE_CHECK, [], at(45)),  # nor an update
        (True, EVIDENCE_50, 40, True, None, ["update"], at(40) + timedelta(hours=4)),
    ],
    ids=[
        "group-wait",
        "evidence",
        "group-wait-after-evidence",
        "evidence-click",
        "live-check",
        "live-check-click",
        "live-check-over",
        "group-interval",
        "live-check-update",
        "evidence-posted",
    ],
)
def test_one_wait_holds_a_card_and_the_plan_names_it(
    posted: bool,
    hold: Hold | None,
    seconds: int,
    urgent: bool,
    held: Wait | None,
    sent: list[str],
    next_at: datetime,
) -> None:
    incident, delivery = _changed_after_posting() if posted else (opened(), None)
    plan = decide(
        incident,
        build_report(incident),
        delivery,
        (),
        CONFIG,
        at(seconds),
        urgent=urgent,
        hold=hold,
    )
    assert (plan.held, kinds(plan.notifications), plan.next_at) == (held, sent, next_at)


def test_a_resolved_incident_waits_for_no_live_check() -> None:
    correlator = Correlator()
    incident = correlator.add(oom(), T0)[0].incident
    (resolved,) = correlator.tick(T0 + timedelta(days=1))
    plan = decide(
        resolved.incident, build_report(resolved.incident), None, (), CONFIG, at(40), hold=LIVE_45
    )
    assert (plan.held, plan.done) == (None, True)
    assert incident.id == resolved.incident.id
