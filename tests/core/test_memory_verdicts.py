"""The memory verdict as a pure function: series in, one line out; which finding names
the pod to look at; and what the series says about the findings (the classifier's
evidence: at the limit confirms the kernel's kill, far below it with Ray's monitor line
says Ray killed the worker)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.core.actions.memory_evidence import (
    GI,
    MemoryEvidence,
    PodSeries,
    Shape,
    explain,
    gib,
    target_of,
    verdict,
)
from bot.core.model import (
    Diagnosis,
    Finding,
    Incident,
    ObjectRef,
    RankedFinding,
    Role,
    Severity,
    SourceKind,
    frozen_map,
)
from bot.core.taxonomy import Category
from tests.support.memory_series import flat, leak, pod

END = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
KILLED = datetime(2026, 1, 5, 11, 58, tzinfo=UTC)
POD_FIELDS = {
    "pod": "rc-gpu-group-worker-1",
    "namespace": "ml",
    "container": "ray-worker",
    "ray_group": "gpu-group",
    "ray_cluster": "rc",
    "memory_limit": "16Gi",
}


def finding(category: str, fields: dict[str, str] | None = None, **captures: str) -> Finding:
    return Finding(
        playbook=category,
        category=Category(category),
        severity=Severity.CRITICAL,
        title=category,
        signature="s",
        source=SourceKind.POD_STATUS,
        captures=frozen_map(captures),
        fields=frozen_map(fields or {}),
        obj=ObjectRef("Pod", "rc-gpu-group-worker-1", "ml"),
        time=KILLED,
    )


def diagnosis(*findings: Finding) -> Diagnosis:
    ranked = tuple(
        RankedFinding(f, Role.PRIMARY if i == 0 else Role.SECONDARY) for i, f in enumerate(findings)
    )
    return Diagnosis(ranked, (), "")


def incident(*findings: Finding) -> Incident:
    return Incident("i-1", "k", END, END, diagnosis(*findings), namespace="ml")


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (16 * GI, "16Gi"),
        (int(15.94 * GI), "15.9Gi"),
        (int(0.8 * GI), "0.8Gi"),
        (50 * 2**20, "50Mi"),
    ],
)
def test_sizes_read_as_on_a_chart(size: int, text: str) -> None:
    assert gib(size) == text


def test_a_steady_pod_far_below_its_limit() -> None:
    found = verdict(MemoryEvidence(pod("w", flat(9.0), END), END))
    assert found.shape is Shape.STEADY
    assert found.line == (
        "peak 9Gi of 16Gi, steady at about 9Gi for 30 min before the kill (no leak or spike)"
    )
    assert (found.at_limit, found.far_below) == (False, True)


def test_samples_after_the_kill_do_not_count() -> None:
    killed_at = datetime(2026, 1, 5, 11, 50, tzinfo=UTC)  # 10 min before the leak peaks
    found = verdict(MemoryEvidence(pod("w", leak, END), killed_at))
    assert found.peak < 8 * GI


@pytest.mark.parametrize(
    ("findings", "pod_name"),
    [
        ((finding("pod_oom_killed", POD_FIELDS),), "rc-gpu-group-worker-1"),
        ((finding("ray_memory_monitor_oom", POD_FIELDS),), "rc-gpu-group-worker-1"),
        ((finding("pod_eviction", POD_FIELDS, resource="memory"),), "rc-gpu-group-worker-1"),
        (
            (finding("pod_eviction", POD_FIELDS, condition="MemoryPressure"),),
            "rc-gpu-group-worker-1",
        ),
        ((finding("pod_eviction", POD_FIELDS, resource="ephemeral-storage"),), None),
        ((finding("named_actor_conflict", POD_FIELDS),), None),
    ],
    ids=[
        "oom-killed",
        "memory-monitor",
        "evicted-memory",
        "memory-pressure",
        "evicted-disk",
        "not-memory",
    ],
)
def test_which_findings_ask_for_memory(findings: tuple[Finding, ...], pod_name: str | None) -> None:
    target = target_of(incident(*findings))
    assert (target.pod if target else None) == pod_name
    if target is not None:
        assert (target.namespace, target.group, target.cluster) == ("ml", "gpu-group", "rc")
        assert (target.container, target.spec_limit, target.killed_at) == (
            "ray-worker",
            "16Gi",
            KILLED,
        )
        assert target.kernel_kill is (findings[0].category is Category.POD_OOM_KILLED)


@pytest.mark.parametrize(
    ("series", "findings", "ending"),
    [
        (
            pod("w", leak, END),
            ("pod_oom_killed",),
            ". At the 16Gi limit before the kill: the kernel's OOM kill",
        ),
        (
            pod("w", flat(9.0), END),
            ("pod_oom_killed", "ray_memory_monitor_oom"),
            ". Far below the 16Gi limit: Ray's memory monitor killed the worker "
            "(ray_memory_monitor_oom), not the kernel at the pod limit",
        ),
        (
            pod("w", flat(9.0), END),
            ("pod_oom_killed",),
            ". Far below the 16Gi limit at the last sample: the rise was faster than the "
            "scrape interval, or the node ran out of memory",
        ),
        (pod("w", flat(14.0), END), ("pod_oom_killed",), "(no leak or spike)"),
    ],
    ids=["at-the-limit", "ray-monitor", "far-below", "in-between"],
)
def test_what_the_series_says_about_the_findings(
    series: PodSeries, findings: tuple[str, ...], ending: str
) -> None:
    said = explain(MemoryEvidence(series, END), diagnosis(*(finding(c) for c in findings)))
    assert said.endswith(ending), said
