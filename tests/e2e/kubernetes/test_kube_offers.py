"""Honest offers: an action whose precondition the cluster answers "no" to is shown
withheld, with the reason, when the card is made (not offered and then refused), in
the daemon (`check_offers`) and in `pitcrew diagnose --kube` alike."""

from __future__ import annotations

from typing import Any

import pytest

from bot.adapters.kubernetes.api import RAY_CLUSTERS
from bot.adapters.kubernetes.bump import BumpMemoryExecutor
from bot.adapters.kubernetes.executors import executors
from bot.adapters.kubernetes.on_demand import diagnose_parts
from bot.core.diagnosis.engine import Engine
from bot.core.inputs import InputPart
from bot.core.model import Diagnosis
from bot.daemon.executor import Registry
from tests.e2e.kubernetes.conftest import Emulator, of_workload
from tests.e2e.kubernetes.test_kube_seed import CLUSTER, RAYJOB, seeded, watched
from tests.support import kube_objects as o
from tests.support.live_facts import check_offers

__all__ = ["seeded", "watched"]

pytestmark = pytest.mark.kube


def bump_of(diagnosis: Diagnosis) -> Any:
    return next(a for a in diagnosis.actions if a.action == "k8s.bump_memory")


def only_h200_nodes(emulator: Emulator) -> None:
    """The worker group may only run on a GPU pool scaled to zero."""
    path = "/spec/workerGroupSpecs/0/template/spec/nodeSelector"
    emulator.api.patch(
        RAY_CLUSTERS, o.NS, CLUSTER, [{"op": "add", "path": path, "value": {"pool": "h200"}}]
    )


def test_a_bump_no_node_can_take_is_withheld_with_the_reason_when_offered(
    seeded: tuple[Emulator, dict[str, Any], list[InputPart]], engine: Engine
) -> None:
    emulator, _, items = seeded
    only_h200_nodes(emulator)
    parts = of_workload(items, RAYJOB)
    offline = engine.diagnose(parts)
    assert bump_of(offline).offered  # the evidence alone would offer it

    registry = Registry({"k8s.bump_memory": BumpMemoryExecutor(emulator.api)})
    bump = bump_of(check_offers(offline, registry))
    assert not bump.offered
    assert bump.reason == "no node matches the template's nodeSelector pool=h200"

    cli = bump_of(diagnose_parts(engine, parts, executors(emulator.api)))
    assert not cli.offered
    assert cli.reason == "no node matches the template's nodeSelector pool=h200"


def test_a_bump_of_a_deleted_raycluster_says_it_is_gone(
    seeded: tuple[Emulator, dict[str, Any], list[InputPart]], engine: Engine
) -> None:
    emulator, _, items = seeded
    emulator.api.delete(RAY_CLUSTERS, o.NS, CLUSTER)
    offline = engine.diagnose(of_workload(items, RAYJOB))
    registry = Registry({"k8s.bump_memory": BumpMemoryExecutor(emulator.api)})
    bump = bump_of(check_offers(offline, registry))
    assert not bump.offered
    assert bump.reason == f"RayCluster ml-train/{CLUSTER} does not exist"


def test_a_bump_that_fits_stays_offered(
    seeded: tuple[Emulator, dict[str, Any], list[InputPart]], engine: Engine
) -> None:
    emulator, _, items = seeded
    offline = engine.diagnose(of_workload(items, RAYJOB))
    registry = Registry({"k8s.bump_memory": BumpMemoryExecutor(emulator.api)})
    assert check_offers(offline, registry) == offline
