"""The seed case as live Kubernetes objects, for the API emulator the demo (and the
Kubernetes tests) run it on.

Why this exists: the failure pitcrew was built for (docs/design.md; examples/seed/) happened on
a real cluster; on a laptop it is replayed on kmock's Kubernetes API emulator. These
builders make what the API would serve then: the RayJob of examples/seed/rayjob.yaml,
the RayCluster KubeRay made from it, its head and workers (one OOMKilled, its
`lastState.terminated.reason`), the submitter Job and pod whose log is the driver log
(examples/seed/driver.log), the A10G nodes and the namespace's memory quota. Builders
return plain dicts, as the API serves them; `install` creates them through the API.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

from bot.core.errors import PitcrewError

SEED = Path(__file__).resolve().parents[3] / "examples" / "seed"
NS = "ml-train"
OOM_KILLED_AT = datetime(2025, 11, 3, 10, 13, 58, tzinfo=UTC)  # the worker's OOM kill
GPU_PRODUCT = "nvidia.com/gpu.product"


class Cluster(Protocol):
    """What `install` needs of an emulator: create through the API, serve a pod log."""

    def create(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def serve_log(self, namespace: str, pod: str, text: bytes) -> None: ...


def _read(name: str) -> bytes:
    try:
        return (SEED / name).read_bytes()
    except OSError as error:
        raise PitcrewError(
            f"{SEED / name}: cannot read the seed case ({error.strerror}); "
            "the demo runs from a pitcrew source checkout"
        ) from None


def seed_rayjob() -> dict[str, Any]:
    rayjob: dict[str, Any] = yaml.safe_load(_read("rayjob.yaml"))
    rayjob["metadata"]["resourceVersion"] = "1001"
    rayjob["metadata"]["creationTimestamp"] = "2025-11-03T09:38:00Z"
    return rayjob


def seed_driver_log() -> bytes:
    return _read("driver.log")


def cluster_of(rayjob: dict[str, Any], state: str = "ready") -> dict[str, Any]:
    """The RayCluster KubeRay creates for a RayJob: its rayClusterSpec, owned by the RayJob."""
    name = rayjob["status"]["rayClusterName"]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": rayjob["metadata"]["namespace"],
            "uid": f"uid-{name}",
            "resourceVersion": "1002",
            "labels": {
                "ray.io/originated-from-crd": "RayJob",
                "ray.io/originated-from-cr-name": rayjob["metadata"]["name"],
            },
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": "RayJob",
                    "name": rayjob["metadata"]["name"],
                    "uid": rayjob["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": copy.deepcopy(rayjob["spec"]["rayClusterSpec"]),
        "status": {"state": state, "desiredWorkerReplicas": 2, "availableWorkerReplicas": 2},
    }


def ray_pod(
    cluster: dict[str, Any],
    name: str,
    group: str = "gpu-group",
    node: str = "",
    *,
    phase: str = "Running",
    container_statuses: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A pod of a RayCluster group, with the group template's spec, as KubeRay makes it."""
    spec = cluster["spec"]
    if group == "head":
        template = spec["headGroupSpec"]["template"]["spec"]
        node_type = "head"
    else:
        template = next(g for g in spec["workerGroupSpecs"] if g["groupName"] == group)["template"][
            "spec"
        ]
        node_type = "worker"
    pod_spec = copy.deepcopy(template)
    if node:
        pod_spec["nodeName"] = node
    meta = cluster["metadata"]
    status: dict[str, Any] = {"phase": phase}
    if container_statuses is not None:
        status["containerStatuses"] = container_statuses
    if conditions is not None:
        status["conditions"] = conditions
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "uid": f"uid-{name}",
            "resourceVersion": "2001",
            "labels": {
                "ray.io/cluster": meta["name"],
                "ray.io/group": "headgroup" if group == "head" else group,
                "ray.io/node-type": node_type,
                "ray.io/is-ray-node": "yes",
            },
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": "RayCluster",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": pod_spec,
        "status": status,
    }


def oomkilled(container: str, finished: str, restarts: int = 1) -> list[dict[str, Any]]:
    """containerStatuses of a container that was OOMKilled and restarted."""
    return [
        {
            "name": container,
            "ready": True,
            "restartCount": restarts,
            "image": "verlai/verl:vllm011.latest",
            "state": {"running": {"startedAt": finished.replace(":58Z", ":59Z")}},
            "lastState": {
                "terminated": {
                    "reason": "OOMKilled",
                    "exitCode": 137,
                    "startedAt": "2025-11-03T09:39:02Z",
                    "finishedAt": finished,
                }
            },
        }
    ]


def submitter(rayjob: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The K8s Job KubeRay runs `ray job submit` in, and its pod."""
    return submitter_job(rayjob), submitter_pod(rayjob)


def submitter_job(rayjob: dict[str, Any]) -> dict[str, Any]:
    """The K8s Job KubeRay runs `ray job submit` in, owned by the RayJob; it failed."""
    name = rayjob["metadata"]["name"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": rayjob["metadata"]["namespace"],
            "uid": f"uid-job-{name}",
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": "RayJob",
                    "name": name,
                    "uid": rayjob["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "ray-job-submitter", "image": "verlai/verl"}],
                }
            },
        },
        "status": {"failed": 1},
    }


def submitter_pod(rayjob: dict[str, Any]) -> dict[str, Any]:
    """The submitter Job's pod, whose log is the driver's; it exited 1."""
    name = rayjob["metadata"]["name"]
    terminated = {"reason": "Error", "exitCode": 1, "finishedAt": "2025-11-03T10:14:21Z"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-x9z2k",
            "namespace": rayjob["metadata"]["namespace"],
            "uid": f"uid-submitter-{name}",
            "creationTimestamp": "2025-11-03T09:40:40Z",
            "labels": {"batch.kubernetes.io/job-name": name, "job-name": name},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": f"uid-job-{name}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "ray-job-submitter", "image": "verlai/verl"}],
        },
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "ray-job-submitter",
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }
            ],
        },
    }


def node(
    name: str,
    product: str,
    gpus: int = 8,
    memory: str = "1000Gi",
    *,
    ready: bool = True,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {GPU_PRODUCT: product, "kubernetes.io/hostname": name},
        },
        "spec": {
            "taints": taints
            if taints is not None
            else [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        },
        "status": {
            "allocatable": {"cpu": "96", "memory": memory, "nvidia.com/gpu": str(gpus)},
            "capacity": {"cpu": "96", "memory": memory, "nvidia.com/gpu": str(gpus)},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "lastTransitionTime": "2025-11-03T08:00:00Z",
                }
            ],
        },
    }


def quota(name: str, hard: str, used: str, namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"hard": {"limits.memory": hard}},
        "status": {"hard": {"limits.memory": hard}, "used": {"limits.memory": used}},
    }


def seed_objects() -> dict[str, Any]:
    """The seed case as live objects: RayJob, its RayCluster, head and workers (one
    OOMKilled), the submitter Job and pod, A10G nodes and a namespace quota."""
    rayjob = seed_rayjob()
    cluster = cluster_of(rayjob)
    name = cluster["metadata"]["name"]
    head = ray_pod(
        cluster,
        f"{name}-head-8ffkm",
        "head",
        "cpu-node-1",
        container_statuses=[{"name": "ray-head", "restartCount": 0, "state": {"running": {}}}],
    )
    oom = ray_pod(
        cluster,
        f"{name}-gpu-group-worker-9zq4f",
        "gpu-group",
        "gpu-a10-node-3",
        container_statuses=oomkilled("ray-worker", OOM_KILLED_AT.strftime("%Y-%m-%dT%H:%M:%SZ")),
    )
    healthy = ray_pod(
        cluster,
        f"{name}-gpu-group-worker-2mdkq",
        "gpu-group",
        "gpu-a10-node-4",
        container_statuses=[{"name": "ray-worker", "restartCount": 0, "state": {"running": {}}}],
    )
    job, submitter_pod = submitter(rayjob)
    nodes = [node(f"gpu-a10-node-{i}", "NVIDIA-A10G", gpus=4, memory="180Gi") for i in (3, 4)]
    return {
        "rayjob": rayjob,
        "cluster": cluster,
        "pods": [head, oom, healthy, submitter_pod],
        "oom_pod": oom,
        "job": job,
        "submitter_pod": submitter_pod,
        "nodes": nodes,
        "quota": quota("compute", "512Gi", "200Gi"),
    }


def install(cluster: Cluster) -> dict[str, Any]:
    """The seed case's objects created in `cluster`, with the logs the kubelet would
    serve: the submitter pod's (the driver log) and the OOMKilled worker's previous one.
    The logs are served before their pods exist, as a kubelet serves a terminated
    container's log from the moment the pod shows it: a watcher reads it at its first
    sight of the pod, whatever the timing (served after, a fast watcher found none)."""
    seed = seed_objects()
    cluster.serve_log(NS, seed["submitter_pod"]["metadata"]["name"], seed_driver_log())
    cluster.serve_log(
        NS,
        seed["oom_pod"]["metadata"]["name"],
        b"(raylet) Worker 2321 started\n(WorkerDict pid=2321) loading Qwen2.5-7B shards\n",
    )
    for obj in [*seed["nodes"], seed["quota"], seed["rayjob"], seed["cluster"], seed["job"]]:
        cluster.create(obj)
    for pod in seed["pods"]:
        cluster.create(pod)
    return seed
