"""KubeRay's retry rule as pitcrew reads it (bot.core.incidents.kuberay_retries): which failures
KubeRay retries under `backoffLimit`, what the card says about each attempt, and when a
rerun is withheld because KubeRay's own retry is coming or because it cannot help."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from bot.core.incidents import kuberay_retries as retries
from bot.core.model import (
    ActionOffer,
    Diagnosis,
    Finding,
    ObjectRef,
    RayJobAttempt,
    Severity,
    SourceKind,
)
from bot.core.taxonomy import Category

RAYJOB = ObjectRef("RayJob", "train", "ml")


@pytest.mark.parametrize(
    ("fields", "reason", "will_retry", "spent"),
    [
        # Retrying is what KubeRay persists for a failure it retries
        (
            {"job_deployment_status": "Retrying", "failed_attempts": "1", "backoff_limit": "3"},
            "AppFailed",
            True,
            False,
        ),
        # the last of backoffLimit + 1 attempts
        (
            {"job_deployment_status": "Failed", "failed_attempts": "4", "backoff_limit": "3"},
            "AppFailed",
            False,
            True,
        ),
        # never retried, whatever the count (rayjob_controller.go v1.7.0)
        (
            {"job_deployment_status": "Failed", "failed_attempts": "1", "backoff_limit": "3"},
            "DeadlineExceeded",
            False,
            False,
        ),
        (
            {"job_deployment_status": "Failed", "failed_attempts": "1", "backoff_limit": "3"},
            "JobStatusCheckTimeoutExceeded",
            False,
            False,
        ),
        # a pre-running deadline is not excluded by the rule: KubeRay retries it
        (
            {"job_deployment_status": "Failed", "failed_attempts": "1", "backoff_limit": "3"},
            "PreRunningDeadlineExceeded",
            True,
            False,
        ),
        # ValidationFailed is its own deployment status; the rule needs Failed
        (
            {
                "job_deployment_status": "ValidationFailed",
                "failed_attempts": "0",
                "backoff_limit": "3",
            },
            "ValidationFailed",
            False,
            False,
        ),
        # no backoffLimit: one attempt
        ({"job_deployment_status": "Failed", "failed_attempts": "1"}, "AppFailed", False, True),
    ],
)
def test_kuberays_rule_decides_whether_it_retries(
    fields: dict[str, str], reason: str, will_retry: bool, spent: bool
) -> None:
    position = retries.position_of(fields, reason)
    assert position is not None
    assert (position.will_retry, position.spent) == (will_retry, spent)


@pytest.mark.parametrize(
    "fields",
    [
        {"job_deployment_status": "Running", "failed_attempts": "1"},
        {"job_deployment_status": "Failed"},  # a status without the count (KubeRay < 1.0)
        {"job_deployment_status": "Failed", "failed_attempts": "one"},
    ],
)
def test_only_a_counted_failure_has_a_position(fields: dict[str, str]) -> None:
    assert retries.position_of(fields, "AppFailed") is None


@pytest.mark.parametrize(
    ("fields", "in_progress"),
    [
        ({"job_deployment_status": "Running", "failed_attempts": "1", "backoff_limit": "3"}, True),
        (
            {"job_deployment_status": "Initializing", "failed_attempts": "3", "backoff_limit": "3"},
            True,
        ),
        # no retry left under KubeRay's rule: not KubeRay's retry running
        ({"job_deployment_status": "Running", "failed_attempts": "1"}, False),
        ({"job_deployment_status": "Running", "failed_attempts": "0", "backoff_limit": "3"}, False),
        ({"job_deployment_status": "Running"}, False),
        ({"job_deployment_status": "Complete", "failed_attempts": "1"}, False),
        ({"job_deployment_status": "Retrying", "failed_attempts": "1"}, False),
    ],
)
def test_a_retry_running_is_not_the_workload_healthy_again(
    fields: dict[str, str], in_progress: bool
) -> None:
    assert retries.attempt_in_progress(fields) is in_progress


def oom(cluster: str, limit: str = "16Gi") -> Finding:
    return Finding(
        playbook="pod-oom-killed",
        category=Category.POD_OOM_KILLED,
        severity=Severity.ERROR,
        title="Pod OOMKilled",
        signature="oomkilled",
        source=SourceKind.POD_STATUS,
        workload=RAYJOB,
        fields=MappingProxyType({"ray_cluster": cluster, "memory_limit": limit}),
    )


def failure(cluster: str, failed: int, deployment: str = "Retrying") -> Finding:
    return Finding(
        playbook="rayjob-cr-failure",
        category=Category.RAYJOB_CR_FAILURE,
        severity=Severity.ERROR,
        title="RayJob failed",
        signature="app-failed",
        source=SourceKind.RAY_JOB,
        workload=RAYJOB,
        obj=RAYJOB,
        reason="AppFailed",
        fields=MappingProxyType(
            {
                "ray_cluster": cluster,
                "job_deployment_status": deployment,
                "failed_attempts": str(failed),
                "backoff_limit": "3",
            }
        ),
    )


def attempts_of(*findings: Finding) -> tuple[RayJobAttempt, ...]:
    attempts: tuple[RayJobAttempt, ...] = ()
    for finding in findings:
        attempts = retries.recorded(attempts, finding)
    return attempts


def test_each_attempt_is_its_clusters_with_the_most_causal_class_in_either_order() -> None:
    attempts = attempts_of(
        failure("train-a", 1), oom("train-a"), oom("train-b", "24Gi"), failure("train-b", 2)
    )
    assert attempts == (
        RayJobAttempt("train-a", 1, "AppFailed", "pod_oom_killed", "16Gi", 3, "Retrying"),
        RayJobAttempt("train-b", 2, "AppFailed", "pod_oom_killed", "24Gi", 3, "Retrying"),
    )
    assert retries.recorded(attempts, oom("train-a")) is attempts  # nothing new: same value


OFFERS = (
    ActionOffer("k8s.bump_memory", MappingProxyType({}), True, "raise", "pod-oom-killed"),
    ActionOffer("kuberay.recreate_rayjob", MappingProxyType({}), True, "rerun", "pod-oom-killed"),
)


def judged(*findings: Finding) -> Diagnosis:
    return retries.judged(Diagnosis((), OFFERS, "Pod was OOMKilled."), attempts_of(*findings))


def offered(diagnosis: Diagnosis) -> dict[str, str]:
    return {o.action: "offered" if o.offered else o.reason for o in diagnosis.actions}


def test_while_kuberay_will_retry_no_rerun_is_offered() -> None:
    diagnosis = judged(oom("a"), failure("a", 1))
    assert diagnosis.text == (
        "KubeRay will retry (attempt 2 of 4). Attempt 1: pod_oom_killed at memory limit 16Gi "
        "(AppFailed).\nPod was OOMKilled."
    )
    assert offered(diagnosis) == {
        "k8s.bump_memory": "offered",
        "kuberay.recreate_rayjob": "KubeRay will retry (attempt 2 of 4): a rerun now would race it",
    }


def test_the_same_cause_twice_says_retrying_will_not_help_and_keeps_the_fix() -> None:
    diagnosis = judged(oom("a"), failure("a", 1), oom("b"), failure("b", 2))
    assert diagnosis.text.splitlines()[0] == (
        "Retrying will not help: attempts 1–2 of 4 failed the same way (pod_oom_killed at "
        "memory limit 16Gi). KubeRay will retry (attempt 3 of 4) with the same spec unless "
        "the fix is applied first."
    )
    assert offered(diagnosis)["k8s.bump_memory"] == "offered"
    assert offered(diagnosis)["kuberay.recreate_rayjob"].startswith("KubeRay will retry")


def test_a_different_cause_each_time_is_said_attempt_by_attempt() -> None:
    diagnosis = judged(oom("a"), failure("a", 1), oom("b", "24Gi"), failure("b", 2))
    assert diagnosis.text.splitlines()[0] == (
        "KubeRay will retry (attempt 3 of 4). Attempt 1: pod_oom_killed at memory limit 16Gi "
        "(AppFailed); attempt 2: pod_oom_killed at memory limit 24Gi (AppFailed)."
    )


def test_retries_spent_with_the_same_cause_offer_the_fix_and_the_rerun_after_it() -> None:
    runs = [f for n, c in enumerate("abcd", 1) for f in (oom(c), failure(c, n))]
    diagnosis = judged(*runs[:-1], failure("d", 4, "Failed"))
    assert diagnosis.text.splitlines()[0] == (
        "KubeRay's retries are spent and retrying will not help: all 4 attempts failed the "
        "same way (pod_oom_killed at memory limit 16Gi)."
    )
    assert offered(diagnosis) == {
        "k8s.bump_memory": "offered",
        "kuberay.recreate_rayjob": "offered",
    }
    alone = retries.judged(
        Diagnosis((), OFFERS[1:], ""), attempts_of(*runs[:-1], failure("d", 4, "Failed"))
    )
    assert offered(alone) == {
        "kuberay.recreate_rayjob": "retrying will not help: every attempt was pod_oom_killed "
        "at memory limit 16Gi"
    }


def test_a_failure_kuberay_does_not_retry_says_so_with_its_source() -> None:
    deadline = Finding(
        playbook="job-deadline-timeout",
        category=Category.JOB_DEADLINE_TIMEOUT,
        severity=Severity.ERROR,
        title="deadline",
        signature="rayjob-deadline-exceeded",
        source=SourceKind.RAY_JOB,
        workload=RAYJOB,
        reason="DeadlineExceeded",
        fields=MappingProxyType(
            {
                "ray_cluster": "a",
                "job_deployment_status": "Failed",
                "failed_attempts": "1",
                "backoff_limit": "3",
            }
        ),
    )
    diagnosis = judged(deadline)
    assert diagnosis.text.splitlines()[0] == (
        "KubeRay does not retry a DeadlineExceeded failure "
        "(ray-operator/controllers/ray/rayjob_controller.go, v1.7.0): attempt 1 of 4 was the "
        "last. Attempt 1: job_deadline_timeout (DeadlineExceeded)."
    )
    assert offered(diagnosis)["kuberay.recreate_rayjob"] == "offered"


def test_a_rayjob_without_retries_is_left_as_assessed() -> None:
    single = Finding(
        playbook="rayjob-cr-failure",
        category=Category.RAYJOB_CR_FAILURE,
        severity=Severity.ERROR,
        title="RayJob failed",
        signature="app-failed",
        source=SourceKind.RAY_JOB,
        workload=RAYJOB,
        reason="AppFailed",
        fields=MappingProxyType(
            {"ray_cluster": "a", "job_deployment_status": "Failed", "failed_attempts": "1"}
        ),
    )
    before = Diagnosis((), OFFERS, "text")
    assert retries.judged(before, attempts_of(single)) is before


def bump(namespace: str, kind: str, name: str) -> ActionOffer:
    params = {"namespace": namespace, "kind": kind, "name": name, "group": "gpu", "current": "16Gi"}
    return ActionOffer("k8s.bump_memory", MappingProxyType(params), True, "raise", "pod-oom-killed")


@pytest.mark.parametrize(
    ("offer", "target", "preview"),
    [
        # an attempt's RayCluster, which KubeRay deletes: the RayJob's template instead
        (
            bump("ml", "RayCluster", "a"),
            ("RayJob", "train"),
            "RayJob ml/train rayClusterSpec.workerGroupSpecs[gpu].containers[*].resources."
            "limits.memory: 16Gi → 24Gi",
        ),
        (bump("ml", "RayCluster", "b"), ("RayJob", "train"), "RayJob ml/train"),
        # a RayCluster no attempt ran on, or another namespace's: left as the playbook aimed it
        (bump("ml", "RayCluster", "shared"), ("RayCluster", "shared"), ""),
        (bump("other", "RayCluster", "a"), ("RayCluster", "a"), ""),
    ],
)
def test_a_fix_aimed_at_an_attempts_raycluster_is_aimed_at_the_rayjobs_template(
    offer: ActionOffer, target: tuple[str, str], preview: str
) -> None:
    attempts = attempts_of(oom("a"), failure("a", 1), oom("b"), failure("b", 2))
    offer = dataclasses.replace(offer, preview="before")
    diagnosis = retries.judged(Diagnosis((), (offer,), ""), attempts, RAYJOB)
    (judged_offer,) = diagnosis.actions
    assert (judged_offer.params["kind"], judged_offer.params["name"]) == target
    assert judged_offer.preview.startswith(preview or "before")
    assert judged_offer.offered
    alone = retries.judged(Diagnosis((), (offer,), ""), attempts)  # no RayJob known
    assert alone.actions == (offer,)
