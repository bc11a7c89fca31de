"""A Ray submission is its RayJob's, as the RayJob's status says, read as a specification:
evidence that names only the submission id joins the RayJob's incident whether the
RayJob's status was seen before or after it; an incident opened on the submission id
alone becomes the RayJob's (same incident, same card) or, when the RayJob has one
already, is merged into it and resolved, saying where; evidence that says it is
elsewhere stays apart.

The RayJob status signals are the ones `bot.core.inputs` makes of a real ray.io/v1
RayJob; the findings are built directly (as in tests/core/test_incidents.py), attributed
the way `/ingest` attributes a driver log posted with `workload=RayJobSubmission/…`.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest

from bot.core.incidents.correlator import ChangeKind, Correlator
from bot.core.incidents.notify import NotifyConfig
from bot.core.incidents.rayjob_owners import Owner, Owners, owners_named, sole_submission
from bot.core.incidents.workloads import SUBMISSION_KIND
from bot.core.inputs.kuberay import rayjob_parts
from bot.core.inputs.reader import read_stream
from bot.core.model import (
    IncidentState,
    ObjectRef,
    ProposalState,
)
from bot.core.model import frozen_map as fm
from bot.daemon.feed import Context, Observation, observe
from tests.support.daemon import DESCRIBE, SEED, Clock, RecordingChat, rig, seed
from tests.support.owners import (
    NS,
    OWNER,
    RAYCLUSTER,
    RAYJOB,
    SUBMISSION,
    driver_log,
    oom_of_the_rayjob,
)

T0 = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)
HOME = f"kmock/{NS}/RayJob/verl-ppo-qwen"
STRAY = f"//{SUBMISSION_KIND}/{SUBMISSION}"
ADOPTED = (
    f"Ray job {SUBMISSION} is RayJob ml-train/verl-ppo-qwen's (its status.jobId): "
    "this incident is now that RayJob's"
)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def rayjob(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": RAYJOB.name, "namespace": NS, "uid": "4f1c0a52"},
        "spec": {"entrypoint": "python3 -m verl.trainer.main_ppo"},
        "status": status,
    }


RUNNING = {
    "jobDeploymentStatus": "Running",
    "jobStatus": "RUNNING",
    "jobId": SUBMISSION,
    "rayClusterName": RAYCLUSTER,
}


# -- where the mapping comes from ----------------------------------------------------


def test_a_rayjob_status_with_its_job_id_names_the_owner_on_the_senders_cluster() -> None:
    assert owners_named(rayjob_parts(rayjob(RUNNING)), "kmock") == (OWNER,)


@pytest.mark.parametrize(
    "status",
    [
        pytest.param({"jobDeploymentStatus": "Initializing"}, id="no-job-id-yet"),
        pytest.param({"jobId": ""}, id="empty-job-id"),
    ],
)
def test_a_rayjob_status_without_a_job_id_names_no_owner(status: dict[str, Any]) -> None:
    assert owners_named(rayjob_parts(rayjob(status)), "kmock") == ()


SUBMIT_OUTPUT = (  # `ray job submit`, as pasted in a public thread (the id is this test's)
    "Job submission server address: http://127.0.0.1:8265\n"
    "-------------------------------------------------------\n"
    f"Job '{SUBMISSION}' submitted successfully\n"
    "-------------------------------------------------------\n"
    "Tailing logs until the job exits (disable with --no-wait):\n"
    "/bin/sh: 1: python script.py: not found\n"
)


@pytest.mark.parametrize(
    ("paste", "submission"),
    [
        pytest.param(SUBMIT_OUTPUT, SUBMISSION, id="submitted-successfully"),
        pytest.param(
            f"{SUBMIT_OUTPUT}Job '{SUBMISSION}' failed\nStatus message: Job failed\n",
            SUBMISSION,
            id="submitted-then-failed",
        ),
        pytest.param(
            (SEED / "driver.log").read_text(), "raysubmit_Qk8vXw2mT3nLp9Rb", id="seed-log-prefix"
        ),
        pytest.param(f"Job 'raysubmit_Other00000000' failed\n{SUBMIT_OUTPUT}", None, id="two"),
        pytest.param(
            "ValueError: The name x (namespace=None) is already taken.\n", None, id="none"
        ),
    ],
)
def test_a_paste_names_its_one_submission(paste: str, submission: str | None) -> None:
    parts = observe(read_stream(BytesIO(paste.encode()), "driver.log")).parts
    expected = ObjectRef(SUBMISSION_KIND, submission) if submission else None
    assert sole_submission(parts) == expected


def test_the_owners_remembered_are_bounded_oldest_first() -> None:
    owners = Owners(limit=2)
    for n in range(3):
        assert owners.learn(Owner(f"raysubmit_{n}", RAYJOB, "kmock"))
    assert not owners.learn(Owner("raysubmit_2", RAYJOB, "kmock"))  # nothing new
    assert len(owners) == 2
    assert owners.of(driver_log(submission_id="raysubmit_0")) is None
    assert owners.of(driver_log(submission_id="raysubmit_1")) is not None


# -- the RayJob seen first ---------------------------------------------------------------


def test_evidence_naming_a_known_submission_opens_the_rayjobs_incident() -> None:
    correlator = Correlator()
    assert correlator.own(OWNER, at(0)) == ()  # nothing open yet
    (change,) = correlator.add(driver_log(), at(5))
    incident = change.incident
    assert change.kind is ChangeKind.OPENED
    assert incident.key == HOME
    assert (incident.workload, incident.cluster, incident.namespace) == (RAYJOB, "kmock", NS)
    assert incident.ray_job_id == SUBMISSION
    assert correlator.find(f"kmock//{SUBMISSION_KIND}/{SUBMISSION}") == incident


@pytest.mark.parametrize("evidence_first", [False, True], ids=["rayjob-first", "evidence-first"])
def test_a_worker_pods_evidence_naming_only_the_rayjobs_raycluster_is_the_rayjobs(
    evidence_first: bool,
) -> None:
    """A pasted `kubectl describe` of a worker pod names its RayCluster (its labels) and
    namespace, not the cluster or the RayJob."""
    pod = dataclasses.replace(
        oom_of_the_rayjob(),
        workload=ObjectRef("RayCluster", RAYCLUSTER, NS),
        fields=fm({"namespace": NS, "ray_cluster": RAYCLUSTER}),
    )
    correlator = Correlator()
    if evidence_first:
        (opened,) = correlator.add(pod, at(0))
        assert opened.incident.key == f"/{NS}/RayCluster/{RAYCLUSTER}"
        (change,) = correlator.own(OWNER, at(5))
        assert change.incident.id == opened.incident.id
    else:
        correlator.own(OWNER, at(0))
        (change,) = correlator.add(pod, at(5))
    assert change.incident.key == HOME
    assert change.incident.cluster == "kmock"
    elsewhere = dataclasses.replace(pod, fields=fm({**pod.fields, "cluster": "prod"}))
    (apart,) = correlator.add(elsewhere, at(6))
    assert apart.incident.key == f"prod/{NS}/RayCluster/{RAYCLUSTER}"


def test_evidence_on_a_failed_rayjobs_incident_joins_it() -> None:
    correlator = Correlator()
    correlator.own(OWNER, at(0))
    (opened,) = correlator.add(oom_of_the_rayjob(), at(1))
    (joined,) = correlator.add(driver_log(), at(5))
    assert joined.incident.id == opened.incident.id
    assert joined.kind is ChangeKind.UPDATED
    assert len(correlator) == 1


# -- the evidence seen first -------------------------------------------------------------


def test_an_incident_on_the_submission_alone_becomes_the_rayjobs_when_its_status_arrives() -> None:
    correlator = Correlator()
    (opened,) = correlator.add(driver_log(), at(0))
    assert opened.incident.key == STRAY
    (adopted,) = correlator.own(OWNER, at(30))
    incident = adopted.incident
    assert adopted.kind is ChangeKind.UPDATED
    assert incident.id == opened.incident.id  # the same incident: the same card
    assert incident.key == HOME
    assert (incident.workload, incident.cluster, incident.namespace) == (RAYJOB, "kmock", NS)
    assert adopted.say == f"{ADOPTED}."
    assert incident.notes[-1].text == ADOPTED
    finding = incident.diagnosis.findings[0].finding
    assert finding.fields["rayjob"] == RAYJOB.name
    assert finding.fields["ray_cluster"] == RAYCLUSTER
    # what the Kubernetes watch says of the RayJob next joins it
    (joined,) = correlator.add(oom_of_the_rayjob(), at(40))
    assert joined.incident.id == opened.incident.id
    assert len(correlator) == 1


def test_an_incident_on_the_submission_merges_into_the_rayjobs_own() -> None:
    correlator = Correlator()
    (home,) = correlator.add(oom_of_the_rayjob(), at(0))  # jobId not in the status yet
    (stray,) = correlator.add(driver_log(), at(5))
    assert stray.incident.id != home.incident.id
    gone, kept = correlator.own(OWNER, at(30))
    assert (gone.incident.id, gone.kind) == (stray.incident.id, ChangeKind.RESOLVED)
    assert gone.incident.state is IncidentState.RESOLVED
    where = f"Ray job {SUBMISSION} is RayJob ml-train/verl-ppo-qwen's"
    assert gone.incident.resolution == f"merged into incident {home.incident.id}: {where}"
    assert gone.say == f"This incident is merged into incident {home.incident.id}: {where}."
    assert (kept.incident.id, kept.kind) == (home.incident.id, ChangeKind.UPDATED)
    merged_in = f"merged in incident {stray.incident.id}: Ray job {SUBMISSION} is this RayJob's"
    assert kept.say == f"M{merged_in[1:]}."
    assert kept.incident.notes[-1].text == merged_in
    assert dict(kept.incident.counts) == {"pod-oom-killed": 1, "named-actor-conflict": 1}
    assert len(correlator) == 1
    assert correlator.find(STRAY) == kept.incident  # later evidence on the id joins it
    (again,) = correlator.add(driver_log(), at(40))
    assert again.incident.id == home.incident.id


def test_learning_the_same_owner_again_changes_nothing() -> None:
    correlator = Correlator()
    correlator.add(driver_log(), at(0))
    assert len(correlator.own(OWNER, at(1))) == 1
    assert correlator.own(OWNER, at(2)) == ()


# -- evidence that says it is elsewhere ------------------------------------------------------


@pytest.mark.parametrize("evidence_first", [False, True], ids=["rayjob-first", "evidence-first"])
@pytest.mark.parametrize(
    ("fields", "key"),
    [
        pytest.param({"cluster": "prod"}, f"prod//{SUBMISSION_KIND}/{SUBMISSION}", id="cluster"),
        pytest.param({"namespace": "research"}, STRAY, id="namespace"),
        pytest.param(
            {"rayjob": "other-job", "namespace": NS}, f"/{NS}/RayJob/other-job", id="rayjob"
        ),
    ],
)
def test_evidence_that_names_another_place_is_not_attached(
    fields: dict[str, str], key: str, evidence_first: bool
) -> None:
    correlator = Correlator()
    if evidence_first:
        (change,) = correlator.add(driver_log(**fields), at(0))
        assert correlator.own(OWNER, at(5)) == ()
    else:
        correlator.own(OWNER, at(0))
        (change,) = correlator.add(driver_log(**fields), at(5))
    assert change.incident.key == key
    assert correlator.find(key) == change.incident
    assert change.incident.workload != RAYJOB


# -- through the pipeline: what the cards and the offers do ---------------------------------


def rayjob_seen(status: dict[str, Any]) -> Observation:
    """The RayJob's status as the Kubernetes watch hands it on (`sources.kubernetes`)."""
    return observe(rayjob_parts(rayjob(status)), Context("kmock", NS, RAYJOB))


def test_a_merged_incidents_offers_are_withdrawn_and_its_card_says_where_it_went(
    tmp_path: Path,
) -> None:
    clock = Clock(T0)
    prompt = NotifyConfig(group_wait=timedelta(0), group_interval=timedelta(seconds=1))
    r = rig(tmp_path / "pitcrew.db", clock, notify=prompt)
    failed = {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "reason": "AppFailed"}
    r.feed(rayjob_seen({**failed, "rayClusterName": RAYCLUSTER}))  # no jobId yet
    (home,) = r.store.open_incidents()
    clock.advance(5)
    r.feed(seed(DESCRIBE, ObjectRef(SUBMISSION_KIND, SUBMISSION)))  # posted with the id only
    stray = next(i for i in r.store.open_incidents() if i.id != home.id)
    (offer,) = r.store.proposals_for_incident(stray.id)
    assert (offer.action, offer.state) == ("k8s.bump_memory", ProposalState.OFFERED)

    clock.advance(5)
    r.feed(rayjob_seen({**failed, "jobId": SUBMISSION, "rayClusterName": RAYCLUSTER}))

    (kept,) = r.store.open_incidents()
    assert kept.id == home.id
    withdrawn = r.store.get_proposal(offer.id)
    assert withdrawn is not None
    assert withdrawn.state is ProposalState.EXPIRED
    assert withdrawn.history[-1].reason == (
        f"superseded: no longer offered (merged into incident {home.id})"
    )
    (bump,) = [p for p in r.store.proposals_for_incident(home.id) if p.action == "k8s.bump_memory"]
    assert bump.state is ProposalState.OFFERED  # offered again, on the RayJob's card
    r.tick(until=20)
    _, stray_card = [c.ref for c in r.chat.calls if c.kind == "post"]  # the home's came first
    gone = [c.report for c in r.chat.calls if c.kind == "update" and c.ref == stray_card][-1]
    assert gone.title.startswith("Resolved: ")
    assert gone.status == (
        f"resolved: merged into incident {home.id}: Ray job {SUBMISSION} "
        f"is RayJob {NS}/verl-ppo-qwen's"
    )
    assert not [a for a in gone.actions if a.state is ProposalState.OFFERED]
    home_card = next(c.ref for c in r.chat.calls if c.kind == "post")
    told = {(c.ref, c.text) for c in r.chat.calls if c.kind == "reply"}
    where = f"Ray job {SUBMISSION} is"
    assert (
        stray_card,
        f"This incident is merged into incident {home.id}: {where} RayJob {NS}/verl-ppo-qwen's.",
    ) in told
    assert (home_card, f"Merged in incident {stray.id}: {where} this RayJob's.") in told


def test_after_a_restart_an_incident_on_the_submission_becomes_the_rayjobs_on_the_relist(
    tmp_path: Path,
) -> None:
    """Owners live in memory; the watch's first list after a start shows the RayJob's
    status again, and the restored incident becomes the RayJob's, on the same card."""
    clock = Clock(T0)
    prompt = NotifyConfig(group_wait=timedelta(0), group_interval=timedelta(seconds=1))
    first = rig(tmp_path / "pitcrew.db", clock, notify=prompt)
    first.feed(seed("driver.log", ObjectRef(SUBMISSION_KIND, SUBMISSION)))
    (stray,) = first.store.open_incidents()
    assert stray.key == STRAY
    first.store.close()  # the daemon stopped

    clock.advance(60)
    second = rig(tmp_path / "pitcrew.db", clock, RecordingChat(), notify=prompt)
    second.feed(rayjob_seen(RUNNING))
    second.tick(until=90)

    (adopted,) = second.store.open_incidents()
    assert (adopted.id, adopted.key, adopted.workload) == (stray.id, HOME, RAYJOB)
    assert second.chat.kinds().count("post") == 0  # the card posted before the stop
    assert [c.text for c in second.chat.calls if c.kind == "reply"] == [f"{ADOPTED}."]
    (update,) = [c.report for c in second.chat.calls if c.kind == "update"]
    assert update is not None
    assert update.title.endswith(f"RayJob {NS}/verl-ppo-qwen")
