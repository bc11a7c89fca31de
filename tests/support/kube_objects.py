"""Kubernetes objects for the tests: the seed's RayJob (examples/seed/rayjob.yaml), the
RayCluster KubeRay makes from it, its pods as the kubelet reports them, GPU nodes, quotas
and events. Builders return plain dicts, as the API serves them. The seed case's builders
are the demo's (`bot.app.demo.seed`), shared here under their old names."""

from __future__ import annotations

from typing import Any

from bot.app.demo.seed import (
    GPU_PRODUCT,
    NS,
    SEED,
    cluster_of,
    node,
    oomkilled,
    quota,
    ray_pod,
    seed_driver_log,
    seed_objects,
    seed_rayjob,
    submitter,
)

__all__ = [
    "A100",
    "GPU_PRODUCT",
    "NS",
    "SEED",
    "cluster_of",
    "event",
    "gpu_user",
    "node",
    "oomkilled",
    "quota",
    "ray_pod",
    "seed_driver_log",
    "seed_objects",
    "seed_rayjob",
    "standalone_cluster",
    "submitter",
]

A100 = "NVIDIA-A100-SXM4-80GB"


def standalone_cluster(
    name: str, group: str, selector: dict[str, str], gpus: int = 4, replicas: int = 1
) -> dict[str, Any]:
    """A RayCluster users write themselves (no RayJob), one GPU worker group."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": "7"},
        "spec": {
            "rayVersion": "2.49.1",
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "ray-head",
                                "image": "rayproject/ray:2.49.1",
                                "resources": {
                                    "limits": {"cpu": "4", "memory": "16Gi"},
                                    "requests": {"cpu": "4", "memory": "16Gi"},
                                },
                            }
                        ]
                    }
                },
            },
            "workerGroupSpecs": [
                {
                    "groupName": group,
                    "replicas": replicas,
                    "minReplicas": replicas,
                    "maxReplicas": replicas,
                    "rayStartParams": {},
                    "template": {
                        "spec": {
                            "nodeSelector": dict(selector),
                            "containers": [
                                {
                                    "name": "ray-worker",
                                    "image": "rayproject/ray:2.49.1-gpu",
                                    "resources": {
                                        "limits": {
                                            "cpu": "8",
                                            "memory": "64Gi",
                                            "nvidia.com/gpu": str(gpus),
                                        },
                                        "requests": {
                                            "cpu": "8",
                                            "memory": "64Gi",
                                            "nvidia.com/gpu": str(gpus),
                                        },
                                    },
                                }
                            ],
                        }
                    },
                }
            ],
        },
        "status": {"state": "ready"},
    }


def gpu_user(name: str, node_name: str, gpus: int, namespace: str = "other") -> dict[str, Any]:
    """A running pod that holds GPUs on a node."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "main",
                    "image": "trainer",
                    "resources": {
                        "limits": {"nvidia.com/gpu": str(gpus)},
                        "requests": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def event(
    name: str,
    kind: str,
    obj: str,
    reason: str,
    message: str,
    *,
    namespace: str = NS,
    type_: str = "Warning",
    count: int = 1,
    when: str = "2025-11-03T10:20:02Z",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "involvedObject": {"kind": kind, "name": obj, "namespace": namespace},
        "reason": reason,
        "message": message,
        "type": type_,
        "count": count,
        "firstTimestamp": when,
        "lastTimestamp": when,
        "source": {"component": "default-scheduler"},
    }
