"""The remediation actions pitcrew knows, with their parameters and previews.

Declarations only: what an action needs and what it would change. Playbooks refer
to these ids; executors that touch Kubernetes or Ray live in adapters. Each action's
parameters are a model of `bot.core.actions.params`, named here by its class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.core import quantity
from bot.core.actions.params import (
    ActionParams,
    AddShm,
    BumpMemory,
    CordonNode,
    DeletePod,
    KillActor,
    RecreateRayJob,
    ReplaceWorkerPods,
    RescheduleGpuPool,
    ResubmitJob,
    ScaleWorkerGroup,
    StopJob,
)


@dataclass(frozen=True)
class Permission:
    """One Kubernetes RBAC rule an action's executor needs: verbs on resources of an
    API group, and why (docs/rbac.md and the Helm chart's Role list them)."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str


_EVENT = Permission("", ("events",), ("create",), "record the remediation")


@dataclass(frozen=True)
class ActionSpec:
    """Everything pitcrew knows about one action, in one place: its parameters, what
    it changes (`impact`) and how that reads (`preview`), the live facts checked when
    it is offered and again at approval (`preconditions`, ids of `FACTS`), the
    executor kind that runs it (`executor`, an `actions.executors` value), the RBAC
    that executor needs, whether it runs the workload again as it is (`rerun`: never
    offered before a change of the spec, `bot.core.actions.order`), whether it only
    helps once the workload runs again (`needs_rerun`: new pods, or a run that no
    longer meets a stale actor; offered with its next step as one plan, and `alone`
    says what happens when it runs without one) and whether it is such a next step
    (`completes`: a rerun, or new pods from the changed template)."""

    id: str
    summary: str
    params: type[ActionParams]
    impact: str
    preview: Callable[[Any], str]
    preconditions: tuple[str, ...] = ()
    executor: str = ""
    rbac: tuple[Permission, ...] = ()
    rerun: bool = False
    needs_rerun: bool = False
    completes: bool = False
    alone: str = ""


def _bump_preview(p: BumpMemory) -> str:
    path = {
        "RayCluster": "headGroupSpec" if p.group == "head" else f"workerGroupSpecs[{p.group}]",
        "RayJob": "rayClusterSpec."
        + ("headGroupSpec" if p.group == "head" else f"workerGroupSpecs[{p.group}]"),
    }.get(p.kind, "spec.template")
    container = f"containers[{p.container}]" if p.container else "containers[*]"
    if p.limit:
        change = f"{p.current or 'current'} → {p.limit} ({p.basis})"
    elif p.current:
        new = quantity.bump(p.current, p.factor, p.cap)
        change = f"{p.current} → {new} (× {p.factor:g}: {p.basis or 'no memory metrics'})"
    else:
        change = f"× {p.factor:g} (current value read at approval)"
    return f"{p.kind} {p.namespace}/{p.name} {path}.{container}.resources.limits.memory: {change}"


def _group_path(kind: str, group: str) -> str:
    path = "headGroupSpec" if group == "head" else f"workerGroupSpecs[{group}]"
    return f"rayClusterSpec.{path}" if kind == "RayJob" else path


def _shm_preview(p: AddShm) -> str:
    size = p.size or "half the memory limit"
    return (
        f"{p.kind} {p.namespace}/{p.name} {_group_path(p.kind, p.group)}: /dev/shm as an "
        f"emptyDir (medium: Memory, sizeLimit {size})"
    )


def _scale_preview(p: ScaleWorkerGroup) -> str:
    return (
        f"{p.kind} {p.namespace}/{p.name} workerGroupSpecs[{p.group}]: {p.add} more "
        "worker(s), within maxReplicas"
    )


def _recreate_preview(p: RecreateRayJob) -> str:
    how = (
        f"delete RayJob {p.namespace}/{p.name}, then create it again with the same spec"
        if p.naming == "same"
        else f"create RayJob {p.namespace}/{p.name}-retry-N with the same spec"
    )
    return how + (f", entrypoint argument {p.override}" if p.override else "")


def _replace_preview(p: ReplaceWorkerPods) -> str:
    return (
        f"{p.kind} {p.namespace}/{p.name} {_group_path(p.kind, p.group)}: delete the dying "
        "worker pods that still run an older template; KubeRay creates them again from the "
        "current one"
    )


def _kill_preview(p: KillActor) -> str:
    if p.namespace in ("", "None"):
        return f"ray.kill(ray.get_actor({p.name!r}, namespace=<the holder's, resolved live>))"
    return f"ray.kill(ray.get_actor({p.name!r}, namespace={p.namespace!r}))"


def _reschedule_preview(p: RescheduleGpuPool) -> str:
    return (
        f"{p.kind} {p.namespace}/{p.name} workerGroupSpecs[{p.group}] nodeSelector "
        f"{p.label_key}={p.label_value}; pending pods of the group recreated"
    )


ACTION_SPECS: Mapping[str, ActionSpec] = {
    spec.id: spec
    for spec in (
        ActionSpec(
            "k8s.bump_memory",
            "Raise the memory limit and request of the owning template",
            BumpMemory,
            "Pods already running keep their old limit: only pods created after the change "
            "get the new one.",
            _bump_preview,
            needs_rerun=True,
            alone=(
                "Pods already running keep their old limit; the workload's next run (a new "
                "submission of the RayJob, or pods KubeRay creates again) picks the new one up."
            ),
            preconditions=("k8s.within_quota",),
            executor="kubernetes",
            rbac=(
                Permission(
                    "ray.io", ("rayclusters", "rayjobs"), ("get", "patch"), "patch the template"
                ),
                Permission(
                    "apps", ("deployments", "statefulsets"), ("get", "patch"), "patch the template"
                ),
                Permission("batch", ("jobs",), ("get", "create", "delete"), "recreate a Job"),
                Permission("", ("nodes",), ("list",), "node allocatable memory"),
                Permission("", ("resourcequotas",), ("list",), "namespace ResourceQuota"),
                _EVENT,
            ),
        ),
        ActionSpec(
            "k8s.reschedule_gpu_pool",
            "Move a worker group onto a GPU pool with free capacity",
            RescheduleGpuPool,
            "The group's pending pods are deleted and recreated on the target pool.",
            _reschedule_preview,
            preconditions=("k8s.gpu_pool_has_capacity",),
            executor="kubernetes",
            rbac=(
                Permission(
                    "ray.io", ("rayclusters", "rayjobs"), ("get", "patch"), "set nodeSelector"
                ),
                Permission("", ("nodes",), ("list",), "GPU pool allocatable and taints"),
                Permission("", ("pods",), ("list",), "GPU requests on the pool, pending pods"),
                Permission("", ("pods",), ("delete",), "recreate the group's pending pods"),
                _EVENT,
            ),
        ),
        ActionSpec(
            "k8s.add_shm",
            "Give a group's pods a memory-backed /dev/shm (or a larger one)",
            AddShm,
            "New pods are needed: the group's pods get the volume when they are recreated.",
            _shm_preview,
            needs_rerun=True,
            alone=(
                "Pods already running keep their /dev/shm; the workload's next run (a new "
                "submission of the RayJob, or pods KubeRay creates again) gets the volume."
            ),
            preconditions=("k8s.shm_can_grow",),
            executor="kubernetes",
            rbac=(
                Permission(
                    "ray.io", ("rayclusters", "rayjobs"), ("get", "patch"), "add the volume"
                ),
                _EVENT,
            ),
        ),
        ActionSpec(
            "k8s.scale_worker_group",
            "Add workers to a group (replicas/minReplicas) within its maxReplicas",
            ScaleWorkerGroup,
            "KubeRay creates the extra worker pods; they take resources from the cluster.",
            _scale_preview,
            preconditions=("k8s.within_max_replicas",),
            executor="kubernetes",
            rbac=(
                Permission("ray.io", ("rayclusters",), ("get", "patch"), "the group's replicas"),
                Permission("ray.io", ("rayjobs",), ("get",), "a RayJob's RayCluster"),
                _EVENT,
            ),
        ),
        ActionSpec(
            "k8s.cordon_node",
            "Cordon a node that reports a GPU fault (no drain)",
            CordonNode,
            "No new pods are scheduled on the node; pods running there keep running.",
            lambda p: f"cordon node {p.name} (spec.unschedulable: true); nothing is drained",
            preconditions=("k8s.node_schedulable",),
            executor="kubernetes",
            rbac=(
                Permission("", ("nodes",), ("get", "patch"), "cordon the node (cluster-scoped)"),
                Permission("", ("pods",), ("list",), "show what runs on the node"),
                _EVENT,
            ),
        ),
        ActionSpec(
            "k8s.delete_pod",
            "Delete a failed or evicted pod so its controller recreates it",
            DeletePod,
            "The pod object is removed; its controller creates a new one.",
            lambda p: f"delete pod {p.namespace}/{p.name}",
            preconditions=("k8s.pod_failed",),
            executor="kubernetes",
            rbac=(Permission("", ("pods",), ("get", "delete"), "delete the failed pod"), _EVENT),
        ),
        ActionSpec(
            "k8s.replace_worker_pods",
            "Replace a group's dying worker pods that still run an older template",
            ReplaceWorkerPods,
            "The group's dying worker pods that still run the older template are deleted and "
            "KubeRay creates them again from the current one. What ran on them is lost: Ray "
            "retries their tasks and restarts actors that allow restarts (max_restarts); a job "
            "that cannot lose a worker fails, and a failed RayJob is then rerun from the new "
            "template.",
            _replace_preview,
            preconditions=("k8s.workload_running",),
            executor="kubernetes",
            rbac=(
                Permission("ray.io", ("rayclusters", "rayjobs"), ("get",), "the group's template"),
                Permission("", ("pods",), ("list",), "the group's pods and what they run"),
                Permission("", ("pods",), ("delete",), "replace the pods on an older template"),
                _EVENT,
            ),
            completes=True,
        ),
        ActionSpec(
            "kuberay.recreate_rayjob",
            "Run a failed RayJob again: the same spec, a new RayJob",
            RecreateRayJob,
            "KubeRay creates a new RayCluster (or uses the selected one) and submits again.",
            _recreate_preview,
            preconditions=("kuberay.rayjob_finished",),
            executor="kuberay",
            rbac=(
                Permission(
                    "ray.io", ("rayjobs",), ("get", "create", "delete"), "recreate the RayJob"
                ),
                _EVENT,
            ),
            rerun=True,
            completes=True,
        ),
        ActionSpec(
            "ray.kill_actor",
            "Kill a stale named actor",
            KillActor,
            "The actor is killed without restart; anything still using it fails.",
            _kill_preview,
            preconditions=("ray.holder_explicit", "ray.actor_stale", "ray.namespace_idle"),
            executor="ray",
            needs_rerun=True,
            alone="The failed job is not run again: resubmit it once the actor is gone.",
        ),
        ActionSpec(
            "ray.stop_job",
            "Stop a running Ray job",
            StopJob,
            "The job's driver and tasks are stopped.",
            lambda p: f"stop Ray job {p.submission_id}",
            executor="ray",
        ),
        ActionSpec(
            "ray.resubmit_job",
            "Resubmit a failed Ray job with the same entrypoint and runtime_env",
            ResubmitJob,
            "A new submission runs the same entrypoint; the old job stays as it is.",
            lambda p: (
                f"resubmit Ray job {p.submission_id} (new submission id)"
                + (f", entrypoint argument {p.override}" if p.override else "")
            ),
            preconditions=("ray.job_terminal", "ray.resubmits_below_cap", "ray.not_rayjob_owned"),
            executor="ray",
            rerun=True,
            completes=True,
        ),
    )
}

# Live facts an action may depend on: known only to adapters that can look at the
# cluster. Diagnosing from text, they are unknown and the action is withheld.
FACTS: Mapping[str, str] = {
    "ray.holder_explicit": (
        "the name's live holder, resolved with the State API, is one actor in an explicit "
        "namespace (not an anonymous per-job one)"
    ),
    "ray.actor_stale": "the actor is detached or its owner job has finished",
    "ray.namespace_idle": "no job is running in the actor's namespace",
    "ray.not_live_verl": (
        "the actor is not a verl register center or WorkerDict of a job still running"
    ),
    "ray.job_terminal": "the Ray job has finished",
    "ray.job_running": "the Ray job is still RUNNING or PENDING on the cluster",
    "ray.resubmits_below_cap": "the job has been resubmitted fewer times than allowed",
    "ray.not_rayjob_owned": (
        "the job runs straight on a long-lived RayCluster, not for a RayJob "
        "(a RayJob's job is rerun with kuberay.recreate_rayjob)"
    ),
    "k8s.gpu_pool_has_capacity": "the target GPU pool has free allocatable nvidia.com/gpu",
    "k8s.within_quota": "the new limit fits node allocatable and the namespace quota",
    "k8s.pod_failed": "the pod is still Failed or Evicted",
    "k8s.shm_can_grow": "the group's /dev/shm can be added or made larger",
    "k8s.within_max_replicas": "the worker group can grow within its maxReplicas",
    "k8s.node_schedulable": "the node exists and is not cordoned yet",
    "k8s.workload_running": (
        "the RayCluster still runs its workload (its RayJob has not finished), so its pods "
        "are replaced rather than the RayJob rerun"
    ),
    "kuberay.rayjob_finished": "the RayJob has finished (Failed or Complete) and is not rerun yet",
}


def preconditions_of(action: str) -> tuple[str, ...]:
    """The live facts checked before `action` is offered and again at approval."""
    spec = ACTION_SPECS.get(action)
    return spec.preconditions if spec is not None else ()
