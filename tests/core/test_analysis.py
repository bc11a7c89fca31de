"""Findings are merged per playbook, ranked by precedence (docs/failure-classes.md), and each action is
offered or withheld with a reason a person can act on."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.core.diagnosis.analysis import rank_findings
from bot.core.inputs.reader import read_stream
from bot.core.model import Finding, Role, Severity, SourceKind
from bot.core.taxonomy import PRECEDENCE, Category
from tests.support.daemon import engine as builtin_engine
from tests.support.playbooks import engine_for, playbook

ROOT = Path(__file__).resolve().parents[2]


def _finding(category: Category, weak: bool = False, count: int = 1) -> Finding:
    return Finding(
        playbook=category.replace("_", "-"),
        category=category,
        severity=Severity.ERROR,
        title=category,
        signature="s",
        source=SourceKind.DRIVER_LOG,
        weak=weak,
        count=count,
    )


@pytest.mark.parametrize(
    ("categories", "primary"),
    [
        ([Category.NAMED_ACTOR_CONFLICT, Category.POD_OOM_KILLED], Category.POD_OOM_KILLED),
        (
            [Category.WORKER_DIED_SYSTEM_ERROR, Category.NCCL_ERROR_TIMEOUT, Category.CUDA_OOM],
            Category.CUDA_OOM,
        ),
        ([Category.APPLICATION_ERROR, Category.RAYJOB_CR_FAILURE], Category.RAYJOB_CR_FAILURE),
        ([Category.CRASH_LOOP_BACKOFF, Category.IMAGE_PULL_BACKOFF], Category.IMAGE_PULL_BACKOFF),
        ([Category.POD_OOM_KILLED, Category.NODE_LOST_PREEMPTION], Category.NODE_LOST_PREEMPTION),
        (
            [Category.GCS_UNREACHABLE, Category.FAILED_SCHEDULING_INSUFFICIENT],
            Category.FAILED_SCHEDULING_INSUFFICIENT,
        ),
        # The classes of 2026-12 (rungs 7, 12 and 14 of docs/failure-classes.md, "Precedence").
        ([Category.GPU_UNAVAILABLE, Category.GPU_FAULT], Category.GPU_FAULT),
        (
            [Category.WORKER_DIED_SYSTEM_ERROR, Category.GPU_UNAVAILABLE],
            Category.GPU_UNAVAILABLE,
        ),
        (
            [Category.CRASH_LOOP_BACKOFF, Category.CONTAINER_START_FAILURE],
            Category.CONTAINER_START_FAILURE,
        ),
        (
            [
                Category.RAYJOB_CR_FAILURE,
                Category.FAILED_SCHEDULING_INSUFFICIENT,
                Category.POD_CONFIG_ERROR,
            ],
            Category.POD_CONFIG_ERROR,
        ),
        (
            [Category.FAILED_SCHEDULING_INSUFFICIENT, Category.VOLUME_MOUNT_FAILURE],
            Category.VOLUME_MOUNT_FAILURE,
        ),
        (
            [Category.QUEUE_ADMISSION_PENDING, Category.FAILED_SCHEDULING_INSUFFICIENT],
            Category.FAILED_SCHEDULING_INSUFFICIENT,
        ),
        (
            [Category.RAY_RESOURCES_INFEASIBLE, Category.QUEUE_ADMISSION_PENDING],
            Category.QUEUE_ADMISSION_PENDING,
        ),
    ],
)
def test_the_most_causal_finding_is_primary(categories: list[Category], primary: Category) -> None:
    ranked = rank_findings(_finding(c) for c in categories)
    assert ranked[0].finding.category is primary
    assert ranked[0].role is Role.PRIMARY
    assert all(r.role is Role.SECONDARY for r in ranked[1:])


def test_precedence_follows_taxonomy_order_rung_by_rung() -> None:
    rungs = [rung[0] for rung in PRECEDENCE]
    ranked = rank_findings(_finding(c) for c in reversed(rungs))
    assert [r.finding.category for r in ranked] == rungs


def test_nothing_found_means_no_primary() -> None:
    assert rank_findings([]) == ()


CLASH = {
    "name": "taken",
    "regex": r"The name (?P<name>\S+) \(namespace=(?P<ns>[^)]*)\) is already taken",
}
OOM_TEXT = {"name": "oom", "regex": r"OOMKilled"}
WEAK_OOM = {
    "name": "raylet",
    "regex": r"SIGKILL by the user or system OOM killer",
    "weak": True,
    "otherwise": "worker_died_system_error",
}
PROBE = {"name": "probe", "regex": r"Liveness probe failed"}
EXIT_137 = {"name": "exit137", "regex": r"Exit Code:\s+137", "suppressed_by": ["probe_failure"]}


def _kill_actor_playbook() -> dict[str, object]:
    return playbook(
        "clash",
        "named_actor_conflict",
        [CLASH],
        actions=[
            {
                "action": "ray.kill_actor",
                "params": {"name": "{{ captures.name }}", "namespace": "{{ captures.ns }}"},
                "guards": [
                    {"primary": True, "reason": "the clash is a symptom of the root cause"},
                    {
                        "capture": "ns",
                        "not_matches": "^(None|)$",
                        "reason": "namespace is anonymous",
                    },
                    {
                        "capture": "name",
                        "not_matches": "_register_center$",
                        "reason": "never kill {name}",
                    },
                    {"fact": "ray.actor_stale"},
                ],
            }
        ],
    )


@pytest.mark.parametrize(
    ("log", "offered", "reason"),
    [
        ("The name a (namespace=None) is already taken", False, "namespace is anonymous"),
        (
            "The name x_register_center (namespace=rl) is already taken",
            False,
            "never kill x_register_center",
        ),
        (
            "The name a (namespace=rl) is already taken",
            False,
            "needs a live check that the actor is detached or its owner job has finished",
        ),
        (
            "The name a (namespace=rl) is already taken\nOOMKilled",
            False,
            "the clash is a symptom of the root cause",
        ),
    ],
)
def test_guards_withhold_with_the_first_failing_reason(
    tmp_path: Path, log: str, offered: bool, reason: str
) -> None:
    engine = engine_for(
        tmp_path, _kill_actor_playbook(), playbook("oom", "pod_oom_killed", [OOM_TEXT])
    )
    (offer,) = engine.diagnose_text(log).actions
    assert (offer.offered, offer.reason) == (offered, reason)


def test_a_live_fact_that_holds_lets_the_action_be_offered(tmp_path: Path) -> None:
    engine = engine_for(tmp_path, _kill_actor_playbook())
    hits = engine.hits([])  # nothing
    assert hits == []
    from bot.core.diagnosis.analysis import diagnose
    from bot.core.inputs import LogText

    found = engine.hits([LogText([b"The name trainer_lock (namespace=rl) is already taken\n"])])
    (offer,) = diagnose(found, engine.library, {"ray.actor_stale": True}).actions
    assert offer.offered
    assert offer.preview == "ray.kill(ray.get_actor('trainer_lock', namespace='rl'))"
    (refused,) = diagnose(found, engine.library, {"ray.actor_stale": False}).actions
    assert (
        refused.reason == "it is not true that the actor is detached or its owner job has finished"
    )


@pytest.mark.parametrize(
    ("log", "categories"),
    [
        (
            "Raylet is terminated: SIGKILL by the user or system OOM killer",
            ["worker_died_system_error"],
        ),
        ("SIGKILL by the user or system OOM killer\nOOMKilled", ["pod_oom_killed"]),
        ("Exit Code:    137", ["pod_oom_killed"]),
        ("Exit Code:    137\nLiveness probe failed: HTTP probe failed", ["probe_failure"]),
    ],
)
def test_weak_evidence_and_suppression(tmp_path: Path, log: str, categories: list[str]) -> None:
    engine = engine_for(
        tmp_path,
        playbook("oom", "pod_oom_killed", [OOM_TEXT, WEAK_OOM, EXIT_137]),
        playbook("probe", "probe_failure", [PROBE]),
    )
    diagnosis = engine.diagnose_text(log)
    assert [str(r.finding.category) for r in diagnosis.findings] == categories


def test_weak_evidence_merges_into_the_strong_finding(tmp_path: Path) -> None:
    engine = engine_for(tmp_path, playbook("oom", "pod_oom_killed", [OOM_TEXT, WEAK_OOM]))
    (ranked,) = engine.diagnose_text("SIGKILL by the user or system OOM killer\nOOMKilled").findings
    assert ranked.finding.count == 2
    assert not ranked.finding.weak
    assert [e.text for e in ranked.finding.evidence] == [
        "OOMKilled",
        "SIGKILL by the user or system OOM killer",
    ]


def test_a_parameter_the_evidence_cannot_fill_withholds_the_action(tmp_path: Path) -> None:
    engine = engine_for(
        tmp_path,
        playbook(
            "oom",
            "pod_oom_killed",
            [OOM_TEXT],
            actions=[
                {
                    "action": "k8s.bump_memory",
                    "params": {
                        "namespace": "{{ fields.namespace }}",
                        "kind": "RayCluster",
                        "name": "x",
                    },
                }
            ],
        ),
    )
    (offer,) = engine.diagnose_text("OOMKilled").actions
    assert (offer.offered, offer.reason) == (
        False,
        "the evidence does not name the namespace to act on",
    )


def test_invalid_rendered_parameters_withhold_the_action(tmp_path: Path) -> None:
    engine = engine_for(
        tmp_path,
        playbook(
            "oom",
            "pod_oom_killed",
            [{"name": "oom", "regex": r"OOMKilled in (?P<ns>\S+)"}],
            actions=[
                {
                    "action": "k8s.bump_memory",
                    "params": {"namespace": "{{ captures.ns }}", "kind": "RayCluster", "name": "x"},
                }
            ],
        ),
    )
    (offer,) = engine.diagnose_text("OOMKilled in Bad_Namespace!").actions
    assert not offer.offered
    assert (
        offer.reason
        == "parameters are not valid: namespace: String should match pattern '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$'"
    )


PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
OOM_EVENT = (
    "Memory cgroup out of memory: Killed process 48213 (ray::WorkerDict) total-vm:91823412kB, "
    "anon-rss:66893520kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:131736kB"
)


@pytest.mark.slow
def test_an_event_matched_by_two_signatures_counts_once() -> None:
    """A kubelet `OOMKilling` Event matches both the event reason and the cgroup text."""
    from bot.adapters.files.playbooks import load_library
    from bot.core.diagnosis.engine import Engine
    from bot.core.inputs import LogText
    from bot.core.model import Signal

    engine = Engine(load_library([PLAYBOOKS]))
    event = Signal(source=SourceKind.K8S_EVENT, reason="OOMKilling", text=OOM_EVENT)
    kills = LogText(
        chunks=(
            b"Memory cgroup out of memory: Killed process 100 (ray::Actor)\n"
            b"step 3\n"
            b"Memory cgroup out of memory: Killed process 101 (ray::Actor)\n",
        ),
        source=SourceKind.WORKER_LOG,
        origin="worker.log",
    )
    alone = engine.diagnose([event])
    assert alone.primary is not None
    assert alone.primary.category == "pod_oom_killed"
    assert alone.primary.count == 1
    both = engine.diagnose([event, kills])
    assert both.primary is not None
    assert both.primary.count == 3


def test_a_stale_holder_found_live_keeps_the_clash_first_and_the_death_separate() -> None:
    """docs/failure-classes.md, "Precedence": the clash ranks after the worker death of the same job unless a
    live check finds its holder a stale detached actor of an earlier finished job; then
    the death is a separate finding, not a symptom of the clash."""
    text = (ROOT / "examples" / "seed" / "driver.log").read_text()
    engine = builtin_engine()
    offline = engine.diagnose_text(text)
    assert offline.primary is not None
    assert offline.primary.category == "worker_died_system_error"
    stale = {
        "ray.holder_explicit": True,
        "ray.actor_stale": True,
        "ray.namespace_idle": True,
        "ray.not_live_verl": True,
    }
    parts = read_stream(io.BytesIO(text.encode()), "driver.log")
    live = engine.diagnose(parts, stale)
    assert live.primary is not None
    assert live.primary.category == "named_actor_conflict"
    death = next(r for r in live.findings if r.finding.category == "worker_died_system_error")
    assert (death.symptom_of, death.why) == (None, "")
    assert "Symptom of named_actor_conflict: The worker death" not in live.text
    assert "Also seen: worker_died_system_error: " in live.text
    assert {a.action: a.offered for a in live.actions}["ray.kill_actor"] is True


@pytest.mark.slow
def test_a_resubmission_offers_the_playbooks_named_override_in_its_preview() -> None:
    from bot.adapters.files.playbooks import load_library
    from bot.core.actions.entrypoint import with_override
    from bot.core.actions.params import ResubmitJob
    from bot.core.actions.specs import ACTION_SPECS

    library = load_library([PLAYBOOKS])
    rule = next(
        r
        for r in library.by_id["named-actor-missing"].playbook.actions
        if r.action == "ray.resubmit_job"
    )
    override = rule.params["override"]
    assert override == "trainer.ray_wait_register_center_timeout=600"
    params = ResubmitJob(submission_id="raysubmit_Qk8vXw2mT3nLp9Rb", override=override)
    assert ACTION_SPECS["ray.resubmit_job"].preview(params) == (
        "resubmit Ray job raysubmit_Qk8vXw2mT3nLp9Rb (new submission id), entrypoint argument "
        "trainer.ray_wait_register_center_timeout=600"
    )
    entrypoint = "python3 -m verl.trainer.main_ppo trainer.ray_wait_register_center_timeout=300"
    assert with_override(entrypoint, override) == (
        "python3 -m verl.trainer.main_ppo trainer.ray_wait_register_center_timeout=600"
    )


# -- a task's OutOfMemoryError is no worker death once its memory is known ----------------

TASK_CUDA_OOM = (
    "(TaskRunner pid=1187) ray.exceptions.RayTaskError(OutOfMemoryError): "
    "ray::TorchTrainer.train() (pid=2321, ip=10.0.3.17)\n"
    '(TaskRunner pid=1187)   File "train.py", line 71, in train_loop_per_worker\n'
    "(TaskRunner pid=1187) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "2.32 GiB. GPU 0 has a total capacity of 23.54 GiB of which 1.12 GiB is free.\n"
)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # the split resolved to GPU memory: the wrapper was that OOM, no process died
        (TASK_CUDA_OOM, [("cuda_oom", "primary")]),
        # a real death after it stays its symptom
        (
            TASK_CUDA_OOM + "ray.exceptions.ActorDiedError: The actor died unexpectedly before "
            "finishing this task.\nWorker exit type: SYSTEM_ERROR\n",
            [("cuda_oom", "primary"), ("worker_died_system_error", "secondary")],
        ),
        # cut before it says which memory: a death of unknown cause, as before
        (
            TASK_CUDA_OOM.split("\n", 1)[0] + "\n",
            [("worker_died_system_error", "primary")],
        ),
    ],
)
def test_a_tasks_out_of_memory_error_is_no_worker_death_once_its_memory_is_known(
    text: str, found: list[tuple[str, str]]
) -> None:
    diagnosis = builtin_engine().diagnose(read_stream(io.BytesIO(text.encode()), "driver.log"))
    assert [(str(r.finding.category), str(r.role)) for r in diagnosis.findings] == found


def test_the_cuda_oom_advice_of_a_plain_ray_train_job_is_not_verls() -> None:
    text = (
        "(TrainWorker pid=4721, ip=10.4.3.21) torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.54 GiB of which 1.12 GiB "
        "is free.\n"
    )
    diagnosis = builtin_engine().diagnose(read_stream(io.BytesIO(text.encode()), "train.log"))
    assert "actor_rollout_ref" not in diagnosis.text
    assert "colocated RL training" not in diagnosis.text
    assert diagnosis.remediation[0] == (
        "Use less GPU memory per worker: a smaller per-GPU batch or micro-batch, shorter "
        "sequences, gradient checkpointing or more sharding (FSDP/ZeRO offload, tensor "
        "parallelism)."
    )
    assert "This is GPU memory: raising the pod's memory limit would not help." in diagnosis.text


def test_the_cuda_oom_advice_of_verls_rollout_names_its_settings() -> None:
    text = (
        "(TaskRunner pid=1187) ray.exceptions.RayTaskError(OutOfMemoryError): "
        "ray::WorkerDict.actor_rollout_compute_log_prob() (pid=2321, ip=10.0.3.17)\n"
        "(TaskRunner pid=1187) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        "2.32 GiB. GPU 0 has a total capacity of 23.54 GiB of which 1.12 GiB is free.\n"
    )
    diagnosis = builtin_engine().diagnose(read_stream(io.BytesIO(text.encode()), "driver.log"))
    assert "In colocated RL training (verl, OpenRLHF)" in diagnosis.text
