"""A GPU worker group that cannot be scheduled (`Insufficient nvidia.com/gpu` on its L4 pool)
while an A100 pool has free GPUs: the reschedule is offered once the live capacity check
confirms room, and applied moves the group (nodeSelector and tolerations) and recreates its
pending pod. With no free A100 it is withheld, saying why, and nothing changes."""

from __future__ import annotations

from typing import Any

import pytest

from bot.adapters.kubernetes.api import EVENTS, PODS, RAY_CLUSTERS
from bot.adapters.kubernetes.base import EVENT_REASON
from bot.adapters.kubernetes.executors import executors
from bot.adapters.kubernetes.on_demand import Target, diagnose_live
from bot.adapters.kubernetes.reschedule import RescheduleGpuPoolExecutor
from bot.adapters.kubernetes.source import KubernetesSource, KubeSourceConfig
from bot.core.diagnosis.engine import Engine
from bot.core.errors import ActionRefusedError
from bot.core.inputs import InputPart
from bot.core.model import ObjectRef, Signal
from tests.e2e.kubernetes.conftest import Emulator, of_workload, validate_kuberay, wait_for
from tests.support import kube_objects as o
from tests.support.daemon_process import wait_until
from tests.support.executors import look, run, verified

pytestmark = pytest.mark.kube

CLUSTER = "grpo-qwen25-7b-raycluster-tq8xz"
WORKLOAD = ObjectRef("RayCluster", CLUSTER, o.NS)
PENDING = f"{CLUSTER}-gpu-group-worker-7hx4m"
MESSAGE = (
    "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's "
    "node affinity/selector. preemption: 0/4 nodes are available: 2 No preemption victims "
    "found for incoming pod, 2 Preemption is not helpful for scheduling."
)


def install(emulator: Emulator, a100_free: bool) -> dict[str, Any]:
    cluster = o.standalone_cluster(CLUSTER, "gpu-group", {o.GPU_PRODUCT: "NVIDIA-L4"}, gpus=4)
    validate_kuberay(cluster)
    emulator.create(cluster)
    for name in ("l4-node-1", "l4-node-2"):
        emulator.create(o.node(name, "NVIDIA-L4", gpus=4))
        emulator.create(o.gpu_user(f"{name}-user", name, 4))
    emulator.create(o.node("a100-node-1", o.A100, gpus=8))
    emulator.create(o.node("a100-node-2", o.A100, gpus=8, ready=False))  # not Ready: not counted
    emulator.create(o.gpu_user("a100-tenant", "a100-node-1", 4 if a100_free else 8))
    pending = o.ray_pod(
        cluster,
        PENDING,
        "gpu-group",
        phase="Pending",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": MESSAGE,
                "lastTransitionTime": "2025-11-03T10:20:02Z",
            }
        ],
    )
    emulator.create(pending)
    emulator.create(
        o.event(f"{PENDING}.1804c2f1e4a3b2c1", "Pod", PENDING, "FailedScheduling", MESSAGE, count=9)
    )
    return cluster


def watched(emulator: Emulator) -> list[InputPart]:
    items: list[InputPart] = []
    source = KubernetesSource(
        emulator.api,
        KubeSourceConfig(namespaces=(o.NS,), backoff_initial=0.01, read_timeout=5),
    )
    source.start(items.append)
    try:
        assert wait_until(source.synced, 5)
        wait_for(
            lambda: any(isinstance(i, Signal) and i.reason == "FailedScheduling" for i in items),
            what="the FailedScheduling event",
        )
    finally:
        source.stop()
    return items


def reschedule_offer(
    engine: Engine, items: list[InputPart], facts: dict[str, bool] | None = None
) -> Any:
    diagnosis = engine.diagnose(of_workload(items, WORKLOAD), facts)
    assert diagnosis.primary is not None
    assert diagnosis.primary.category == "failed_scheduling_insufficient"
    return next(a for a in diagnosis.actions if a.action == "k8s.reschedule_gpu_pool")


def test_reschedule_is_offered_with_free_a100s_and_moves_the_group(
    kuberay: Emulator, engine: Engine
) -> None:
    install(kuberay, a100_free=True)
    items = watched(kuberay)
    event = next(i for i in items if isinstance(i, Signal) and i.reason == "FailedScheduling")
    assert event.fields["ray_cluster"] == CLUSTER  # the event's pod, resolved to its group
    assert event.fields["ray_group"] == "gpu-group"

    waiting = reschedule_offer(engine, items)
    assert not waiting.offered
    assert waiting.reason.startswith("needs a live check")

    executor = RescheduleGpuPoolExecutor(kuberay.api)
    facts, preview = look(executor, waiting.params)
    assert facts == {"k8s.gpu_pool_has_capacity": True}
    assert (
        "workerGroupSpecs[gpu-group].template.spec.nodeSelector: "
        "{nvidia.com/gpu.product: NVIDIA-L4} → {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}"
    ) in preview
    assert "a100-node-1: 4" in preview
    assert "a100-node-2" not in preview  # not Ready: not counted
    assert f"then delete pending pods: {PENDING}" in preview
    assert "nvidia.com/gpu=present:NoSchedule" in preview

    offer = reschedule_offer(engine, items, facts)
    assert offer.offered, offer.reason

    done = run(executor, offer.params, "prop-r1", "U7 (bob)")
    assert f"deleted pending pods: {PENDING}" in done
    cluster = kuberay.api.get(RAY_CLUSTERS, o.NS, CLUSTER)
    assert cluster is not None
    validate_kuberay(cluster)
    spec = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert spec["nodeSelector"] == {o.GPU_PRODUCT: o.A100}
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    assert kuberay.api.get(PODS, o.NS, PENDING) is None
    events = [e for e in kuberay.api.list_all(EVENTS, o.NS) if e.get("reason") == EVENT_REASON]
    assert len(events) == 1
    assert events[0]["involvedObject"]["name"] == CLUSTER
    assert "approved by U7 (bob)" in events[0]["message"]
    assert verified(executor, offer.params)


def test_without_free_a100s_the_reschedule_is_withheld_with_the_reason(
    kuberay: Emulator, engine: Engine
) -> None:
    install(kuberay, a100_free=False)
    items = watched(kuberay)
    executor = RescheduleGpuPoolExecutor(kuberay.api)
    params = reschedule_offer(engine, items).params
    facts, preview = look(executor, params)
    assert facts == {"k8s.gpu_pool_has_capacity": False}
    assert (
        "withheld: the pool nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB has 0 free "
        "nvidia.com/gpu on 1 node(s), room for 0 pod(s) of 4; 1 needed"
    ) in preview

    offer = reschedule_offer(engine, items, facts)
    assert not offer.offered
    assert "not true that the target GPU pool has free allocatable nvidia.com/gpu" in offer.reason

    before = kuberay.api.get(RAY_CLUSTERS, o.NS, CLUSTER)
    with pytest.raises(ActionRefusedError, match=r"has 0 free nvidia\.com/gpu"):
        run(executor, params, "prop-r2", "U7 (bob)")
    assert kuberay.api.get(RAY_CLUSTERS, o.NS, CLUSTER) == before
    assert kuberay.api.get(PODS, o.NS, PENDING) is not None


def test_live_diagnosis_fills_in_the_capacity_check(kuberay: Emulator, engine: Engine) -> None:
    """`pitcrew diagnose --kube NS/raycluster/NAME`: the live check's reason is shown."""
    install(kuberay, a100_free=False)
    diagnosis = diagnose_live(
        engine, kuberay.api, Target(o.NS, "RayCluster", CLUSTER), executors(kuberay.api)
    )
    offer = next(a for a in diagnosis.actions if a.action == "k8s.reschedule_gpu_pool")
    assert not offer.offered
    assert "has 0 free nvidia.com/gpu" in offer.reason

    kuberay.api.delete(PODS, "other", "a100-tenant")
    kuberay.create(o.gpu_user("a100-tenant", "a100-node-1", 2))
    diagnosis = diagnose_live(
        engine, kuberay.api, Target(o.NS, "RayCluster", CLUSTER), executors(kuberay.api)
    )
    offer = next(a for a in diagnosis.actions if a.action == "k8s.reschedule_gpu_pool")
    assert offer.offered, offer.reason
    assert "a100-node-1: 6" in offer.preview
