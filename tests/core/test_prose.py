"""A person's own words are weak evidence: "the pod got OOM killed" gives a likely
finding of its class, never an offer, and never outranks what a system printed."""

from __future__ import annotations

import pytest

from bot.core.diagnosis.engine import Engine
from tests.support.daemon import engine as builtin_engine

PROSE = [
    ("the head pod got OOM killed again after I raised the batch size", "pod_oom_killed"),
    ("our worker keeps getting OOMKilled", "pod_oom_killed"),
    ("the readiness probe keeps failing on the head pod", "probe_failure"),
    ("liveness probes started timing out after the upgrade", "probe_failure"),
    ("halfway through the run a node died and every actor on it was gone", "node_lost_preemption"),
    ("the spot instance was reclaimed at 3am", "node_lost_preemption"),
    ("our worker pods keep getting evicted overnight", "pod_eviction"),
    ("the workers can't pull the image from our registry", "image_pull_backoff"),
    ("it just sits in ImagePullBackOff", "image_pull_backoff"),
    ("the head is stuck in a crash loop since the upgrade", "crash_loop_backoff"),
    ("the worker pods stay pending forever", "failed_scheduling_insufficient"),
    ("there are not enough GPUs for the second worker group", "failed_scheduling_insufficient"),
    ("the rollout workers ran out of GPU memory at 8k tokens", "cuda_oom"),
    ("training hangs and then NCCL times out", "nccl_error_timeout"),
    ("the allreduce hangs on two of the nodes", "nccl_error_timeout"),
    ("one GPU fell off the bus on node 7", "gpu_fault"),
    ("I think /dev/shm is too small in the worker container", "shm_too_small"),
]

# What a system printed, of another class than the prose beside it.
STRONG = [
    (
        "Events:\n"
        "  Type     Reason   Age   From     Message\n"
        "  ----     ------   ----  ----     -------\n"
        '  Warning  Failed   12s   kubelet  Failed to pull image "rayproject/ray:2.99.0-gpu": '
        "rpc error: code = NotFound desc = failed to pull and unpack image\n",
        "image_pull_backoff",
    ),
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.25 GiB of which 1.12 GiB is free.\n",
        "cuda_oom",
    ),
]


@pytest.fixture(scope="module")
def engine() -> Engine:
    return builtin_engine()


@pytest.mark.parametrize(("words", "category"), PROSE)
def test_prose_is_a_likely_finding_of_its_class_without_an_offer(
    engine: Engine, words: str, category: str
) -> None:
    diagnosis = engine.diagnose_text(words + "\n")
    primary = diagnosis.primary
    assert primary is not None
    assert (str(primary.category), primary.strength) == (category, "weak")
    assert [a.action for a in diagnosis.actions if a.offered] == []


@pytest.mark.parametrize(("printed", "printed_category"), STRONG)
@pytest.mark.parametrize(("words", "category"), PROSE[:6])
def test_prose_never_outranks_what_a_system_printed(
    engine: Engine, printed: str, printed_category: str, words: str, category: str
) -> None:
    diagnosis = engine.diagnose_text(f"{words}\n{printed}")
    primary = diagnosis.primary
    assert primary is not None
    assert (str(primary.category), primary.strength) == (printed_category, "strong")


@pytest.mark.parametrize(
    "words",
    [
        "the pod was not OOM killed, it exited 0 and the job succeeded",
        "Readiness probe failed: HTTP probe failed with statuscode: 503",
        "raycluster-kuberay-worker-gpu-7xk2p   0/1     Pending   0          12s",
        "The actor died because its node has died. Node Id: 4f2c1e0a3b4d",
    ],
    ids=["a denial", "one readiness event", "a pod just created", "Ray's own words"],
)
def test_what_is_not_prose_of_a_failure_gives_no_likely_prose_finding(
    engine: Engine, words: str
) -> None:
    diagnosis = engine.diagnose_text(words + "\n")
    assert [r.finding.signature for r in diagnosis.findings if r.finding.signature == "prose"] == []
