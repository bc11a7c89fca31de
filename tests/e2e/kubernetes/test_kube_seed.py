"""The seed case, live: a verl RayJob whose worker pod was OOMKilled and whose driver then hit
`qwAKMv_register_center (namespace=None) is already taken`.

The watch source sees it through the official client over HTTP (kmock's emulator),
resolves every signal to the owning RayJob, reads the submitter's log as the driver log,
and the Engine ranks pod_oom_killed over the name clash: bump the RayCluster worker
group's memory (with its diff), never kill the register-center actor. Approving runs the
executor, which patches the RayCluster (and the RayJob's template), reads it back, and
records a PitcrewRemediation Event.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot import __version__
from bot.adapters.kubernetes.api import EVENTS, RAY_CLUSTERS, RAY_JOBS
from bot.adapters.kubernetes.base import EVENT_REASON, PROBE_ANNOTATION
from bot.adapters.kubernetes.bump import BumpMemoryExecutor
from bot.adapters.kubernetes.executors import executors
from bot.adapters.kubernetes.source import KubernetesSource, KubeSourceConfig
from bot.adapters.kubernetes.templates import PROPOSAL_ANNOTATION
from bot.app.demo.seed import seed_driver_log, seed_objects
from bot.core.actions import approvals
from bot.core.actions.specs import ACTION_SPECS
from bot.core.actions.step import Step
from bot.core.diagnosis.engine import Engine
from bot.core.inputs import InputPart, LogText
from bot.core.model import ObjectRef, Proposal, ProposalState, Signal, SourceKind, Transition
from bot.daemon.executor import checked
from tests.e2e.kubernetes.conftest import (
    Emulator,
    install_seed,
    of_workload,
    validate_kuberay,
    wait_for,
)
from tests.support import kube_objects as o
from tests.support.daemon_process import wait_until
from tests.support.executors import look, run, verified

pytestmark = pytest.mark.kube

RAYJOB = ObjectRef("RayJob", "verl-ppo-qwen", o.NS)
CLUSTER = "verl-ppo-qwen-raycluster-x7k2p"
DIFF = "workerGroupSpecs[gpu-group].containers[ray-worker].resources.limits.memory: 16Gi → 24Gi"


def watched(emulator: Emulator) -> list[InputPart]:
    """Everything the source emits once it has listed and watched the namespace."""
    items: list[InputPart] = []
    source = KubernetesSource(
        emulator.api,
        KubeSourceConfig(namespaces=(o.NS,), backoff_initial=0.01, read_timeout=5),
    )
    source.start(items.append)
    try:
        assert wait_until(source.synced, 5)
        wait_for(lambda: _has_driver_log(items), what="the submitter's driver log")
        assert source.healthy()
    finally:
        source.stop()
    return items


def _has_driver_log(items: list[InputPart]) -> bool:
    return any(
        isinstance(i, LogText) and i.source is SourceKind.DRIVER_LOG and "pod/" in i.origin
        for i in items
    )


@pytest.fixture
def seeded(kuberay: Emulator) -> tuple[Emulator, dict[str, Any], list[InputPart]]:
    seed = install_seed(kuberay)
    return kuberay, seed, watched(kuberay)


def test_the_source_keys_every_signal_by_the_rayjob_and_reads_the_driver_log(
    seeded: tuple[Emulator, dict[str, Any], list[InputPart]],
) -> None:
    _, _, items = seeded
    signals = [i for i in items if isinstance(i, Signal)]
    oom = [s for s in signals if s.reason == "OOMKilled"]
    assert len(oom) == 1
    assert oom[0].workload == RAYJOB  # Pod → RayCluster → RayJob, by owner references
    assert oom[0].fields["ray_cluster"] == CLUSTER
    assert oom[0].fields["ray_group"] == "gpu-group"
    assert oom[0].fields["memory_limit"] == "16Gi"
    assert oom[0].fields["node_selector"] == "nvidia.com/gpu.product=NVIDIA-A10G"
    cluster_signal = next(s for s in signals if s.source is SourceKind.RAY_CLUSTER)
    assert cluster_signal.workload == RAYJOB
    logs = [i for i in items if isinstance(i, LogText)]
    driver = [log for log in logs if log.source is SourceKind.DRIVER_LOG and "pod/" in log.origin]
    assert len(driver) == 1  # the failed RayJob and its failed submitter pod: read once
    assert b"qwAKMv_register_center (namespace=None) is already taken" in b"".join(driver[0].chunks)
    assert driver[0].workload == RAYJOB
    previous = [log for log in logs if log.source is SourceKind.WORKER_LOG]
    assert [log.origin for log in previous] == [
        f"ml-train/pod/{CLUSTER}-gpu-group-worker-9zq4f [ray-worker] previous log"
    ]
    # the healthy pods and the head report nothing; benign states are not emitted
    assert {s.obj.name for s in signals if s.source is SourceKind.POD_STATUS and s.obj} == {
        f"{CLUSTER}-gpu-group-worker-9zq4f",
        "verl-ppo-qwen-x9z2k",
    }


def test_the_engine_ranks_the_oom_kill_first_and_offers_the_bump_not_the_kill(
    seeded: tuple[Emulator, dict[str, Any], list[InputPart]], engine: Engine
) -> None:
    _, _, items = seeded
    diagnosis = engine.diagnose(of_workload(items, RAYJOB))  # the RayJob's one incident
    assert diagnosis.primary is not None
    assert diagnosis.primary.category == "pod_oom_killed"
    assert diagnosis.primary.workload == RAYJOB
    assert "named_actor_conflict" in {f.category for f in diagnosis.secondary}
    offers = {a.action: a for a in diagnosis.actions}
    bump = offers["k8s.bump_memory"]
    assert bump.offered, bump.reason
    assert dict(bump.params) == {
        "namespace": o.NS,
        "kind": "RayCluster",
        "name": CLUSTER,
        "group": "gpu-group",
        "container": "ray-worker",
        "current": "16Gi",
        "factor": 1.5,
        "cap": "512Gi",
        "limit": "",
        "basis": "",
    }
    assert DIFF in bump.preview
    assert "ray.kill_actor" in offers
    assert not offers["ray.kill_actor"].offered
    assert "symptom of pod_oom_killed" in offers["ray.kill_actor"].reason


def test_approving_the_bump_patches_the_raycluster_and_records_an_event(
    seeded: tuple[Emulator, dict[str, Any], list[InputPart]], engine: Engine
) -> None:
    emulator, _, items = seeded
    diagnosis = engine.diagnose(of_workload(items, RAYJOB))
    bump = next(a for a in diagnosis.actions if a.action == "k8s.bump_memory")
    executor = BumpMemoryExecutor(emulator.api)

    facts, preview = look(executor, bump.params)
    assert facts == {"k8s.within_quota": True}
    assert f"RayCluster ml-train/{CLUSTER}:\n  {DIFF}" in preview
    assert (
        "workerGroupSpecs[gpu-group].containers[ray-worker].resources.requests.memory: 16Gi → 24Gi"
        in preview
    )
    assert "RayJob ml-train/verl-ppo-qwen (template of the next submission)" in preview
    assert "rayClusterSpec.workerGroupSpecs[gpu-group]" in preview
    assert "quota compute limits.memory: 200Gi used + 16Gi of 512Gi" in preview

    done = run(executor, bump.params, "prop-1", "U042 (alice)")
    assert DIFF in done
    assert "this API server ignores dryRun" in done  # kmock applies dry-runs: detected
    dry_runs = [r for r in emulator.requests("patch", "rayclusters") if r.get("dryRun") == "All"]
    assert dry_runs  # the dry-run path ran (as a probe, taken back)

    cluster = emulator.api.get(RAY_CLUSTERS, o.NS, CLUSTER)
    assert cluster is not None
    validate_kuberay(cluster)
    worker = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["memory"] == "24Gi"
    assert worker["resources"]["requests"]["memory"] == "24Gi"
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "4"  # nothing else touched
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["resources"]["limits"]["memory"] == "32Gi"
    annotations = cluster["metadata"]["annotations"]
    assert annotations[PROPOSAL_ANNOTATION] == "prop-1"
    assert PROBE_ANNOTATION not in annotations

    rayjob = emulator.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen")
    assert rayjob is not None
    validate_kuberay(rayjob)
    template = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert template["containers"][0]["resources"]["limits"]["memory"] == "24Gi"

    events = [e for e in emulator.api.list_all(EVENTS, o.NS) if e.get("reason") == EVENT_REASON]
    on_cluster = [e for e in events if e["involvedObject"]["kind"] == "RayCluster"]
    assert len(on_cluster) == 1
    assert on_cluster[0]["involvedObject"]["name"] == CLUSTER
    assert on_cluster[0]["involvedObject"]["uid"] == f"uid-{CLUSTER}"
    assert "approved by U042 (alice)" in on_cluster[0]["message"]
    assert DIFF.split(": ", 1)[0] in on_cluster[0]["message"]
    assert "16Gi → 24Gi" in on_cluster[0]["message"]
    assert verified(executor, bump.params)

    # the same proposal again (a retried click, a restarted daemon): nothing bumped twice
    again = run(executor, bump.params, "prop-1", "U042 (alice)")
    assert again.startswith("already applied by proposal prop-1")
    cluster = emulator.api.get(RAY_CLUSTERS, o.NS, CLUSTER)
    assert cluster is not None
    worker = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["memory"] == "24Gi"


def test_every_write_is_credited_to_pitcrew(
    seeded: tuple[Emulator, dict[str, Any], list[InputPart]], engine: Engine
) -> None:
    """`managedFields` and audit logs name pitcrew, not the client library."""
    emulator, _, items = seeded
    diagnosis = engine.diagnose(of_workload(items, RAYJOB))
    bump = next(a for a in diagnosis.actions if a.action == "k8s.bump_memory")
    run(BumpMemoryExecutor(emulator.api), bump.params, "prop-1", "U042 (alice)")

    writes = [
        *emulator.requests("patch", "rayclusters"),
        *emulator.requests("patch", "rayjobs"),
        *emulator.requests("create", "events"),
    ]
    assert len(writes) >= 3
    assert {w.get("fieldManager") for w in writes} == {"pitcrew"}
    agents = {
        h.get("User-Agent", "")
        for action in ("get", "patch")
        for h in emulator.request_headers(action, "rayclusters")
    }
    assert agents == {f"pitcrew/{__version__}"}


def test_the_registry_executor_revalidates_and_runs_a_proposal(
    seeded: tuple[Emulator, dict[str, Any], list[InputPart]], engine: Engine
) -> None:
    """Through the daemon's interface: the live check confirms the preview; approve; run."""
    emulator, _, items = seeded
    diagnosis = engine.diagnose(of_workload(items, RAYJOB))
    bump = next(a for a in diagnosis.actions if a.action == "k8s.bump_memory")
    now = datetime.now(UTC)
    proposal = Proposal(
        id="prop-7",
        incident_id="inc-1",
        action=bump.action,
        params=bump.params,
        preview=bump.preview,
        state=ProposalState.APPROVED,
        created_at=now,
        expires_at=now + timedelta(hours=1),
        preconditions=ACTION_SPECS["k8s.bump_memory"].preconditions,
        history=(Transition(ProposalState.APPROVED, now, "U042"),),
    )
    executor = executors(emulator.api)["k8s.bump_memory"]
    step = Step.of_proposal(proposal)
    found = checked(executor, step)
    assert approvals.revalidate(proposal, found.live) == ""
    assert "16Gi → 24Gi" in executor.execute(step, found.plan)
    assert executor.verify(step).ok
    events = [e for e in emulator.api.list_all(EVENTS, o.NS) if e.get("reason") == EVENT_REASON]
    assert any("approved by U042" in e["message"] for e in events)


def test_installed_while_watched_the_submitters_driver_log_is_read(kuberay: Emulator) -> None:
    """As in `pitcrew demo`: the source watches before the seed's objects exist, and reads
    the failed submitter's log at its first sight of the pod."""
    items: list[InputPart] = []
    source = KubernetesSource(
        kuberay.api,
        KubeSourceConfig(namespaces=(o.NS,), backoff_initial=0.01, read_timeout=5),
    )
    source.start(items.append)
    try:
        assert wait_until(source.synced, 5)
        install_seed(kuberay)
        wait_for(lambda: _has_driver_log(items), 10, "the submitter's driver log")
    finally:
        source.stop()
    logs = [i.origin for i in items if isinstance(i, LogText) and "pod/" in i.origin]
    assert sorted(logs) == [
        f"ml-train/pod/{CLUSTER}-gpu-group-worker-9zq4f [ray-worker] previous log",
        "ml-train/pod/verl-ppo-qwen-x9z2k [ray-job-submitter] current log",
    ]


def test_a_driver_log_not_served_at_the_pods_first_sight_is_read_on_a_retry(
    kuberay: Emulator,
) -> None:
    """A Failed pod sends no later event: the read at the source's first sight of the
    submitter pod finds no log (the kubelet does not serve it yet), and the retry due
    after the first delay reads it and hands it on with the RayJob as its workload."""
    now = [1000.0]
    source = KubernetesSource(
        kuberay.api,
        KubeSourceConfig(namespaces=(o.NS,), log_retry_delays=(2.0, 5.0)),
        clock=lambda: now[0],
    )
    seed = seed_objects()
    for obj in [*seed["nodes"], seed["quota"], seed["rayjob"], seed["cluster"], seed["job"]]:
        kuberay.create(obj)
    submitter = kuberay.create(seed["submitter_pod"])
    signals = [p for k in source.converter.keyed("Pod", submitter) for p in k.parts]
    assert source.evidence(signals) == []  # nothing served yet: kept for a retry

    kuberay.serve_log(o.NS, submitter["metadata"]["name"], seed_driver_log())
    now[0] += 1.9
    source.retry_logs()
    assert source.poll() == []  # not due yet
    now[0] += 0.1
    source.retry_logs()
    (log,) = source.poll()
    assert isinstance(log, LogText)
    assert (log.origin, log.source, log.workload) == (
        "ml-train/pod/verl-ppo-qwen-x9z2k [ray-job-submitter] current log",
        SourceKind.DRIVER_LOG,
        RAYJOB,
    )
    assert b"".join(log.chunks) == seed_driver_log()
    assert (source.counters["log_tails_retried"], source.counters["log_tails_given_up"]) == (1, 0)


def test_a_log_never_served_is_given_up_after_its_last_retry(kuberay: Emulator) -> None:
    now = [1000.0]
    source = KubernetesSource(
        kuberay.api,
        KubeSourceConfig(namespaces=(o.NS,), log_retry_delays=(2.0, 5.0)),
        clock=lambda: now[0],
    )
    seed = seed_objects()
    for obj in [*seed["nodes"], seed["quota"], seed["rayjob"], seed["cluster"], seed["job"]]:
        kuberay.create(obj)
    submitter = kuberay.create(seed["submitter_pod"])
    source.evidence([p for k in source.converter.keyed("Pod", submitter) for p in k.parts])
    for step in (2.0, 5.0):
        now[0] += step
        source.retry_logs()
    assert source.poll() == []
    assert (source.counters["log_tails_retried"], source.counters["log_tails_given_up"]) == (0, 1)
