"""The seed's RayJob and its Ray submission as the owner specs name them, and the findings
that name only one of them (a driver log posted for the submission, an OOMKilled worker
of the RayJob)."""

from __future__ import annotations

from bot.core.incidents.rayjob_owners import Owner
from bot.core.incidents.workloads import SUBMISSION_KIND
from bot.core.model import (
    Finding,
    ObjectRef,
)
from tests.support import findings

NS = "ml-train"
SUBMISSION = (
    "raysubmit_Qk8vXw2mT3nLp9Rb"  # the seed driver log's own Ray job (its last lines name it)
)
RAYJOB = ObjectRef("RayJob", "verl-ppo-qwen", NS)
RAYCLUSTER = "verl-ppo-qwen-raycluster-x7k2p"
OWNER = Owner(SUBMISSION, RAYJOB, "kmock", RAYCLUSTER)


def driver_log(**fields: str) -> Finding:
    """A finding of a driver log posted with `workload=RayJobSubmission/<id>` (and no
    cluster or namespace): all it names is the submission."""
    return findings.clash(fields, workload=ObjectRef(SUBMISSION_KIND, SUBMISSION))


def oom_of_the_rayjob() -> Finding:
    """A worker pod of the RayJob OOMKilled, as the Kubernetes watch reports it (the
    owner resolved to the RayJob, the cluster from `sources.kubernetes.cluster`)."""
    pod = ObjectRef("Pod", f"{RAYCLUSTER}-gpu-group-worker-2xk9c", NS)
    return findings.oom_killed(
        pod, RAYJOB, {"cluster": "kmock", "namespace": NS, "ray_cluster": RAYCLUSTER}
    )
