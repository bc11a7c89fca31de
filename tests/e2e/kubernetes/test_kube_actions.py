"""The Kubernetes executors on the other templates they own and the guardrails they keep:
a Deployment and a StatefulSet are patched, a Job is recreated, the head group and a
RayJob's rayClusterSpec are found, a bump over node allocatable or the namespace quota is
withheld, and only a Failed or Evicted pod is deleted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kmock
import pytest
from kubernetes import client

from bot.adapters.kubernetes.api import (
    DEPLOYMENTS,
    EVENTS,
    JOBS,
    PODS,
    RAY_CLUSTERS,
    RAY_JOBS,
    STATEFUL_SETS,
    KubeApi,
)
from bot.adapters.kubernetes.base import EVENT_REASON, KubeActionConfig
from bot.adapters.kubernetes.bump import BumpMemoryExecutor
from bot.adapters.kubernetes.executors import RBAC, DeletePodExecutor
from bot.app.factories import build_registry
from bot.app.settings.sections import Settings
from bot.core.errors import ActionRefusedError
from tests.e2e.kubernetes.conftest import Emulator, install_seed, kubeconfig
from tests.support import kube_objects as o
from tests.support.executors import look, run, verified

pytestmark = pytest.mark.kube


def workload(kind: str, name: str, memory: str, **spec: Any) -> dict[str, Any]:
    api_version = "batch/v1" if kind == "Job" else "apps/v1"
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": o.NS, "uid": f"uid-{name}"},
        "spec": {
            **spec,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "sidecar", "image": "envoy"},
                        {
                            "name": "reward",
                            "image": "reward-model",
                            "resources": {
                                "limits": {"memory": memory},
                                "requests": {"memory": memory},
                            },
                        },
                    ]
                },
            },
        },
    }


def setup_cluster(emulator: Emulator, used: str = "10Gi", hard: str = "100Gi") -> None:
    emulator.create(o.node("cpu-1", "none", gpus=0, memory="64Gi"))
    emulator.create(o.quota("compute", hard, used))


def memory_of(obj: dict[str, Any] | None, container: int = 1) -> str:
    assert obj is not None
    containers = obj["spec"]["template"]["spec"]["containers"]
    return str(containers[container]["resources"]["limits"]["memory"])


def events(emulator: Emulator) -> list[dict[str, Any]]:
    return [e for e in emulator.api.list_all(EVENTS, o.NS) if e.get("reason") == EVENT_REASON]


@pytest.mark.parametrize(
    ("kind", "resource"), [("Deployment", DEPLOYMENTS), ("StatefulSet", STATEFUL_SETS)]
)
def test_a_deployment_or_statefulset_template_is_patched(
    emulator: Emulator, kind: str, resource: Any
) -> None:
    setup_cluster(emulator)
    emulator.create(workload(kind, "reward-server", "8Gi", replicas=2))
    executor = BumpMemoryExecutor(emulator.api)
    params = {
        "namespace": o.NS,
        "kind": kind,
        "name": "reward-server",
        "container": "reward",
        "current": "8Gi",
    }
    facts, preview = look(executor, params)
    assert facts == {"k8s.within_quota": True}
    assert "spec.template.containers[reward].resources.limits.memory: 8Gi → 12Gi" in preview
    assert "quota compute limits.memory: 10Gi used + 8Gi of 100Gi" in preview  # 2 replicas
    run(executor, params, "prop-d", "U5")
    after = emulator.api.get(resource, o.NS, "reward-server")
    assert memory_of(after) == "12Gi"
    assert after is not None
    assert "resources" not in after["spec"]["template"]["spec"]["containers"][0]  # the sidecar
    assert [e["involvedObject"]["kind"] for e in events(emulator)] == [kind]


def test_the_remediation_event_names_the_cluster_whose_pitcrew_made_the_change(
    emulator: Emulator,
) -> None:
    setup_cluster(emulator)
    emulator.create(workload("Deployment", "reward-server", "8Gi"))
    executor = BumpMemoryExecutor(emulator.api, KubeActionConfig(cluster="eu-a"))
    params = {
        "namespace": o.NS,
        "kind": "Deployment",
        "name": "reward-server",
        "container": "reward",
        "current": "8Gi",
    }
    run(executor, params, "prop-d", "U5")
    (event,) = events(emulator)
    assert event["metadata"]["annotations"] == {"pitcrew.io/cluster": "eu-a"}
    assert event["message"] == (
        "k8s.bump_memory approved by U5 (proposal prop-d on cluster eu-a): "
        "spec.template.containers[reward].resources.limits.memory: 8Gi → 12Gi; "
        "spec.template.containers[reward].resources.requests.memory: 8Gi → 12Gi"
    )


def test_a_job_is_recreated_with_the_new_memory(emulator: Emulator) -> None:
    setup_cluster(emulator)
    job = workload("Job", "eval-run", "4Gi", backoffLimit=0, parallelism=1)
    job["spec"]["selector"] = {
        "matchLabels": {"batch.kubernetes.io/controller-uid": "uid-eval-run"}
    }
    job["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = (
        "uid-eval-run"
    )
    job["status"] = {"failed": 1}
    emulator.create(job)
    executor = BumpMemoryExecutor(emulator.api)
    params = {
        "namespace": o.NS,
        "kind": "Job",
        "name": "eval-run",
        "container": "reward",
        "current": "4Gi",
    }
    done = run(executor, params, "prop-j", "U5")
    assert "(Job recreated)" in done
    after = emulator.api.get(JOBS, o.NS, "eval-run")
    assert after is not None
    assert memory_of(after) == "6Gi"
    assert "status" not in after  # a new Job, not the failed one
    assert "selector" not in after["spec"]  # generated anew by the API server
    assert after["spec"]["template"]["metadata"]["labels"] == {"app": "eval-run"}
    assert [e["involvedObject"]["kind"] for e in events(emulator)] == ["Job"]


@pytest.mark.slow
def test_the_head_group_and_a_rayjob_template_are_found(kuberay: Emulator) -> None:
    install_seed(kuberay)
    executor = BumpMemoryExecutor(kuberay.api)
    head = {
        "namespace": o.NS,
        "kind": "RayJob",
        "name": "verl-ppo-qwen",
        "group": "head",
        "current": "32Gi",
    }
    facts, preview = look(executor, head)
    assert facts == {"k8s.within_quota": True}
    assert (
        "RayJob ml-train/verl-ppo-qwen:\n  rayClusterSpec.headGroupSpec.containers[ray-head]"
        in preview
    )
    assert "32Gi → 48Gi" in preview
    assert (
        "RayCluster ml-train/verl-ppo-qwen-raycluster-x7k2p (template of the next submission)"
        in preview
    )
    run(executor, head, "prop-h", "U5")
    rayjob = kuberay.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen")
    cluster = kuberay.api.get(RAY_CLUSTERS, o.NS, "verl-ppo-qwen-raycluster-x7k2p")
    assert rayjob is not None
    assert cluster is not None
    spec = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert spec["containers"][0]["resources"]["limits"]["memory"] == "48Gi"
    live = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert live["resources"]["limits"]["memory"] == "48Gi"


@pytest.mark.parametrize(
    ("used", "hard", "node_memory", "max_memory", "reason"),
    [
        (
            "95Gi",
            "100Gi",
            "64Gi",
            "512Gi",
            "quota compute limits.memory: 95Gi used + 8Gi of 100Gi is over the quota",
        ),
        (
            "10Gi",
            "100Gi",
            "10Gi",
            "512Gi",
            "12Gi is more than the largest node allocatable memory (10Gi)",
        ),
        ("10Gi", "100Gi", "64Gi", "8Gi", "already at the cap of 8Gi"),
    ],
)
def test_a_bump_that_does_not_fit_is_withheld(
    emulator: Emulator, used: str, hard: str, node_memory: str, max_memory: str, reason: str
) -> None:
    emulator.create(o.node("cpu-1", "none", gpus=0, memory=node_memory))
    emulator.create(o.quota("compute", hard, used))
    emulator.create(workload("Deployment", "reward-server", "8Gi", replicas=2))
    executor = BumpMemoryExecutor(emulator.api, KubeActionConfig(max_memory=max_memory))
    params = {
        "namespace": o.NS,
        "kind": "Deployment",
        "name": "reward-server",
        "container": "reward",
    }
    facts, preview = look(executor, params)
    assert facts == {"k8s.within_quota": False}
    assert reason in preview
    with pytest.raises(ActionRefusedError):
        run(executor, params, "prop-q", "U5")
    assert memory_of(emulator.api.get(DEPLOYMENTS, o.NS, "reward-server")) == "8Gi"
    assert events(emulator) == []


def test_only_a_failed_or_evicted_pod_is_deleted(emulator: Emulator) -> None:
    evicted = o.gpu_user("evicted-worker", "cpu-1", 0, namespace=o.NS)
    evicted["status"] = {
        "phase": "Failed",
        "reason": "Evicted",
        "message": "The node was low on resource: memory.",
    }
    evicted["metadata"]["ownerReferences"] = [
        {"kind": "ReplicaSet", "name": "rs-1", "controller": True}
    ]
    running = o.gpu_user("running-worker", "cpu-1", 0, namespace=o.NS)
    emulator.create(evicted)
    emulator.create(running)
    executor = DeletePodExecutor(emulator.api)

    facts, preview = look(executor, {"namespace": o.NS, "name": "evicted-worker"})
    assert facts == {"k8s.pod_failed": True}
    assert (
        preview
        == "delete pod ml-train/evicted-worker (Failed, Evicted); ReplicaSet/rs-1 creates a new one"
    )
    run(executor, {"namespace": o.NS, "name": "evicted-worker"}, "prop-p", "U5")
    assert emulator.api.get(PODS, o.NS, "evicted-worker") is None
    assert verified(executor, {"namespace": o.NS, "name": "evicted-worker"})
    assert [e["involvedObject"]["name"] for e in events(emulator)] == ["evicted-worker"]

    facts, preview = look(executor, {"namespace": o.NS, "name": "running-worker"})
    assert facts == {"k8s.pod_failed": False}
    with pytest.raises(ActionRefusedError, match="no longer Failed or Evicted"):
        run(executor, {"namespace": o.NS, "name": "running-worker"}, "prop-p2", "U5")
    assert emulator.api.get(PODS, o.NS, "running-worker") is not None


def test_the_daemon_registry_builds_the_kubernetes_executor(
    kuberay: Emulator, tmp_path: Path
) -> None:
    """`actions.executors: {"k8s.*": kubernetes}` loads this module's `build(settings)`."""
    settings = Settings.model_validate(
        {
            "sources": {
                "kubernetes": {"kubeconfig": str(kubeconfig(tmp_path, kuberay)), "context": "kmock"}
            },
            "actions": {"executors": {"k8s.*": "kubernetes"}},
        }
    )
    built = build_registry(settings)
    assert built.actions() == (
        "k8s.add_shm",
        "k8s.bump_memory",
        "k8s.cordon_node",
        "k8s.delete_pod",
        "k8s.replace_worker_pods",
        "k8s.reschedule_gpu_pool",
        "k8s.scale_worker_group",
    )
    executor = built.get("k8s.delete_pod")
    assert isinstance(executor, DeletePodExecutor)
    install_seed(kuberay)
    bump = built.get("k8s.bump_memory")
    assert isinstance(bump, BumpMemoryExecutor)
    facts, _ = look(
        bump, {"namespace": o.NS, "kind": "RayJob", "name": "verl-ppo-qwen", "group": "gpu-group"}
    )
    assert facts == {"k8s.within_quota": True}  # it reaches the cluster the config names


def test_every_executor_declares_its_rbac() -> None:
    rules = {(r.group, res, verb) for r in RBAC for res in r.resources for verb in r.verbs}
    assert ("ray.io", "rayclusters", "patch") in rules
    assert ("", "events", "create") in rules
    assert ("", "pods", "delete") in rules
    assert ("apps", "deployments", "patch") in rules
    assert ("batch", "jobs", "create") in rules


def test_every_request_the_executor_makes_carries_the_credentials(emulator: Emulator) -> None:
    """A token from the kubeconfig or the service account reaches raw creates (the Event)
    as it reaches typed calls."""
    configuration = client.Configuration()
    configuration.host = emulator.url
    configuration.api_key = {"BearerToken": "s3cret"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    api = KubeApi(client.ApiClient(configuration))
    evicted = o.gpu_user("evicted-worker", "cpu-1", 0, namespace=o.NS)
    evicted["status"] = {"phase": "Failed", "reason": "Evicted"}
    emulator.create(evicted)
    run(DeletePodExecutor(api), {"namespace": o.NS, "name": "evicted-worker"}, "prop-a", "U5")

    def seen(k: Any) -> list[tuple[str, str]]:
        wanted = k[kmock.resource("v1/events")] | k[kmock.resource("v1/pods")]
        return [(r.method.value, r.headers.get("Authorization", "")) for r in wanted]

    requests = emulator.run(seen)[1:]  # after the test's own (anonymous) create
    assert {method for method, _ in requests} >= {"GET", "POST", "DELETE"}
    assert {auth for _, auth in requests} == {"Bearer s3cret"}
