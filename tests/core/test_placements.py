"""An alert about a pod, a Job or a node joins the incident of the workload that failed
there, read as a specification: the alert and the Kubernetes evidence of the same
failure are one incident whichever arrives first; a GPU Xid alert on the node a Ray
worker died on makes `gpu_fault` the root cause and offers the node's cordon; an Xid
alert alone, or on a node two workloads failed on, keeps an incident of its own.

Real inputs through the built-in playbooks: webhook bodies Debian's Alertmanager
sent (tests/data/alertmanager/), a KubeRay worker pod's JSON (tests/data/inputs/)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.core.diagnosis.analysis import findings_from_hits
from bot.core.incidents.assessment import assessor
from bot.core.incidents.correlator import Change, ChangeKind, Correlator
from bot.core.incidents.placements import Placement, Placements, placements_of
from bot.core.inputs.alerts import alert_signal, read_webhook
from bot.core.inputs.segment import split_text
from bot.core.model import Finding, IncidentState, ObjectRef, Signal
from tests.support.daemon import engine

DATA = Path(__file__).resolve().parents[1] / "data"
T0 = datetime(2026, 12, 6, 6, 0, tzinfo=UTC)
NS = "rlhf"
RAYCLUSTER = ObjectRef("RayCluster", "openrlhf-ppo-raycluster-m2d8k", NS)
POD = "openrlhf-ppo-raycluster-m2d8k-actor-worker-h7x2c"
NODE = "gpu-h100-node-7"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def findings(parts: Any) -> list[Finding]:
    return findings_from_hits(engine().hits(list(parts)))


def pod(
    reason: str = "OOMKilled", code: int = 137, node: str = NODE, cluster: str = RAYCLUSTER.name
) -> list[Finding]:
    """The worker pod as the Kubernetes watch reports it: its last termination, waiting in
    CrashLoopBackOff, on `node`, owned by its RayCluster (`cluster`)."""
    text = (DATA / "inputs" / "pod-oomkilled.json").read_text()
    data = json.loads(text.replace(RAYCLUSTER.name, cluster))
    data["spec"]["nodeName"] = node
    status = data["status"]["containerStatuses"][0]
    status["lastState"]["terminated"].update(reason=reason, exitCode=code)
    return findings(split_text(json.dumps(data), "pod.json"))


def alert(name: str, **labels: str) -> list[Finding]:
    """The alert of a real webhook body, its labels changed."""
    webhook = read_webhook((DATA / "alertmanager" / name).read_bytes())
    first = webhook.alerts[0]
    changed = dataclasses.replace(first, labels={**first.labels, **labels})
    return findings([alert_signal(changed, webhook.external_url)])


def oom_alert() -> list[Finding]:
    return alert(
        "kube-pod-crashlooping.json",
        alertname="KubeContainerOOMKilled",
        namespace=NS,
        pod=POD,
        reason="OOMKilled",
    )


def xid_alert(node: str = NODE) -> list[Finding]:
    return alert("dcgm-xid.json", Hostname=node)


def feed(correlator: Correlator, batches: list[list[Finding]]) -> list[Change]:
    changes: list[Change] = []
    for n, batch in enumerate(batches):
        for finding in batch:
            changes.extend(correlator.add(finding, at(n)))
    return changes


def correlator() -> Correlator:
    return Correlator(assessor(engine().library))


@pytest.mark.parametrize("alert_first", [True, False])
def test_an_alert_on_a_pod_and_the_pods_own_status_are_one_incident(alert_first: bool) -> None:
    batches = [oom_alert(), pod()]
    correlate = correlator()
    feed(correlate, batches if alert_first else batches[::-1])
    (incident,) = correlate.open_incidents()
    assert incident.workload == RAYCLUSTER
    assert [a.name for a in incident.alerts] == ["KubeContainerOOMKilled"]
    primary = incident.diagnosis.primary
    assert primary is not None
    assert primary.category == "pod_oom_killed"
    sources = {e.source for e in primary.evidence}
    assert {str(s) for s in sources} == {"alert", "pod_status"}
    offered = [o.action for o in incident.diagnosis.actions if o.offered]
    assert "k8s.bump_memory" in offered


def test_the_incident_opened_on_the_pod_alone_becomes_the_workloads_and_says_so() -> None:
    correlate = correlator()
    (opened,) = feed(correlate, [oom_alert()])
    assert opened.kind is ChangeKind.OPENED
    assert opened.incident.key == f"/{NS}/Pod/{POD}"
    changes = feed(correlate, [[], pod()])
    adopted = changes[0]
    assert adopted.incident.id == opened.incident.id
    assert adopted.say == (
        f"pod {NS}/{POD} is RayCluster {NS}/{RAYCLUSTER.name}'s: "
        "this incident is now that RayCluster's."
    )


@pytest.mark.parametrize("alert_first", [True, False])
def test_an_xid_alert_on_the_node_a_ray_worker_died_on_is_its_gpu_fault(alert_first: bool) -> None:
    batches = [xid_alert(), pod(reason="Error", code=1)]
    correlate = correlator()
    feed(correlate, batches if alert_first else batches[::-1])
    (incident,) = correlate.open_incidents()
    assert incident.workload == RAYCLUSTER
    diagnosis = incident.diagnosis
    assert diagnosis.primary is not None
    assert diagnosis.primary.category == "gpu_fault"
    assert [str(f.category) for f in diagnosis.secondary] == ["crash_loop_backoff"]
    (cordon,) = [o for o in diagnosis.actions if o.action == "k8s.cordon_node"]
    assert (cordon.offered, dict(cordon.params)) == (True, {"name": NODE})


def test_an_xid_alert_on_a_node_without_ray_workers_is_the_nodes_incident() -> None:
    correlate = correlator()
    feed(correlate, [pod(reason="Error", code=1, node="cpu-node-1"), xid_alert()])
    by_workload = {str(i.workload): i for i in correlate.open_incidents()}
    node = by_workload["node/gpu-h100-node-7"]
    assert node.key == "//Node/gpu-h100-node-7"
    assert node.diagnosis.primary is not None
    assert node.diagnosis.primary.category == "gpu_fault"
    assert [o.action for o in node.diagnosis.actions if o.offered] == ["k8s.cordon_node"]


def test_a_node_two_workloads_failed_on_keeps_its_own_incident() -> None:
    correlate = correlator()
    other = pod(reason="Error", code=1, cluster="verl-grpo-raycluster-4nq8z")
    feed(correlate, [pod(reason="Error", code=1), other])
    for finding in xid_alert():
        (change,) = correlate.add(finding, at(5))
    assert change.kind is ChangeKind.OPENED
    assert change.incident.key == f"//Node/{NODE}"


def test_a_nodes_failures_older_than_the_window_place_nothing_there() -> None:
    correlate = correlator()
    feed(correlate, [pod(reason="Error", code=1)])
    late = T0 + correlate.config.window + timedelta(seconds=1)
    opened = [c for f in xid_alert() for c in correlate.add(f, late)]
    assert [c.incident.key for c in opened if c.kind is ChangeKind.OPENED] == [f"//Node/{NODE}"]


def test_a_resolved_alert_is_a_fact_on_the_incident_it_joins() -> None:
    correlate = correlator()
    feed(correlate, [oom_alert(), pod()])
    webhook = read_webhook(
        (DATA / "alertmanager" / "kube-pod-crashlooping-resolved.json").read_bytes()
    )
    resolved = dataclasses.replace(
        webhook.alerts[0],
        labels={**webhook.alerts[0].labels, "alertname": "KubeContainerOOMKilled", "namespace": NS,
                "pod": POD, "reason": "OOMKilled"},
    )  # fmt: skip
    changes = [c for f in findings([alert_signal(resolved)]) for c in correlate.add(f, at(9))]
    (change,) = changes
    assert change.kind is ChangeKind.UPDATED
    assert [(a.name, a.status) for a in change.incident.alerts] == [
        ("KubeContainerOOMKilled", "resolved")
    ]
    assert change.incident.state is IncidentState.OPEN  # the pod's own status still says so
    assert change.incident.notes[-1].text == "alert KubeContainerOOMKilled resolved"


def test_an_incident_whose_only_evidence_is_an_alert_resolves_with_it() -> None:
    correlate = correlator()
    feed(correlate, [alert("kube-pod-crashlooping.json")])
    resolved = read_webhook(
        (DATA / "alertmanager" / "kube-pod-crashlooping-resolved.json").read_bytes()
    )
    (change,) = [
        c for f in findings([alert_signal(resolved.alerts[0])]) for c in correlate.add(f, at(9))
    ]
    assert change.kind is ChangeKind.RESOLVED
    assert change.incident.resolution == "its alert KubePodCrashLooping resolved"
    assert len(correlate) == 0


def test_a_resolved_alert_alone_opens_nothing() -> None:
    resolved = read_webhook(
        (DATA / "alertmanager" / "kube-pod-crashlooping-resolved.json").read_bytes()
    )
    correlate = correlator()
    (finding,) = findings([alert_signal(resolved.alerts[0])])
    assert correlate.add(finding, at(0)) == ()
    assert len(correlate) == 0


def test_a_repeated_alert_counts_once_on_its_incident() -> None:
    correlate = correlator()
    feed(correlate, [alert("kube-pod-crashlooping.json"), alert("kube-pod-crashlooping.json")])
    (incident,) = correlate.open_incidents()
    assert len(incident.alerts) == 1


def test_the_places_remembered_are_bounded_oldest_first() -> None:
    places = Placements(limit=2)
    for n in range(3):
        places.learn(Placement(ObjectRef("Pod", f"p{n}", NS), RAYCLUSTER), at(n))
    assert len(places) == 2


def test_a_finding_naming_its_workload_places_it_on_its_pod_and_node() -> None:
    (oom,) = [f for f in pod() if f.category == "pod_oom_killed"]
    assert placements_of(oom) == (
        Placement(ObjectRef("Pod", POD, NS), RAYCLUSTER, "", RAYCLUSTER.name),
        Placement(ObjectRef("Node", NODE), RAYCLUSTER, "", RAYCLUSTER.name),
    )
    (alone,) = xid_alert()
    assert placements_of(alone) == ()


def test_kube_job_failed_on_a_rayjobs_submitter_joins_the_rayjob() -> None:
    """KubeRay's submitter Job has its RayJob's name; the Kubernetes watch resolves the
    Job's owner, the alert names the Job alone (kube-state-metrics' job_name)."""
    rayjob = ObjectRef("RayJob", "verl-ppo", "ml-train")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "verl-ppo", "namespace": "ml-train"},
        "status": {
            "failed": 3,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ],
        },
    }
    (signal,) = split_text(json.dumps(job), "job.json")
    assert isinstance(signal, Signal)
    watched = dataclasses.replace(signal, workload=rayjob)  # the owner the watch resolved
    alerted = alert(
        "kube-pod-crashlooping.json", alertname="KubeJobFailed", job_name="verl-ppo", pod=""
    )
    correlate = correlator()
    feed(correlate, [alerted, findings([watched])])
    (incident,) = correlate.open_incidents()
    assert incident.workload == rayjob
    assert [a.name for a in incident.alerts] == ["KubeJobFailed"]
