"""The memory bump sized from what the group used: the group's observed peak (the killed
pod's usage at a kernel OOM kill counts as at least its limit) × the headroom factor,
rounded up to a Gi, within the cap; the preview says where the number came from, and
without metrics the configured factor applies and the preview says so."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest

from bot.adapters.prometheus.client import PrometheusClient, PrometheusConfig
from bot.adapters.prometheus.local import LocalPrometheus
from bot.adapters.prometheus.working_set import fetch_memory
from bot.app.settings.actions import ActionSettings
from bot.core.actions import tuning
from bot.core.actions.memory_evidence import GI, MemoryEvidence, MemoryTarget, PodSeries, size_limit
from bot.core.inputs.reader import read_stream
from bot.core.model import ActionOffer, Diagnosis
from tests.support.daemon import DESCRIBE, SEED, engine
from tests.support.memory_series import (
    LIMIT,
    SEED_CLUSTER,
    SEED_KILLED_AT,
    SEED_NS,
    SEED_POD,
    flat,
    leak,
    pod,
)

END = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
PATH = (
    "RayCluster ml-train/verl-ppo-qwen-raycluster-x7k2p workerGroupSpecs[gpu-group]"
    ".containers[ray-worker].resources.limits.memory: "
)


def seed_diagnosis() -> Diagnosis:
    parts = read_stream(io.BytesIO((SEED / DESCRIBE).read_bytes()), DESCRIBE)
    return tuning.tune(engine().diagnose(parts), ActionSettings().overrides())


def bump(diagnosis: Diagnosis) -> ActionOffer:
    return next(a for a in diagnosis.actions if a.action == "k8s.bump_memory")


def test_the_seed_bump_is_sized_from_prometheus(prometheus: LocalPrometheus) -> None:
    target = MemoryTarget(
        SEED_NS, SEED_POD, SEED_KILLED_AT, "ray-worker", "gpu-group", SEED_CLUSTER, "16Gi"
    )
    evidence = fetch_memory(PrometheusClient(PrometheusConfig(prometheus.url)), target)
    offer = bump(tuning.sized(seed_diagnosis(), evidence, headroom=1.25))
    assert offer.preview == PATH + (
        "16Gi → 20Gi (the killed pod's usage at the kill (at least its 16Gi limit) × 1.25 "
        "headroom, from Prometheus; a leak: more memory only moves the next kill later)"
    )
    assert (offer.params["limit"], offer.params["current"]) == ("20Gi", "16Gi")


def test_without_metrics_the_configured_factor_applies_and_the_preview_says_so() -> None:
    offer = bump(seed_diagnosis())
    assert offer.preview == PATH + "16Gi → 24Gi (× 1.5: no memory metrics)"
    silent = "no memory metrics: http://127.0.0.1:9 did not answer within 0.5 s"
    offer = bump(tuning.sized(seed_diagnosis(), None, 1.25, silent))
    assert offer.preview == PATH + f"16Gi → 24Gi (× 1.5: {silent})"
    assert offer.params["limit"] == ""


def evidence(killed: PodSeries, *group: PodSeries, kernel: bool = True) -> MemoryEvidence:
    return MemoryEvidence(killed, END, group, "gpu-group", kernel_kill=kernel)


@pytest.mark.parametrize(
    ("found", "headroom", "cap", "limit", "basis"),
    [
        (
            evidence(pod("w-0", flat(12.0), END), pod("w-1", flat(19.0), END, limit=24 * GI)),
            1.25,
            512,
            24,
            "the group's peak 19Gi × 1.25 headroom, from Prometheus",
        ),
        (
            evidence(pod("w-0", leak, END)),
            2.0,
            28,
            28,
            "the killed pod's usage at the kill (at least its 16Gi limit) × 2 headroom, from "
            "Prometheus, capped at 28Gi; a leak: more memory only moves the next kill later",
        ),
        (
            evidence(pod("w-0", flat(15.2), END), kernel=False),  # Ray's memory monitor
            1.25,
            512,
            19,
            "the killed pod's peak 15.2Gi × 1.25 headroom, from Prometheus",
        ),
    ],
    ids=["group-peak", "capped", "memory-monitor"],
)
def test_the_proposed_limit(
    found: MemoryEvidence, headroom: float, cap: int, limit: int, basis: str
) -> None:
    sizing = size_limit(found, LIMIT, headroom, cap * GI)
    assert sizing is not None
    assert (sizing.limit // GI, sizing.basis) == (limit, basis)


def test_evidence_that_asks_for_no_more_leaves_the_factor() -> None:
    low = evidence(pod("w-0", flat(6.0), END), kernel=False)
    assert size_limit(low, LIMIT, 1.25, 512 * GI) is None
    empty = evidence(PodSeries("w-0", "ray-worker", (), LIMIT))
    assert size_limit(empty, LIMIT, 1.25, 512 * GI) is None
