"""Failure categories of Ray on Kubernetes and their precedence (TAXONOMY.md §1, §3.2).

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


# TAXONOMY.md §3.2, most causal first; categories on one rung share a rank.
PRECEDENCE: tuple[tuple[Category, ...], ...] = (
    (Category.NODE_LOST_PREEMPTION,),
    (Category.POD_OOM_KILLED,),
    (Category.POD_EVICTION,),
    (Category.RAY_MEMORY_MONITOR_OOM,),
    (Category.CUDA_OOM,),
    (Category.GPU_FAULT,),
    (Category.PROCESS_LIMITS_EXHAUSTED,),
    (Category.SHM_TOO_SMALL,),
    (Category.DEPENDENCY_RUNTIME_ENV,),
    (Category.RAY_VERSION_MISMATCH,),
    (Category.IMAGE_PULL_BACKOFF,),
    (Category.FAILED_SCHEDULING_INSUFFICIENT,),
    (Category.RAY_RESOURCES_INFEASIBLE,),
    (Category.GCS_UNREACHABLE,),
    (Category.NCCL_ERROR_TIMEOUT,),
    (Category.NAMED_ACTOR_CONFLICT, Category.NAMED_ACTOR_MISSING),
    (Category.WORKER_DIED_SYSTEM_ERROR,),
    (Category.CRASH_LOOP_BACKOFF,),
    (Category.RAYJOB_CR_FAILURE, Category.JOB_DEADLINE_TIMEOUT),
    (Category.APPLICATION_ERROR,),
)

# Classes §3.2 does not rank: causes in their own right, placed after the ranked
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

# Classes whose remediation needs a human change (image, code, versions): retrying is useless.
NOT_RETRYABLE: frozenset[Category] = frozenset(
    {
        Category.DEPENDENCY_RUNTIME_ENV,
        Category.RAY_VERSION_MISMATCH,
        Category.APPLICATION_ERROR,
    }
)


def rank(category: Category) -> int:
    """Lower is more causal."""
    return RANK[category]
