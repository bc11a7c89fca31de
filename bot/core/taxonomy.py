"""Failure categories of Ray on Kubernetes and their precedence (docs/failure-classes.md,
generated from these and the playbooks).

The category ids are what playbooks declare and what `pitcrew diagnose` reports;
the precedence decides which of several findings is the root cause.
"""

from enum import StrEnum


class Category(StrEnum):
    NAMED_ACTOR_CONFLICT = "named_actor_conflict"
    NAMED_ACTOR_MISSING = "named_actor_missing"
    POD_OOM_KILLED = "pod_oom_killed"
    RAY_MEMORY_MONITOR_OOM = "ray_memory_monitor_oom"
    CUDA_OOM = "cuda_oom"
    WORKER_DIED_SYSTEM_ERROR = "worker_died_system_error"
    GCS_UNREACHABLE = "gcs_unreachable"
    FAILED_SCHEDULING_INSUFFICIENT = "failed_scheduling_insufficient"
    IMAGE_PULL_BACKOFF = "image_pull_backoff"
    DEPENDENCY_RUNTIME_ENV = "dependency_runtime_env"
    NCCL_ERROR_TIMEOUT = "nccl_error_timeout"
    SHM_TOO_SMALL = "shm_too_small"
    NODE_LOST_PREEMPTION = "node_lost_preemption"
    POD_EVICTION = "pod_eviction"
    CRASH_LOOP_BACKOFF = "crash_loop_backoff"
    PROBE_FAILURE = "probe_failure"
    RAY_RESOURCES_INFEASIBLE = "ray_resources_infeasible"
    OBJECT_STORE_FULL = "object_store_full"
    PORT_CONFLICT = "port_conflict"
    RAY_VERSION_MISMATCH = "ray_version_mismatch"
    RAYJOB_CR_FAILURE = "rayjob_cr_failure"
    JOB_DEADLINE_TIMEOUT = "job_deadline_timeout"
    PROCESS_LIMITS_EXHAUSTED = "process_limits_exhausted"
    GPU_FAULT = "gpu_fault"
    APPLICATION_ERROR = "application_error"
    POD_CONFIG_ERROR = "pod_config_error"
    CONTAINER_START_FAILURE = "container_start_failure"
    VOLUME_MOUNT_FAILURE = "volume_mount_failure"
    GPU_UNAVAILABLE = "gpu_unavailable"
    QUEUE_ADMISSION_PENDING = "queue_admission_pending"
    ALERT_FIRING = "alert_firing"  # a Prometheus alert no other playbook explains


# Most causal first; categories on one rung share a rank.
PRECEDENCE: tuple[tuple[Category, ...], ...] = (
    (Category.NODE_LOST_PREEMPTION,),
    (Category.POD_OOM_KILLED,),
    (Category.POD_EVICTION,),
    (Category.RAY_MEMORY_MONITOR_OOM,),
    (Category.CUDA_OOM,),
    (Category.GPU_FAULT,),
    (Category.GPU_UNAVAILABLE,),
    (Category.PROCESS_LIMITS_EXHAUSTED,),
    (Category.SHM_TOO_SMALL,),
    (Category.DEPENDENCY_RUNTIME_ENV,),
    (Category.RAY_VERSION_MISMATCH,),
    (
        Category.IMAGE_PULL_BACKOFF,
        Category.CONTAINER_START_FAILURE,
        Category.POD_CONFIG_ERROR,
        Category.VOLUME_MOUNT_FAILURE,
    ),
    (Category.FAILED_SCHEDULING_INSUFFICIENT,),
    (Category.QUEUE_ADMISSION_PENDING,),
    (Category.RAY_RESOURCES_INFEASIBLE,),
    (Category.GCS_UNREACHABLE,),
    (Category.NCCL_ERROR_TIMEOUT,),
    (Category.NAMED_ACTOR_CONFLICT, Category.NAMED_ACTOR_MISSING),
    (Category.WORKER_DIED_SYSTEM_ERROR,),
    (Category.CRASH_LOOP_BACKOFF,),
    (Category.RAYJOB_CR_FAILURE, Category.JOB_DEADLINE_TIMEOUT),
    (Category.APPLICATION_ERROR,),
    (Category.ALERT_FIRING,),  # the alert's own words: any class that explains it ranks first
)

# Classes the ranked list leaves out: causes in their own right, placed after the ranked
# infrastructure causes and before the generic symptoms.
_UNRANKED_AFTER = Category.NCCL_ERROR_TIMEOUT
_UNRANKED = (
    Category.OBJECT_STORE_FULL,
    Category.PORT_CONFLICT,
    Category.PROBE_FAILURE,
)


def _ranks() -> dict[Category, int]:
    ranks: dict[Category, int] = {}
    rank = 0
    for rung in PRECEDENCE:
        for category in rung:
            ranks[category] = rank
        rank += 1
        if _UNRANKED_AFTER in rung:
            for category in _UNRANKED:
                ranks[category] = rank
            rank += 1
    return ranks


RANK: dict[Category, int] = _ranks()

CATCH_ALL = Category.APPLICATION_ERROR
"""The catch-all: a user's own exception with no infrastructure class anywhere; its
likely (weak) evidence is dropped the moment any other class is found."""

# Classes whose remediation needs a human change (image, code, versions): retrying is useless.
NOT_RETRYABLE: frozenset[Category] = frozenset(
    {
        Category.DEPENDENCY_RUNTIME_ENV,
        Category.RAY_VERSION_MISMATCH,
        Category.APPLICATION_ERROR,
        Category.POD_CONFIG_ERROR,
        Category.CONTAINER_START_FAILURE,
        Category.VOLUME_MOUNT_FAILURE,
        Category.QUEUE_ADMISSION_PENDING,
    }
)


def rank(category: Category) -> int:
    """Lower is more causal."""
    return RANK[category]


# "Usually effects". Ranked below a finding of another rung, such a
# finding is that finding's symptom, not a second cause.
EFFECTS: frozenset[Category] = frozenset(
    {
        Category.NCCL_ERROR_TIMEOUT,
        Category.NAMED_ACTOR_CONFLICT,
        Category.NAMED_ACTOR_MISSING,
        Category.WORKER_DIED_SYSTEM_ERROR,
        Category.CRASH_LOOP_BACKOFF,
        Category.RAYJOB_CR_FAILURE,
        Category.JOB_DEADLINE_TIMEOUT,
        Category.APPLICATION_ERROR,
    }
)

# Pairs whose first member follows from the second when both are found,
# whatever rule 2's order says (a clash and a SYSTEM_ERROR death of the same job: the
# actor's constructor re-ran after the death).
FOLLOWS: tuple[tuple[Category, Category], ...] = (
    (Category.NAMED_ACTOR_CONFLICT, Category.WORKER_DIED_SYSTEM_ERROR),
)

_WHY: dict[Category, str] = {
    Category.WORKER_DIED_SYSTEM_ERROR: (
        "Ray only reports that the process died (its message lists the OOM killer, "
        "`ray stop --force` and SIGSEGV every time); {cause} says why it died."
    ),
    Category.NAMED_ACTOR_CONFLICT: (
        "the actor's constructor ran again after its worker died ({cause}), and the old "
        "registration still holds the name; killing the actor would not help."
    ),
    Category.NAMED_ACTOR_MISSING: (
        "the rank-0 worker that registers the actor did not come up because of {cause}; "
        "a longer wait would not help."
    ),
    Category.NCCL_ERROR_TIMEOUT: (
        "the collective failed because a rank was lost or could not set up its transport "
        "({cause}); a longer NCCL timeout would not help."
    ),
    Category.CRASH_LOOP_BACKOFF: (
        "the kubelet is backing off restarts of a container that {cause} ends on every "
        "start; the loop stops when {cause} is fixed."
    ),
    Category.RAYJOB_CR_FAILURE: (
        "the RayJob / Ray job status only wraps the failure: {cause} is what failed."
    ),
    Category.JOB_DEADLINE_TIMEOUT: "the deadline ran out while {cause} held the job up.",
    Category.APPLICATION_ERROR: (
        "the job's error output follows from {cause}, not from a bug in its own code."
    ),
    Category.NODE_LOST_PREEMPTION: (
        "the node or its raylet went down with {cause} (on cgroup v2 one OOM kill ends "
        "every process of the container, raylet included)."
    ),
    Category.GCS_UNREACHABLE: "the head and its GCS became unreachable because of {cause}.",
    Category.PROBE_FAILURE: "the probes failed because of {cause}.",
}


def symptom_why(symptom: Category, cause: Category) -> str:
    """One line saying why `symptom` follows from `cause`."""
    line = _WHY.get(symptom, "{symptom} follows from {cause}, the more causal finding.")
    return line.format(symptom=symptom, cause=cause)
