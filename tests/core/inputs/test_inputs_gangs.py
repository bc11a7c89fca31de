"""The gang schedulers' objects: a Volcano PodGroup and a Kueue Workload say, in their
conditions, why a Ray gang waits or was evicted; each such condition is a signal, and a
condition that says all is well is none."""

from __future__ import annotations

import json
import textwrap

import pytest

from bot.core.model import Signal
from tests.support.daemon import engine
from tests.support.inputs import logs_of, parts_of, signals_of, summary

VOLCANO_MESSAGE = (
    "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
    "Pending: 4 Unschedulable. Origin reason is train-grpo-worker-1: 0/6 nodes are "
    "unavailable: 6 Insufficient nvidia.com/gpu."
)
KUEUE_MESSAGE = (
    "couldn't assign flavors to pod set workers: insufficient unused quota for "
    "nvidia.com/gpu in flavor a100-80gb, 4 more needed"
)
KUEUE_PREEMPTED = (
    "Preempted to accommodate a workload (UID: 8f2c1e0a, JobUID: 1d2e3f40) due to "
    "prioritization in the ClusterQueue"
)

# `kubectl get podgroup -o yaml` of a KubeRay cluster's gang (volcano v1.11+).
PODGROUP_YAML = textwrap.dedent(
    f"""\
    apiVersion: scheduling.volcano.sh/v1beta1
    kind: PodGroup
    metadata:
      name: ray-train-grpo-raycluster-x7k2p-pg
      namespace: ml
      ownerReferences:
      - apiVersion: ray.io/v1
        kind: RayCluster
        name: train-grpo-raycluster-x7k2p
        controller: true
        uid: 4b1f0c2e-8d3a-4e5f-9a6b-7c8d9e0f1a2b
    spec:
      minMember: 4
      minResources:
        nvidia.com/gpu: "32"
      queue: default
    status:
      conditions:
      - lastTransitionTime: "2025-11-03T08:02:11Z"
        message: '{VOLCANO_MESSAGE}'
        reason: NotEnoughResources
        status: "True"
        transitionID: 5e8b1c2d-3f4a-4b5c-8d6e-7f8091a2b3c4
        type: Unschedulable
      phase: Pending
    """
)

# `kubectl get workload -o json` of a RayJob's Kueue Workload, quota not reserved.
WORKLOAD_PENDING = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "Workload",
    "metadata": {
        "name": "rayjob-train-grpo-4f2c1",
        "namespace": "ml",
        "ownerReferences": [
            {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train-grpo", "controller": True}
        ],
    },
    "spec": {"queueName": "user-queue", "podSets": [{"name": "workers", "count": 4}]},
    "status": {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": KUEUE_MESSAGE,
                "lastTransitionTime": "2025-11-03T08:02:11Z",
            }
        ]
    },
}

WORKLOAD_EVICTED = {
    **WORKLOAD_PENDING,
    "status": {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "Quota reserved in ClusterQueue cluster-queue",
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
            },
            {
                "type": "Evicted",
                "status": "True",
                "reason": "Preempted",
                "message": KUEUE_PREEMPTED,
            },
        ]
    },
}

WORKLOAD_ADMITTED = {
    **WORKLOAD_PENDING,
    "status": {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "Quota reserved in ClusterQueue cluster-queue",
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
            },
            {
                "type": "PodsReady",
                "status": "True",
                "reason": "PodsReady",
                "message": "All pods reached readiness and the workload is running",
            },
        ]
    },
}

PODGROUP_SCHEDULED = textwrap.dedent(
    """\
    apiVersion: scheduling.volcano.sh/v1beta1
    kind: PodGroup
    metadata:
      name: ray-train-grpo-raycluster-x7k2p-pg
      namespace: ml
    status:
      conditions:
      - lastTransitionTime: "2025-11-03T08:02:11Z"
        reason: tasks in gang are ready to be scheduled
        status: "True"
        type: Scheduled
      phase: Running
      running: 4
    """
)


def _described(signal: Signal) -> tuple[tuple[str, str, str, str | None], str, str]:
    return summary(signal), signal.fields.get("condition", ""), signal.text


CASES = [
    pytest.param(
        PODGROUP_YAML,
        [
            (
                (
                    "pod_status",
                    "NotEnoughResources",
                    "ml/podgroup/ray-train-grpo-raycluster-x7k2p-pg",
                    "ml/raycluster/train-grpo-raycluster-x7k2p",
                ),
                "Unschedulable",
                VOLCANO_MESSAGE,
            )
        ],
        id="volcano podgroup unschedulable (yaml)",
    ),
    pytest.param(
        json.dumps(WORKLOAD_PENDING, indent=4),
        [
            (
                (
                    "pod_status",
                    "Pending",
                    "ml/workload/rayjob-train-grpo-4f2c1",
                    "ml/rayjob/train-grpo",
                ),
                "QuotaReserved",
                KUEUE_MESSAGE,
            )
        ],
        id="kueue workload without quota (json)",
    ),
    pytest.param(
        json.dumps(WORKLOAD_EVICTED, indent=4),
        [
            (
                (
                    "pod_status",
                    "Preempted",
                    "ml/workload/rayjob-train-grpo-4f2c1",
                    "ml/rayjob/train-grpo",
                ),
                "Evicted",
                KUEUE_PREEMPTED,
            )
        ],
        id="kueue workload evicted by preemption (json)",
    ),
    pytest.param(json.dumps(WORKLOAD_ADMITTED, indent=4), [], id="kueue workload admitted"),
    pytest.param(PODGROUP_SCHEDULED, [], id="volcano podgroup scheduled"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_a_gang_objects_conditions_are_its_signals(text: str, expected: list[object]) -> None:
    parts = parts_of(text)
    assert [_described(s) for s in signals_of(parts)] == expected
    assert logs_of(parts) == []


@pytest.mark.parametrize(
    ("text", "category"),
    [
        pytest.param(PODGROUP_YAML, "failed_scheduling_insufficient", id="volcano"),
        pytest.param(json.dumps(WORKLOAD_PENDING), "queue_admission_pending", id="kueue"),
        pytest.param(json.dumps(WORKLOAD_EVICTED), "node_lost_preemption", id="kueue preempted"),
    ],
)
def test_the_playbooks_read_the_gang_schedulers_words(text: str, category: str) -> None:
    primary = engine().diagnose_text(text).primary
    assert primary is not None
    assert str(primary.category) == category
