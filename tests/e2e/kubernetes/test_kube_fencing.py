"""A Kubernetes change made once, whichever replica makes it: a patch carries `test`
operations on what it read and marks its target with `pitcrew.io/last-proposal`, so a
deposed leader's late patch is refused by the API server, or recognised as done when
the new leader made that very proposal's change; a run a failover cut short after its
patch is verified, not patched again. On kmock's emulator, through the official client.
"""

from __future__ import annotations

from typing import Any

import kmock
import pytest

from bot.adapters.kubernetes.api import EVENTS, RAY_CLUSTERS
from bot.adapters.kubernetes.base import EVENT_REASON
from bot.adapters.kubernetes.bump import BumpMemoryExecutor
from bot.adapters.kubernetes.templates import PROPOSAL_ANNOTATION
from bot.core.actions import approvals
from bot.core.errors import ActionRefusedError
from bot.core.model import PlanStep
from bot.daemon.executor import checked
from tests.e2e.kubernetes.conftest import Emulator, install_seed
from tests.e2e.kubernetes.test_kube_conflict import CLUSTER, PARAMS, worker_memory
from tests.support import kube_objects as o
from tests.support.executors import run, step

pytestmark = pytest.mark.kube


def remediation_events(emulator: Emulator) -> list[dict[str, Any]]:
    return [e for e in emulator.api.list_all(EVENTS, o.NS) if e.get("reason") == EVENT_REASON]


def last_proposal(emulator: Emulator) -> str:
    cluster = emulator.api.get(RAY_CLUSTERS, o.NS, CLUSTER)
    assert cluster is not None
    return str(cluster["metadata"].get("annotations", {}).get(PROPOSAL_ANNOTATION, ""))


def test_a_run_cut_short_after_its_patch_is_verified_and_not_patched_again(
    kuberay: Emulator,
) -> None:
    install_seed(kuberay)
    executor = BumpMemoryExecutor(kuberay.api)
    run(executor, PARAMS, "prop-11", "U1")  # then the leader died, its ledger STARTED
    assert worker_memory(kuberay) == ("24Gi", "24Gi")

    resumed = step(executor, PARAMS, "prop-11", "U1")
    found = checked(executor, resumed)
    assert found.live.done == "already applied by proposal prop-11"
    offered = PlanStep(resumed.action, resumed.params, resumed.preview, resumed.preconditions)
    assert approvals.revalidate(offered, found.live) == ""  # not stale: in place
    assert executor.verify(resumed).ok
    assert worker_memory(kuberay) == ("24Gi", "24Gi")  # not 36Gi


def test_a_late_patch_of_the_proposal_another_replica_made_meanwhile_is_done(
    kuberay: Emulator,
) -> None:
    install_seed(kuberay)
    deposed = BumpMemoryExecutor(kuberay.api)
    late = step(deposed, PARAMS, "prop-12", "U1")
    stale_plan = deposed.plan(late)  # read 16Gi; then it stopped, and lost the lease

    run(BumpMemoryExecutor(kuberay.api), PARAMS, "prop-12", "U1")  # the new leader's run
    assert worker_memory(kuberay) == ("24Gi", "24Gi")

    done = deposed.execute(late, stale_plan)  # resumed: its patch's test on 16Gi fails
    assert "already applied by proposal prop-12 (made meanwhile by another replica)" in done
    assert worker_memory(kuberay) == ("24Gi", "24Gi")
    assert last_proposal(kuberay) == "prop-12"


def test_a_late_patch_over_someone_elses_change_is_refused_by_the_server(
    kuberay: Emulator,
) -> None:
    install_seed(kuberay)
    deposed = BumpMemoryExecutor(kuberay.api)
    late = step(deposed, PARAMS, "prop-13", "U1")
    stale_plan = deposed.plan(late)

    def by_hand(k: Any) -> None:  # not pitcrew: a person sets 20Gi meanwhile
        stored = k.objects[kmock.resource("ray.io/v1/rayclusters"), o.NS, CLUSTER]
        spec = stored.raw["spec"]
        spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"][
            "memory"
        ] = "20Gi"
        stored.patch({"spec": spec})

    kuberay.run(by_hand)
    with pytest.raises(ActionRefusedError) as refused:
        deposed.execute(late, stale_plan)
    assert "changed after pitcrew read it" in str(refused.value)
    assert worker_memory(kuberay) == ("20Gi", "16Gi")
    assert last_proposal(kuberay) == ""
    assert remediation_events(kuberay) == []
