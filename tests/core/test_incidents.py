"""Correlation, read as a specification: findings about one workload inside the window
are one incident; the most causal finding is primary as evidence arrives, and the
card is updated, not posted again; storms are counters; incidents resolve when
the workload is healthy again or quiet.

Findings are built directly (not classified) so these tests do not move when
playbooks change; offers come from a two-playbook library written for the test.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.adapters.files.playbooks import load_library
from bot.core.incidents.assessment import assessor
from bot.core.incidents.correlator import ChangeKind, Correlator, incident_id
from bot.core.incidents.grouping import CorrelationConfig
from bot.core.incidents.workloads import key_text, workload_keys
from bot.core.model import (
    Finding,
    IncidentState,
    NotificationKind,
    ObjectRef,
    Severity,
    Signal,
    SourceKind,
    frozen_map,
)
from bot.core.taxonomy import Category
from tests.support.incidents import CLASH_PLAYBOOK, CLUSTER, NS, OOM_PLAYBOOK, T0, at, clash, oom
from tests.support.playbooks import write_library

RAYCLUSTER_KEY = f"/{NS}/RayCluster/{CLUSTER}"


def system_error() -> Finding:
    return Finding(
        playbook="worker-died-system-error",
        category=Category.WORKER_DIED_SYSTEM_ERROR,
        severity=Severity.ERROR,
        title="Worker died (SYSTEM_ERROR)",
        signature="system-error",
        source=SourceKind.DRIVER_LOG,
        fields=frozen_map({"ray_cluster": CLUSTER, "namespace": NS}),
    )


@pytest.fixture(scope="module")
def correlator_factory(tmp_path_factory: pytest.TempPathFactory) -> type[Correlator]:
    directory: Path = tmp_path_factory.mktemp("library")
    library = load_library([write_library(directory, OOM_PLAYBOOK, CLASH_PLAYBOOK)])
    assess = assessor(library)

    class WithLibrary(Correlator):
        def __init__(self, config: CorrelationConfig | None = None) -> None:
            super().__init__(assess, config)

    return WithLibrary


# -- workload identity -----------------------------------------------------------


def _signal(**kwargs: object) -> Signal:
    return Signal(source=SourceKind.POD_STATUS, text="", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("item", "keys"),
    [
        pytest.param(oom(), (RAYCLUSTER_KEY,), id="kuberay-pod-belongs-to-its-raycluster"),
        pytest.param(
            clash(),
            (RAYCLUSTER_KEY, "//RayJobSubmission/raysubmit_8nqL2dXbHu1Kc3Ve"),
            id="ray-job-names-its-cluster-and-submission",
        ),
        pytest.param(
            _signal(
                fields=frozen_map(
                    {
                        "rayjob": "verl",
                        "namespace": NS,
                        "ray_cluster": CLUSTER,
                        "job_id": "raysubmit_1",
                    }
                ),
                obj=ObjectRef("RayJob", "verl", NS),
            ),
            (f"/{NS}/RayJob/verl", RAYCLUSTER_KEY, "//RayJobSubmission/raysubmit_1"),
            id="rayjob-status-owns-cluster-and-submission",
        ),
        pytest.param(
            _signal(
                obj=ObjectRef("Pod", "web-5d9c-x", NS), workload=ObjectRef("Deployment", "web", NS)
            ),
            (f"/{NS}/Deployment/web",),
            id="deployment",
        ),
        pytest.param(
            _signal(obj=ObjectRef("Pod", "db-0", NS), workload=ObjectRef("StatefulSet", "db", NS)),
            (f"/{NS}/StatefulSet/db",),
            id="statefulset",
        ),
        pytest.param(
            _signal(obj=ObjectRef("Pod", "etl-abc", NS), workload=ObjectRef("Job", "etl", NS)),
            (f"/{NS}/Job/etl",),
            id="job",
        ),
        pytest.param(
            _signal(fields=frozen_map({"submission_id": "raysubmit_2"})),
            ("//RayJobSubmission/raysubmit_2",),
            id="ray-job-submission-alone",
        ),
        pytest.param(
            _signal(obj=ObjectRef("Pod", "lonely", NS)),
            (f"/{NS}/Pod/lonely",),
            id="pod-without-owner-is-its-own-key",
        ),
        pytest.param(
            _signal(fields=frozen_map({"namespace": NS})),
            (f"/{NS}/-/-",),
            id="unattributed-within-a-namespace",
        ),
        pytest.param(
            _signal(
                fields=frozen_map({"cluster": "prod-eu"}),
                workload=ObjectRef("RayCluster", "rc", NS),
            ),
            (f"prod-eu/{NS}/RayCluster/rc",),
            id="cluster-field-scopes-the-key",
        ),
    ],
)
def test_workload_keys(item: Finding | Signal, keys: tuple[str, ...]) -> None:
    assert workload_keys(item) == keys
    assert workload_keys(item)[0] == keys[0]


# -- correlation in a window ---------------------------------------------------------


@pytest.mark.parametrize(
    ("gap_seconds", "incidents", "kinds"),
    [
        (0, 1, ["opened", "updated"]),
        (300, 1, ["opened", "updated"]),
        (600, 1, ["opened", "updated"]),
        (601, 2, ["opened", "resolved", "opened"]),
    ],
)
def test_findings_within_the_window_share_one_incident(
    gap_seconds: int, incidents: int, kinds: list[str]
) -> None:
    correlator = Correlator()
    first = correlator.add(clash(), T0)
    later = correlator.add(oom(), at(gap_seconds))
    changes = [*first, *later]
    assert [str(c.kind) for c in changes] == kinds
    assert len({c.incident.id for c in changes}) == incidents
    if incidents == 2:
        assert changes[1].incident.resolution == "no new findings for 10 min"


def test_the_window_slides_with_each_new_finding() -> None:
    correlator = Correlator()
    ids = {c.incident.id for t in range(0, 3600, 300) for c in correlator.add(oom(f"w-{t}"), at(t))}
    assert len(ids) == 1


def test_different_workloads_are_different_incidents() -> None:
    correlator = Correlator()
    a = correlator.add(oom(cluster="rc-a"), T0)[0].incident
    b = correlator.add(oom(cluster="rc-b"), T0)[0].incident
    assert a.id != b.id
    assert {i.key for i in correlator.open_incidents()} == {
        f"/{NS}/RayCluster/rc-a",
        f"/{NS}/RayCluster/rc-b",
    }


def test_incident_ids_are_stable() -> None:
    change = Correlator().add(oom(), T0)[0]
    assert change.incident.id == incident_id(RAYCLUSTER_KEY, T0)
    assert change.incident.id == Correlator().add(oom(), T0)[0].incident.id


def test_a_new_incident_carries_where_it_happened() -> None:
    incident = Correlator().add(clash(), T0)[0].incident
    assert (incident.workload, incident.namespace, incident.ray_job_id) == (
        ObjectRef("RayCluster", CLUSTER, NS),
        NS,
        "raysubmit_8nqL2dXbHu1Kc3Ve",
    )
    assert incident.keys == ("//RayJobSubmission/raysubmit_8nqL2dXbHu1Kc3Ve",)
    assert [n.text for n in incident.notes] == [
        f"opened: named_actor_conflict on {NS}/raycluster/{CLUSTER}"
    ]


def test_a_rayjob_status_links_its_cluster_and_submission_to_one_incident() -> None:
    correlator = Correlator()
    status = Finding(
        playbook="rayjob-cr-failure",
        category=Category.RAYJOB_CR_FAILURE,
        severity=Severity.ERROR,
        title="RayJob failed",
        signature="failed",
        source=SourceKind.RAY_JOB,
        obj=ObjectRef("RayJob", "verl", NS),
        workload=ObjectRef("RayJob", "verl", NS),
        fields=frozen_map(
            {"rayjob": "verl", "namespace": NS, "ray_cluster": CLUSTER, "job_id": "raysubmit_9"}
        ),
    )
    opened = correlator.add(status, T0)[0].incident
    from_pod = correlator.add(oom(), at(10))[0].incident
    from_driver = correlator.add(clash("raysubmit_9", ray_cluster=""), at(20))[0].incident
    assert opened.id == from_pod.id == from_driver.id
    assert from_driver.key == f"/{NS}/RayJob/verl"
    assert len(correlator) == 1


# -- ranking over time ---------------------------------------------------------------


def test_a_more_causal_finding_takes_over_and_the_card_is_updated(
    correlator_factory: type[Correlator],
) -> None:
    correlator = correlator_factory()
    (first,) = correlator.add(clash(), T0)
    assert first.kind is ChangeKind.OPENED
    assert first.card is NotificationKind.POST
    assert first.incident.diagnosis.primary is not None
    assert first.incident.diagnosis.primary.category is Category.NAMED_ACTOR_CONFLICT
    assert [(a.action, a.offered, a.reason) for a in first.incident.diagnosis.actions] == [
        ("ray.kill_actor", False, "namespace is anonymous")
    ]

    (second,) = correlator.add(oom(), at(45))
    incident = second.incident
    assert (second.kind, second.card) == (ChangeKind.UPDATED, NotificationKind.UPDATE)
    assert second.primary_changed
    assert second.previous_primary is Category.NAMED_ACTOR_CONFLICT
    assert incident.id == first.incident.id
    assert [(str(r.finding.category), str(r.role)) for r in incident.diagnosis.findings] == [
        ("pod_oom_killed", "primary"),
        ("named_actor_conflict", "secondary"),
    ]
    assert [(a.action, a.offered, a.reason, a.preview) for a in incident.diagnosis.actions] == [
        (
            "k8s.bump_memory",
            True,
            "Raise the memory limit and request of the owning template (pod_oom_killed)",
            f"RayCluster {NS}/{CLUSTER} workerGroupSpecs[gpu-group].containers[*]"
            ".resources.limits.memory: 16Gi → 24Gi (× 1.5: no memory metrics)",
        ),
        (
            "ray.kill_actor",
            False,
            "the clash is a symptom of the root cause",
            "",
        ),
    ]
    assert [n.text for n in incident.notes][-2:] == [
        "also seen: pod_oom_killed",
        "root cause is now pod_oom_killed (was named_actor_conflict)",
    ]


def test_a_symptom_arriving_after_the_cause_does_not_change_the_primary() -> None:
    correlator = Correlator()
    correlator.add(oom(), T0)
    (change,) = correlator.add(clash(), at(30))
    assert (change.kind, change.primary_changed, change.previous_primary) == (
        ChangeKind.UPDATED,
        False,
        None,
    )
    (third,) = correlator.add(system_error(), at(40))
    assert [str(r.finding.category) for r in third.incident.diagnosis.findings] == [
        "pod_oom_killed",
        "named_actor_conflict",
        "worker_died_system_error",
    ]


def test_a_strong_finding_replaces_a_weak_one_of_the_same_playbook() -> None:
    correlator = Correlator()
    weak = Finding(
        playbook="pod-oom-killed",
        category=Category.WORKER_DIED_SYSTEM_ERROR,
        severity=Severity.CRITICAL,
        title="Pod OOMKilled at its memory limit",
        signature="raylet-sigkill",
        source=SourceKind.DRIVER_LOG,
        weak=True,
        fields=frozen_map({"ray_cluster": CLUSTER, "namespace": NS}),
    )
    correlator.add(weak, T0)
    (change,) = correlator.add(oom(), at(5))
    assert change.primary_changed
    assert change.previous_primary is Category.WORKER_DIED_SYSTEM_ERROR
    assert [str(r.finding.category) for r in change.incident.diagnosis.findings] == [
        "pod_oom_killed"
    ]


def test_fields_learned_later_are_added_to_the_finding_and_offers_re_evaluated(
    correlator_factory: type[Correlator],
) -> None:
    correlator = correlator_factory()
    partial = Finding(
        playbook="pod-oom-killed",
        category=Category.POD_OOM_KILLED,
        severity=Severity.CRITICAL,
        title="Pod OOMKilled at its memory limit",
        signature="kubelet-oom-event",
        source=SourceKind.K8S_EVENT,
        obj=ObjectRef("Pod", "worker-1", NS),
        workload=ObjectRef("RayCluster", CLUSTER, NS),
        fields=frozen_map({"namespace": NS}),
    )
    (first,) = correlator.add(partial, T0)
    assert [(a.offered, a.reason) for a in first.incident.diagnosis.actions] == [
        (False, "the evidence does not name the name to act on")
    ]
    (second,) = correlator.add(oom(), at(5))
    assert second.kind is ChangeKind.UPDATED
    assert [a.offered for a in second.incident.diagnosis.actions] == [True]


# -- storms -------------------------------------------------------------------------


def test_a_storm_of_one_playbook_is_counters_on_one_incident() -> None:
    correlator = Correlator()
    changes = [
        change
        for i in range(1000)
        for change in correlator.add(oom(f"worker-{i % 340}"), at(i * 0.06))
    ]
    incident = changes[-1].incident
    assert len(correlator) == 1
    assert Counter(str(c.kind) for c in changes) == {"opened": 1, "updated": 4, "counted": 995}
    assert dict(incident.counts) == {"pod-oom-killed": 1000}
    assert dict(incident.objects) == {"pod-oom-killed": 340}
    assert incident.objects_capped == ()
    (ranked,) = incident.diagnosis.findings
    assert len(ranked.finding.evidence) == 5


def test_storm_memory_is_bounded_and_the_count_becomes_a_lower_bound() -> None:
    correlator = Correlator(config=CorrelationConfig(max_objects=100, max_evidence=2))
    for i in range(340):
        correlator.add(oom(f"worker-{i}"), at(i * 0.1))
    (incident,) = correlator.open_incidents()
    assert dict(incident.objects) == {"pod-oom-killed": 100}
    assert incident.objects_capped == ("pod-oom-killed",)
    assert dict(incident.counts) == {"pod-oom-killed": 340}
    assert len(incident.diagnosis.findings[0].finding.evidence) == 2


def test_the_same_pod_again_counts_occurrences_not_objects() -> None:
    correlator = Correlator()
    for i in range(7):
        correlator.add(oom("worker-1"), at(i))
    (incident,) = correlator.open_incidents()
    assert (dict(incident.counts), dict(incident.objects)) == (
        {"pod-oom-killed": 7},
        {"pod-oom-killed": 1},
    )


# -- resolution ----------------------------------------------------------------------


def test_an_incident_resolves_when_its_workload_is_healthy_again() -> None:
    correlator = Correlator()
    opened = correlator.add(oom(), T0)[0].incident
    healthy = _signal(workload=ObjectRef("RayCluster", CLUSTER, NS))
    (change,) = correlator.healthy(healthy, at(120))
    assert change.kind is ChangeKind.RESOLVED
    assert change.card is NotificationKind.UPDATE
    resolved = change.incident
    assert (resolved.id, resolved.state, resolved.resolved_at, resolved.resolution) == (
        opened.id,
        IncidentState.RESOLVED,
        at(120),
        "the workload is healthy again",
    )
    assert resolved.notes[-1].text == "resolved: the workload is healthy again"
    assert len(correlator) == 0
    assert correlator.healthy(healthy, at(130)) == ()
    reopened = correlator.add(oom(), at(140))[0]
    assert reopened.kind is ChangeKind.OPENED
    assert reopened.incident.id != opened.id


def test_health_of_a_linked_workload_resolves_the_incident() -> None:
    correlator = Correlator()
    correlator.add(clash(), T0)
    (change,) = correlator.healthy("//RayJobSubmission/raysubmit_8nqL2dXbHu1Kc3Ve", at(60))
    assert change.incident.state is IncidentState.RESOLVED


@pytest.mark.parametrize(
    ("quiet_for", "resolved"),
    [(timedelta(minutes=29, seconds=59), False), (timedelta(minutes=30), True)],
)
def test_an_incident_resolves_after_a_quiet_period(quiet_for: timedelta, resolved: bool) -> None:
    correlator = Correlator()
    correlator.add(oom(), T0)
    correlator.add(oom("worker-2"), at(60))
    assert correlator.next_due() == at(60) + timedelta(minutes=30)
    changes = correlator.tick(at(60) + quiet_for)
    assert [c.incident.resolution for c in changes] == (
        ["no new findings for 30 min"] if resolved else []
    )
    assert len(correlator) == (0 if resolved else 1)


def test_restored_incidents_keep_correlating_after_a_restart() -> None:
    before = Correlator()
    before.add(clash(), T0)
    before.add(oom("worker-1"), at(10))
    after = Correlator()
    after.restore(before.open_incidents())
    (change,) = after.add(oom("worker-1"), at(20))
    assert change.kind is ChangeKind.COUNTED
    assert change.incident.id == before.open_incidents()[0].id
    assert dict(change.incident.counts) == {"named-actor-conflict": 1, "pod-oom-killed": 2}
    assert after.find("//RayJobSubmission/raysubmit_8nqL2dXbHu1Kc3Ve") == change.incident


def test_workload_labels_become_incident_labels() -> None:
    correlator = Correlator()
    (change,) = correlator.add(oom(**{"label.team": "rl"}), T0)
    assert dict(change.incident.labels) == {"team": "rl"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"window": timedelta(0)}, "window must be positive"),
        (
            {"window": timedelta(minutes=10), "quiet_period": timedelta(minutes=5)},
            "quiet_period cannot be shorter than window",
        ),
        ({"max_objects": 0}, "greater than or equal to 1"),
    ],
)
def test_bad_correlation_config_is_refused(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CorrelationConfig.model_validate(settings)


def test_a_rayjob_seen_by_the_ray_source_and_the_kubernetes_watch_is_one_key() -> None:
    """The Ray source of a RayJob's RayCluster names its Kubernetes cluster (`k8s_cluster`)
    beside its own poller name; the Kubernetes source's findings carry `cluster`."""

    by_ray = dataclasses.replace(
        clash(),
        fields=frozen_map(
            {
                "cluster": f"{NS}.{CLUSTER}",
                "k8s_cluster": "prod",
                "namespace": NS,
                "ray_cluster": CLUSTER,
                "rayjob": "verl-ppo-qwen",
            }
        ),
    )
    by_kube = dataclasses.replace(
        oom(), fields=frozen_map({**oom().fields, "cluster": "prod", "rayjob": "verl-ppo-qwen"})
    )
    assert (
        workload_keys(by_ray)[0] == workload_keys(by_kube)[0] == f"prod/{NS}/RayJob/verl-ppo-qwen"
    )
    correlator = Correlator()
    (opened,) = correlator.add(by_kube, at(0))
    (joined,) = correlator.add(by_ray, at(1))
    assert joined.incident.id == opened.incident.id
    assert joined.incident.cluster == "prod"


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("gpu-prod/ml-train/RayJob/verl-ppo-qwen", "ml-train/rayjob/verl-ppo-qwen"),
        ("gpu-prod/ml-train/-/-", "namespace ml-train, cluster gpu-prod (no workload named)"),
        ("/ml-train/-/-", "namespace ml-train (no workload named)"),
        ("//-/-", "no workload named"),  # a paste that names nothing: never `//-/-`
    ],
)
def test_a_workload_key_reads_as_people_name_it(key: str, said: str) -> None:
    assert key_text(key) == said
