"""Parsed inputs through the whole engine and the real command line.

The point of parsing a `kubectl describe` or a Pod JSON is that the built-in
playbooks then name the cause and can offer a concrete action: pod_oom_killed
with a memory bump of the right RayCluster worker group.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.files.playbooks import builtin_engine
from bot.core.diagnosis.engine import Engine
from bot.core.model import Diagnosis
from tests.support.inputs import DATA, fixture

ROOT = Path(__file__).resolve().parents[3]


@functools.cache
def engine() -> Engine:
    return builtin_engine()


def diagnose(name: str) -> Diagnosis:
    return engine().diagnose_text(fixture(name), name)


def offered(diagnosis: Diagnosis, action: str) -> dict[str, Any]:
    (offer,) = [a for a in diagnosis.actions if a.action == action and a.offered]
    return dict(offer.params)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "target"),
    [
        (
            "describe-worker-oomkilled.txt",
            {
                "namespace": "ml-train",
                "kind": "RayCluster",
                "name": "rayjob-verl-raycluster-x7k2p",
                "group": "gpu-group",
                "container": "ray-worker",
                "current": "16Gi",
            },
        ),
        (
            "pod-oomkilled.json",
            {
                "namespace": "rlhf",
                "kind": "RayCluster",
                "name": "openrlhf-ppo-raycluster-m2d8k",
                "group": "actor",
                "container": "ray-worker",
                "current": "64Gi",
            },
        ),
        (
            "mixed-paste.txt",
            {
                "namespace": "ml-train",
                "kind": "RayCluster",
                "name": "rayjob-verl-raycluster-x7k2p",
                "group": "gpu-group",
                "container": "ray-worker",
                "current": "16Gi",
            },
        ),
    ],
)
def test_an_oomkilled_pod_is_the_root_cause_and_its_group_gets_more_memory(
    name: str, target: dict[str, str]
) -> None:
    diagnosis = diagnose(name)
    assert diagnosis.primary is not None
    assert diagnosis.primary.category == "pod_oom_killed"
    params = offered(diagnosis, "k8s.bump_memory")
    assert {key: params[key] for key in target} == target


@pytest.mark.slow
def test_in_the_motivating_paste_the_actor_clash_is_secondary() -> None:
    diagnosis = diagnose("mixed-paste.txt")
    assert "named_actor_conflict" in {f.category for f in diagnosis.secondary}
    assert not any(a.offered for a in diagnosis.actions if a.action == "ray.kill_actor")


def test_the_pending_worker_of_the_same_cluster_can_be_rescheduled_by_name() -> None:
    """The events table only names the pending pod; the paste's describe gives its
    cluster and group, so the reschedule action has a concrete target (and is withheld
    only because the OOM kill is the root cause)."""
    diagnosis = diagnose("mixed-paste.txt")
    (offer,) = [a for a in diagnosis.actions if a.action == "k8s.reschedule_gpu_pool"]
    assert dict(offer.params) == {
        "namespace": "ml-train",
        "kind": "RayCluster",
        "name": "rayjob-verl-raycluster-x7k2p",
        "group": "gpu-group",
    }


@pytest.mark.slow
def test_the_cli_diagnoses_a_describe_file_as_json() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bot",
            "diagnose",
            str(DATA / "describe-worker-oomkilled.txt"),
            "--format",
            "json",
        ],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    report = json.loads(result.stdout)
    assert report["primary"] == "pod_oom_killed"
    bump = next(a for a in report["actions"] if a["action"] == "k8s.bump_memory")
    assert bump["offered"] is True
    assert "16Gi → 24Gi" in bump["preview"]


@pytest.mark.slow
def test_the_pod_oom_killed_playbook_example_passes() -> None:
    """`pitcrew playbooks test` runs 'kubectl describe of an OOMKilled worker' through
    these parsers; it expects k8s.bump_memory offered."""
    from bot.core.quality.examples import run_examples

    results = [
        r
        for r in run_examples(engine())
        if r.playbook == "pod-oom-killed" and r.name == "kubectl describe of an OOMKilled worker"
    ]
    assert len(results) == 1
    assert results[0].problems == ()
