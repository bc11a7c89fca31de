"""Findings built directly, as the sources report them, for the correlation tests
(tests/core/test_incidents.py, test_owners.py, and the notify and report tests that
reuse their incidents): verl's register-center clash in a driver log, and a KubeRay
worker pod OOMKilled at its memory limit."""

from __future__ import annotations

from collections.abc import Mapping

from bot.core.model import Evidence, Finding, ObjectRef, Severity, SourceKind, frozen_map
from bot.core.taxonomy import Category

CLASH_LINE = "ValueError: The name qwAKMv_register_center (namespace=None) is already taken."


def clash(fields: Mapping[str, str], workload: ObjectRef | None = None) -> Finding:
    """The clash at line 41 of a Ray job's driver.log; `workload`: what the sender named."""
    return Finding(
        playbook="named-actor-conflict",
        category=Category.NAMED_ACTOR_CONFLICT,
        severity=Severity.ERROR,
        title="Named actor already taken",
        signature="already-taken",
        source=SourceKind.DRIVER_LOG,
        captures=frozen_map({"name": "qwAKMv_register_center", "ns": "None"}),
        evidence=(Evidence(CLASH_LINE, SourceKind.DRIVER_LOG, "driver.log", 41),),
        workload=workload,
        fields=frozen_map(fields),
    )


def oom_killed(pod: ObjectRef, workload: ObjectRef, fields: Mapping[str, str]) -> Finding:
    """`pod`'s ray-worker container OOMKilled (exit code 137), as the pod source reports it
    with the owner it resolved (`workload`)."""
    return Finding(
        playbook="pod-oom-killed",
        category=Category.POD_OOM_KILLED,
        severity=Severity.CRITICAL,
        title="Pod OOMKilled at its memory limit",
        signature="container-oomkilled",
        source=SourceKind.POD_STATUS,
        evidence=(
            Evidence(
                f"{pod.name}: container ray-worker terminated: OOMKilled (exit code 137)",
                SourceKind.POD_STATUS,
            ),
        ),
        obj=pod,
        workload=workload,
        fields=frozen_map(fields),
    )
