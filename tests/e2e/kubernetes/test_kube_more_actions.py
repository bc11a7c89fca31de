"""k8s.add_shm, k8s.scale_worker_group and k8s.cordon_node against kmock's emulator over
HTTP: each previews what it changes, refuses with the reason when its guard fails,
patches with `test` operations, records a `PitcrewRemediation` Event and verifies."""

from __future__ import annotations

from typing import Any

import pytest

from bot.adapters.kubernetes.api import EVENTS, NODES, PODS, RAY_CLUSTERS, RAY_JOBS
from bot.adapters.kubernetes.base import EVENT_REASON
from bot.adapters.kubernetes.cordon import CordonNodeExecutor
from bot.adapters.kubernetes.scale import ScaleWorkerGroupExecutor
from bot.adapters.kubernetes.shm import AddShmExecutor
from bot.core.errors import ActionRefusedError
from tests.e2e.kubernetes.conftest import Emulator, install_seed, validate_kuberay
from tests.support import kube_objects as o
from tests.support.executors import look, run, verified

pytestmark = pytest.mark.kube

CLUSTER = "verl-ppo-qwen-raycluster-x7k2p"
GROUP = {"namespace": o.NS, "kind": "RayCluster", "name": CLUSTER, "group": "gpu-group"}


@pytest.fixture
def seeded(kuberay: Emulator) -> Emulator:
    install_seed(kuberay)
    return kuberay


def worker_template(obj: dict[str, Any] | None, base: tuple[str, ...] = ("spec",)) -> Any:
    assert obj is not None
    spec = obj
    for key in base:
        spec = spec[key]
    return spec["workerGroupSpecs"][0]["template"]["spec"]


def remediations(emulator: Emulator, namespace: str = o.NS) -> list[dict[str, Any]]:
    return [e for e in emulator.api.list_all(EVENTS, namespace) if e.get("reason") == EVENT_REASON]


# -- k8s.add_shm ----------------------------------------------------------------------------


def test_add_shm_mounts_a_memory_backed_dev_shm_on_the_raycluster_and_its_rayjob(
    seeded: Emulator,
) -> None:
    executor = AddShmExecutor(seeded.api)
    facts, preview = look(executor, GROUP)
    assert facts == {"k8s.shm_can_grow": True}
    shown = "/dev/shm: none (64Mi by default) → emptyDir (medium: Memory, sizeLimit 8Gi)"
    assert (
        f"RayCluster ml-train/{CLUSTER} workerGroupSpecs[gpu-group].containers[ray-worker]: {shown}"
        in preview
    )
    assert (
        f"RayJob ml-train/verl-ppo-qwen rayClusterSpec.workerGroupSpecs[gpu-group].containers[ray-worker]: {shown}"
        in preview
    )

    run(executor, GROUP, "prop-shm", "U042")
    for obj, base in (
        (seeded.api.get(RAY_CLUSTERS, o.NS, CLUSTER), ("spec",)),
        (seeded.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen"), ("spec", "rayClusterSpec")),
    ):
        assert obj is not None
        validate_kuberay(obj)
        template = worker_template(obj, base)
        assert {
            "name": "pitcrew-dshm",
            "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"},
        } in template["volumes"]
        assert {"name": "pitcrew-dshm", "mountPath": "/dev/shm"} in template["containers"][0][
            "volumeMounts"
        ]
    assert verified(executor, GROUP)
    assert {e["involvedObject"]["kind"] for e in remediations(seeded)} == {"RayCluster", "RayJob"}

    facts, preview = look(executor, GROUP)
    assert facts == {"k8s.shm_can_grow": False}
    assert preview == (
        "withheld: workerGroupSpecs[gpu-group].containers[ray-worker] already has /dev/shm as "
        "emptyDir (medium: Memory, sizeLimit 8Gi), not smaller than 8Gi"
    )
    grown = {**GROUP, "size": "12Gi"}
    assert "sizeLimit 8Gi) → emptyDir (medium: Memory, sizeLimit 12Gi)" in look(executor, grown)[1]
    run(executor, grown, "prop-shm-2", "U042")
    volumes = worker_template(seeded.api.get(RAY_CLUSTERS, o.NS, CLUSTER))["volumes"]
    assert [v["emptyDir"]["sizeLimit"] for v in volumes if v["name"] == "pitcrew-dshm"] == ["12Gi"]


def test_add_shm_refuses_a_group_that_does_not_exist(seeded: Emulator) -> None:
    params = {**GROUP, "group": "cpu-group"}
    facts, preview = look(AddShmExecutor(seeded.api), params)
    assert facts == {"k8s.shm_can_grow": False}
    assert preview == (
        f"withheld: RayCluster ml-train/{CLUSTER} has no group cpu-group with container (first)"
    )
    with pytest.raises(ActionRefusedError):
        run(AddShmExecutor(seeded.api), params, "prop-x", "U042")


# -- k8s.scale_worker_group -------------------------------------------------------------------


def test_scaling_a_group_at_its_max_replicas_is_refused(seeded: Emulator) -> None:
    executor = ScaleWorkerGroupExecutor(seeded.api)
    facts, preview = look(executor, GROUP)
    assert facts == {"k8s.within_max_replicas": False}
    assert preview == (
        f"withheld: RayCluster ml-train/{CLUSTER} workerGroupSpecs[gpu-group] is at its "
        "maxReplicas (2): it cannot grow; raise maxReplicas or free resources"
    )
    with pytest.raises(ActionRefusedError, match="maxReplicas"):
        run(executor, GROUP, "prop-s", "U042")


def test_scaling_a_group_raises_replicas_within_max_replicas(seeded: Emulator) -> None:
    path = "/spec/workerGroupSpecs/0/maxReplicas"
    seeded.api.patch(RAY_CLUSTERS, o.NS, CLUSTER, [{"op": "replace", "path": path, "value": 3}])
    executor = ScaleWorkerGroupExecutor(seeded.api)
    params = {**GROUP, "kind": "RayJob", "name": "verl-ppo-qwen", "add": 4}
    facts, preview = look(executor, params)
    assert facts == {"k8s.within_max_replicas": True}
    assert preview.splitlines()[0] == (
        f"RayCluster ml-train/{CLUSTER} workerGroupSpecs[gpu-group].replicas: 2 → 3 (maxReplicas 3)"
    )
    run(executor, params, "prop-s", "U042")
    cluster = seeded.api.get(RAY_CLUSTERS, o.NS, CLUSTER)
    assert cluster is not None
    validate_kuberay(cluster)
    assert cluster["spec"]["workerGroupSpecs"][0]["replicas"] == 3
    assert verified(executor, params)
    assert [e["involvedObject"]["name"] for e in remediations(seeded)] == [CLUSTER]


# -- k8s.cordon_node ----------------------------------------------------------------------------


def test_cordoning_shows_what_runs_there_and_never_drains(seeded: Emulator) -> None:
    executor = CordonNodeExecutor(seeded.api)
    params = {"name": "gpu-a10-node-3"}
    facts, preview = look(executor, params)
    assert facts == {"k8s.node_schedulable": True}
    assert preview.splitlines()[:2] == [
        "cordon node gpu-a10-node-3 (spec.unschedulable: true); nothing is drained",
        "running there (1 pods, they keep running): "
        f"ml-train/{CLUSTER}-gpu-group-worker-9zq4f (RayCluster {CLUSTER})",
    ]
    done = run(executor, params, "prop-c", "U042")
    assert "spec.unschedulable → true (not drained)" in done
    node = seeded.api.get(NODES, None, "gpu-a10-node-3")
    assert node is not None
    assert node["spec"]["unschedulable"] is True
    assert verified(executor, params)
    running = [
        p for p in seeded.api.list_all(PODS, o.NS) if p["spec"].get("nodeName") == "gpu-a10-node-3"
    ]
    assert running  # nothing was evicted or deleted
    (event,) = remediations(seeded, "default")
    assert event["involvedObject"]["kind"] == "Node"
    assert event["involvedObject"]["name"] == "gpu-a10-node-3"

    assert look(executor, params) == (
        {"k8s.node_schedulable": False},
        "withheld: node gpu-a10-node-3 is already cordoned",
    )
    with pytest.raises(ActionRefusedError, match="already cordoned"):
        run(executor, params, "prop-c2", "U042")


def test_cordoning_a_node_that_is_gone_says_so(seeded: Emulator) -> None:
    assert look(CordonNodeExecutor(seeded.api), {"name": "gpu-h100-node-9"}) == (
        {"k8s.node_schedulable": False},
        "withheld: node gpu-h100-node-9 does not exist",
    )
