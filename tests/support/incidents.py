"""One KubeRay workload's findings built as the sources report them (an OOMKilled worker,
verl's register-center clash) at times from one start, and the two playbooks that offer
for them: what the correlation, notification and report specs are written over."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.core.model import (
    Finding,
    ObjectRef,
)
from tests.support import findings
from tests.support.playbooks import playbook

T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
NS = "ml-train"
CLUSTER = "rayjob-verl-raycluster-x7k2p"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def oom(pod: str = "worker-1", cluster: str = CLUSTER, **fields: str) -> Finding:
    """An OOMKilled pod status of a KubeRay worker, as the pod source reports it."""
    return findings.oom_killed(
        ObjectRef("Pod", pod, NS),
        ObjectRef("RayCluster", cluster, NS),
        {
            "pod": pod,
            "namespace": NS,
            "container": "ray-worker",
            "memory_limit": "16Gi",
            "ray_cluster": cluster,
            "ray_group": "gpu-group",
            "ray_node_type": "worker",
            **fields,
        },
    )


def clash(submission: str = "raysubmit_8nqL2dXbHu1Kc3Ve", **fields: str) -> Finding:
    """verl's register-center clash in the driver log of a Ray job on that RayCluster."""
    return findings.clash(
        {"submission_id": submission, "ray_cluster": CLUSTER, "namespace": NS, **fields}
    )


OOM_PLAYBOOK = playbook(
    "pod-oom-killed",
    "pod_oom_killed",
    [{"name": "oom", "reason": "OOMKilled"}],
    severity="critical",
    actions=[
        {
            "action": "k8s.bump_memory",
            "params": {
                "namespace": "{{ fields.namespace }}",
                "kind": "RayCluster",
                "name": "{{ fields.ray_cluster }}",
                "group": "{{ fields.ray_group }}",
                "current": '{{ fields.get("memory_limit", "") }}',
            },
            "guards": [{"primary": True}],
        }
    ],
)
CLASH_PLAYBOOK = playbook(
    "named-actor-conflict",
    "named_actor_conflict",
    [{"name": "taken", "regex": r"The name (?P<name>\S+) \(namespace=(?P<ns>[^)]*)\) is taken"}],
    actions=[
        {
            "action": "ray.kill_actor",
            "params": {"name": "{{ captures.name }}", "namespace": "{{ captures.ns }}"},
            "guards": [
                {"primary": True, "reason": "the clash is a symptom of the root cause"},
                {"capture": "ns", "not_matches": "^(None|)$", "reason": "namespace is anonymous"},
            ],
        }
    ],
)
