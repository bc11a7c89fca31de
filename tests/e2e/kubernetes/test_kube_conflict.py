"""A spec that changes between the preview and the approval is refused, never overwritten.

Two windows: someone edits the RayCluster after the card showed `16Gi → 24Gi` and
before the click (the executor sees the live value differs from the preview's); and
someone edits it in the instant between the executor's read and its patch (the patch's
JSON `test` operations make the API server refuse it atomically).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import kmock
import pytest

from bot.adapters.kubernetes.api import EVENTS, RAY_CLUSTERS, RAY_JOBS
from bot.adapters.kubernetes.base import EVENT_REASON, PROBE_ANNOTATION
from bot.adapters.kubernetes.bump import BumpMemoryExecutor
from bot.core.actions import approvals
from bot.core.actions.params import BumpMemory
from bot.core.actions.specs import ACTION_SPECS
from bot.core.actions.step import Step
from bot.core.errors import ActionRefusedError
from bot.core.model import Proposal, ProposalState
from bot.daemon.executor import checked
from tests.e2e.kubernetes.conftest import Emulator, install_seed
from tests.support import kube_objects as o
from tests.support.executors import look, run

pytestmark = pytest.mark.kube

CLUSTER = "verl-ppo-qwen-raycluster-x7k2p"
LIMIT = "/spec/workerGroupSpecs/0/template/spec/containers/0/resources/limits/memory"
REQUEST = "/spec/workerGroupSpecs/0/template/spec/containers/0/resources/requests/memory"
PARAMS: dict[str, Any] = {
    "namespace": o.NS,
    "kind": "RayCluster",
    "name": CLUSTER,
    "group": "gpu-group",
    "container": "ray-worker",
    "current": "16Gi",
    "factor": 1.5,
    "cap": "512Gi",
}


def worker_memory(emulator: Emulator) -> tuple[str, str]:
    cluster = emulator.api.get(RAY_CLUSTERS, o.NS, CLUSTER)
    assert cluster is not None
    resources = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0][
        "resources"
    ]
    return resources["limits"]["memory"], resources["requests"]["memory"]


def remediation_events(emulator: Emulator) -> list[dict[str, Any]]:
    return [e for e in emulator.api.list_all(EVENTS, o.NS) if e.get("reason") == EVENT_REASON]


def test_a_limit_changed_after_the_preview_is_refused_and_kept(kuberay: Emulator) -> None:
    install_seed(kuberay)
    executor = BumpMemoryExecutor(kuberay.api)
    facts, preview = look(executor, PARAMS)
    assert facts["k8s.within_quota"]
    assert "limits.memory: 16Gi → 24Gi" in preview
    preview_card = ACTION_SPECS["k8s.bump_memory"].preview(BumpMemory.check(PARAMS))

    # someone raises it by hand to 20Gi while the card waits for a click
    kuberay.api.patch(
        RAY_CLUSTERS, o.NS, CLUSTER, [{"op": "replace", "path": LIMIT, "value": "20Gi"}]
    )

    now = datetime.now(UTC)
    proposal = Proposal(
        id="prop-9",
        incident_id="inc-9",
        action="k8s.bump_memory",
        params=PARAMS,
        preview=preview_card,
        state=ProposalState.OFFERED,
        created_at=now,
        expires_at=now + timedelta(hours=1),
        preconditions=ACTION_SPECS["k8s.bump_memory"].preconditions,
    )
    live = checked(executor, Step.of_proposal(proposal)).live
    stale = approvals.revalidate(proposal, live)
    assert stale.startswith("the target changed since the preview")
    assert "20Gi → 30Gi" in stale

    with pytest.raises(ActionRefusedError) as refused:
        run(executor, PARAMS, "prop-9", "U1 (carol)")
    assert "is now 20Gi, not 16Gi as the preview showed" in str(refused.value)
    assert "nothing was changed" in str(refused.value)
    assert worker_memory(kuberay) == ("20Gi", "16Gi")
    rayjob = kuberay.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen")
    assert rayjob is not None
    template = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert template["containers"][0]["resources"]["limits"]["memory"] == "16Gi"
    assert remediation_events(kuberay) == []


def test_a_change_between_read_and_patch_is_refused_by_the_test_operation(
    kuberay: Emulator,
) -> None:
    install_seed(kuberay)
    executor = BumpMemoryExecutor(kuberay.api)
    assert look(executor, PARAMS)[0] == {"k8s.within_quota": True}

    def concurrent_edit(request: Any) -> None:
        """Another writer, right after pitcrew read the RayCluster (while it reads the
        namespace quota, the next request it makes)."""
        stored = kuberay.k.objects[kmock.resource("ray.io/v1/rayclusters"), o.NS, CLUSTER]
        spec = stored.raw["spec"]
        spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"][
            "memory"
        ] = "18Gi"
        stored.patch({"spec": spec})

    quotas = kmock.resource("v1/resourcequotas")
    kuberay.run(lambda k: k[kmock.action.LIST, quotas] >> concurrent_edit)

    with pytest.raises(ActionRefusedError) as refused:
        run(executor, PARAMS, "prop-10", "U1 (carol)")
    message = str(refused.value)
    assert f"RayCluster ml-train/{CLUSTER} changed after pitcrew read it" in message
    assert "test operation failed" in message
    assert "nothing was overwritten" in message
    # the concurrent value stands, and the patch did not half-apply (the request is intact)
    assert worker_memory(kuberay) == ("18Gi", "16Gi")
    cluster = kuberay.api.get(RAY_CLUSTERS, o.NS, CLUSTER)
    assert cluster is not None
    assert PROBE_ANNOTATION not in cluster["metadata"].get("annotations", {})
    assert remediation_events(kuberay) == []
