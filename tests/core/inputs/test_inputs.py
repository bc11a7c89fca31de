"""What `pitcrew diagnose` makes of each input shape (docs/signals.md is the contract).

Every realistic fixture under tests/data/inputs/ is split into parts, and the
signals it must give are written out: source, reason, the object, its
workload, and the fields playbooks and actions read.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bot.core.inputs import LogText
from bot.core.model import Signal, SourceKind
from tests.support.inputs import fixture, logs_of, only, parts_of, signals_of, summary

WORKER = "rayjob-verl-raycluster-x7k2p-gpu-group-worker-9zq4f"
PENDING_WORKER = "rayjob-verl-raycluster-x7k2p-gpu-group-worker-5kd9w"
VERL_CLUSTER = "ml-train/raycluster/rayjob-verl-raycluster-x7k2p"
RLHF_WORKER = "openrlhf-ppo-raycluster-m2d8k-actor-worker-h7x2c"
RLHF_HEAD = "openrlhf-ppo-raycluster-m2d8k-head-8f2lq"
RLHF_CLUSTER = "rlhf/raycluster/openrlhf-ppo-raycluster-m2d8k"


# -- which signals each fixture gives -------------------------------------------------


@dataclass(frozen=True)
class Case:
    fixture: str
    signals: list[tuple[str, str, str, str | None]]
    log_lines: tuple[str, ...] = ()  # non-blank lines that stay log text (driver_log, in order)


def _event(reason: str, obj: str, workload: str | None = None) -> tuple[str, str, str, str | None]:
    return ("k8s_event", reason, obj, workload)


CASES = [
    Case(
        "describe-worker-oomkilled.txt",
        [
            ("pod_status", "Completed", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
            ("pod_status", "OOMKilled", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
            _event("Scheduled", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
            _event("Pulled", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
            _event("Created", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
            _event("Started", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
            _event("BackOff", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
            _event("Pulled", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
            _event("Created", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
            _event("Started", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
        ],
    ),
    Case(
        "pod-oomkilled.json",
        [
            ("pod_status", "CrashLoopBackOff", f"rlhf/pod/{RLHF_WORKER}", RLHF_CLUSTER),
            ("pod_status", "OOMKilled", f"rlhf/pod/{RLHF_WORKER}", RLHF_CLUSTER),
        ],
    ),
    Case(
        "pods-list.yaml",
        [
            ("pod_status", "Unschedulable", f"ml-train/pod/{PENDING_WORKER}", VERL_CLUSTER),
            ("pod_status", "ContainerStatusUnknown", f"rlhf/pod/{RLHF_HEAD}", RLHF_CLUSTER),
            ("pod_status", "Evicted", f"rlhf/pod/{RLHF_HEAD}", RLHF_CLUSTER),
            (
                "pod_status",
                "ImagePullBackOff",
                "inference/pod/vllm-serve-raycluster-q9w8e-rollout-worker-z2x3c",
                "inference/raycluster/vllm-serve-raycluster-q9w8e",
            ),
            (
                "pod_status",
                "PodInitializing",
                "inference/pod/vllm-serve-raycluster-q9w8e-rollout-worker-z2x3c",
                "inference/raycluster/vllm-serve-raycluster-q9w8e",
            ),
        ],
    ),
    Case(
        "events-all-namespaces.txt",
        [
            _event(
                "CreatedRayCluster", "ml-train/rayjob/rayjob-verl", "ml-train/rayjob/rayjob-verl"
            ),
            _event("FailedScheduling", f"ml-train/pod/{PENDING_WORKER}"),
            _event("NotTriggerScaleUp", f"ml-train/pod/{PENDING_WORKER}"),
            _event("BackOff", f"ml-train/pod/{WORKER}"),
            _event("Evicted", f"rlhf/pod/{RLHF_HEAD}"),
            _event("Killing", f"rlhf/pod/{RLHF_HEAD}"),
            _event("OOMKilling", "default/node/gpu-h100-node-7"),
        ],
    ),
    Case(
        "events-default.txt",
        [
            _event("CreatedRayCluster", "rayjob/rayjob-verl", "rayjob/rayjob-verl"),
            _event("FailedScheduling", f"pod/{PENDING_WORKER}"),
            _event("NotTriggerScaleUp", f"pod/{PENDING_WORKER}"),
            _event("BackOff", f"pod/{WORKER}"),
        ],
    ),
    Case(
        "events-wide.txt",
        [
            _event("FailedScheduling", f"pod/{PENDING_WORKER}"),
            _event("BackOff", f"pod/{WORKER}"),
        ],
    ),
    Case(
        "rayjob-deadline-exceeded.yaml",
        [
            (
                "ray_job",
                "DeadlineExceeded",
                "ml-train/rayjob/verl-grpo-qwen3",
                "ml-train/rayjob/verl-grpo-qwen3",
            )
        ],
    ),
    Case(
        "raycluster-quota.yaml",
        [
            ("ray_cluster", "ready", RLHF_CLUSTER, RLHF_CLUSTER),
            _event("FailedToCreateWorkerPod", RLHF_CLUSTER, RLHF_CLUSTER),
        ],
        log_lines=(
            "# kubectl get raycluster,events.events.k8s.io -n rlhf -o yaml, "
            "trimmed to the two objects",
        ),
    ),
    Case(
        "ray-job-failed.json",
        [
            (
                "ray_job",
                "FAILED",
                "rayjobsubmission/raysubmit_pX3kW9vLq2Tz8RbN",
                "rayjobsubmission/raysubmit_pX3kW9vLq2Tz8RbN",
            )
        ],
    ),
    Case(
        "ray-job-status.txt",
        [
            (
                "ray_job",
                "FAILED",
                "rayjobsubmission/raysubmit_pX3kW9vLq2Tz8RbN",
                "rayjobsubmission/raysubmit_pX3kW9vLq2Tz8RbN",
            )
        ],
        log_lines=(
            "Job submission server address: http://127.0.0.1:8265",
            "---------------------------------------",
            "---------------------------------------",
            "Status message: Job entrypoint command failed with exit code 1, last available logs "
            "(truncated to 20,000 chars):",
            "    import verl.trainer.main_ppo",
            '  File "/usr/local/lib/python3.10/dist-packages/verl/trainer/main_ppo.py", '
            "line 21, in <module>",
            "    from verl.trainer.ppo.ray_trainer import RayPPOTrainer",
            '  File "/usr/local/lib/python3.10/dist-packages/verl/trainer/ppo/ray_trainer.py", '
            "line 33, in <module>",
            "    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, "
            "RayWorkerGroup",
            "ModuleNotFoundError: No module named 'tensordict'",
        ),
    ),
    Case(
        "mixed-paste.txt",
        [
            ("pod_status", "OOMKilled", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
            _event("BackOff", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
            _event(
                "CreatedRayCluster", "ml-train/rayjob/rayjob-verl", "ml-train/rayjob/rayjob-verl"
            ),
            _event("FailedScheduling", f"ml-train/pod/{PENDING_WORKER}", VERL_CLUSTER),
            _event("BackOff", f"ml-train/pod/{WORKER}", VERL_CLUSTER),
        ],
        log_lines=(
            "our verl GRPO run died again around step 41, here is what I have:",
            "(TaskRunner pid=4127) step:41 - actor/entropy:0.412 - actor/pg_loss:-0.0031 - "
            "critic/score/mean:0.583",
            "(raylet, ip=10.244.3.17) A worker died or was killed while executing a task by an "
            "unexpected system error.",
            "(TaskRunner pid=4127) Traceback (most recent call last):",
            '(TaskRunner pid=4127)   File "/usr/local/lib/python3.10/dist-packages/verl/'
            'single_controller/ray/base.py", line 358, in _init_with_resource_pool',
            "(TaskRunner pid=4127)     register_center_actor = create_worker_group_register_center"
            '(name=f"{self.name_prefix}_register_center", info=rank_zero_info)',
            "(TaskRunner pid=4127) ValueError: The name qwAKMv_register_center (namespace=None) "
            "is already taken.",
            "$ kubectl describe pod -n ml-train rayjob-verl-raycluster-x7k2p-gpu-group-worker-9zq4f",
            "$ kubectl get events -n ml-train",
            "any idea what's going on?",
        ),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.fixture)
def test_each_fixture_gives_exactly_these_signals(case: Case) -> None:
    parts = parts_of(fixture(case.fixture), case.fixture)
    assert [summary(s) for s in signals_of(parts)] == case.signals


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.fixture)
def test_what_is_not_structured_stays_log_text_in_order(case: Case) -> None:
    """The log remainder keeps every unparsed line, in order (long lines are compared
    by their start)."""
    parts = parts_of(fixture(case.fixture), case.fixture)
    remainder = [part for part in parts if isinstance(part, LogText) and part.obj is None]
    kept = [
        line
        for part in remainder
        for line in b"".join(part.chunks).decode().splitlines()
        if line.strip()
    ]
    assert len(kept) == len(case.log_lines)
    for line, want in zip(kept, case.log_lines, strict=True):
        assert line.startswith(want)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.fixture)
def test_log_text_keeps_the_line_numbers_of_the_paste(case: Case) -> None:
    text = fixture(case.fixture)
    for part in parts_of(text, case.fixture):
        if isinstance(part, LogText) and part.obj is None:
            log = b"".join(part.chunks).decode()
            assert log.count("\n") == text.count("\n")
            for number, line in enumerate(log.split("\n")):
                assert not line.strip() or line == text.split("\n")[number]


def test_every_signal_carries_its_origin_and_only_string_fields() -> None:
    for case in CASES:
        for signal in signals_of(parts_of(fixture(case.fixture), case.fixture)):
            assert signal.origin == case.fixture
            assert all(isinstance(v, str) and v for v in signal.fields.values()), signal


# -- pod_status: the fields bump_memory and the playbooks read --------------------------

DESCRIBE_WORKER_FIELDS = {
    "pod": WORKER,
    "namespace": "ml-train",
    "phase": "Running",
    "node": "gpu-node-3",
    "ray_cluster": "rayjob-verl-raycluster-x7k2p",
    "ray_group": "gpu-group",
    "ray_node_type": "worker",
    "container": "ray-worker",
    "restart_count": "1",
    "init": "false",
    "memory_limit": "16Gi",
    "memory_request": "16Gi",
    "gpu_limit": "1",
    "state": "last_terminated",
    "exit_code": "137",
}


def test_describe_of_an_oomkilled_worker_gives_the_last_state_with_its_limits() -> None:
    signal = only(
        signals_of(parts_of(fixture("describe-worker-oomkilled.txt"))), reason="OOMKilled"
    )
    assert dict(signal.fields) == DESCRIBE_WORKER_FIELDS
    assert signal.text == "container ray-worker last terminated: OOMKilled (exit code 137)"
    assert signal.time is not None
    assert signal.time.isoformat() == "2025-11-03T10:13:58+00:00"


def test_describe_and_json_of_a_pod_give_the_same_fields() -> None:
    """The same pod pasted as describe output and as JSON is the same evidence."""
    from_describe = only(
        signals_of(parts_of(fixture("describe-worker-oomkilled.txt"))), reason="OOMKilled"
    )
    from_mixed = only(signals_of(parts_of(fixture("mixed-paste.txt"))), reason="OOMKilled")
    assert dict(from_mixed.fields) == dict(from_describe.fields)


def test_init_containers_are_marked_init() -> None:
    signal = only(
        signals_of(parts_of(fixture("describe-worker-oomkilled.txt"))), reason="Completed"
    )
    assert signal.fields["init"] == "true"
    assert signal.fields["container"] == "wait-gcs-ready"
    assert signal.fields["memory_limit"] == "256Mi"
    assert "gpu_limit" not in signal.fields
    assert signal.text == "init container wait-gcs-ready terminated: Completed (exit code 0)"


def test_pod_json_gives_current_waiting_and_last_terminated_states() -> None:
    signals = signals_of(parts_of(fixture("pod-oomkilled.json")))
    waiting = only(signals, reason="CrashLoopBackOff")
    last = only(signals, reason="OOMKilled")
    assert dict(last.fields) == {
        "pod": RLHF_WORKER,
        "namespace": "rlhf",
        "phase": "Running",
        "node": "gpu-h100-node-7",
        "ray_cluster": "openrlhf-ppo-raycluster-m2d8k",
        "ray_group": "actor",
        "ray_node_type": "worker",
        "container": "ray-worker",
        "restart_count": "3",
        "init": "false",
        "memory_limit": "64Gi",
        "memory_request": "64Gi",
        "gpu_limit": "8",
        "state": "last_terminated",
        "exit_code": "137",
    }
    assert waiting.fields["state"] == "waiting"
    assert "exit_code" not in waiting.fields
    assert waiting.text == (
        "container ray-worker waiting: CrashLoopBackOff\n"
        "back-off 40s restarting failed container=ray-worker "
        f"pod={RLHF_WORKER}_rlhf(c1a2b3c4-d5e6-47f8-9a0b-1c2d3e4f5a6b)"
    )


@pytest.mark.parametrize(
    ("reason", "fields", "text_start"),
    [
        (
            "Unschedulable",
            {"state": "condition", "condition": "PodScheduled", "phase": "Pending"},
            f"pod {PENDING_WORKER} not scheduled: Unschedulable\n0/4 nodes are available: "
            "4 Insufficient nvidia.com/gpu.",
        ),
        (
            "Evicted",
            {"state": "pod", "phase": "Failed", "ray_node_type": "head", "ray_group": "headgroup"},
            f"pod {RLHF_HEAD}: Evicted\nThe node was low on resource: memory.",
        ),
        (
            "ImagePullBackOff",
            {"state": "waiting", "init": "true", "container": "wait-gcs-ready"},
            "init container wait-gcs-ready waiting: ImagePullBackOff\n"
            'Back-off pulling image "registry.internal/ray-init:2.49.2"',
        ),
        (
            "PodInitializing",
            {"state": "waiting", "init": "false", "gpu_limit": "2", "memory_limit": "48Gi"},
            "container ray-worker waiting: PodInitializing",
        ),
    ],
)
def test_pod_list_yaml_signals(reason: str, fields: dict[str, str], text_start: str) -> None:
    signal = only(signals_of(parts_of(fixture("pods-list.yaml"))), reason=reason)
    assert {key: signal.fields.get(key) for key in fields} == fields
    assert signal.text.startswith(text_start)


def test_pod_level_and_condition_signals_name_no_container() -> None:
    signals = signals_of(parts_of(fixture("pods-list.yaml")))
    for reason in ("Evicted", "Unschedulable"):
        fields = only(signals, reason=reason).fields
        assert "container" not in fields
        assert "memory_limit" not in fields


# -- k8s_event ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reason", "fields", "text_start"),
    [
        (
            "events-all-namespaces.txt",
            "FailedScheduling",
            {
                "type": "Warning",
                "object_kind": "Pod",
                "object_name": PENDING_WORKER,
                "namespace": "ml-train",
            },
            "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes",
        ),
        (
            "events-all-namespaces.txt",
            "OOMKilling",
            {
                "type": "Warning",
                "object_kind": "Node",
                "object_name": "gpu-h100-node-7",
                "namespace": "default",
            },
            "Memory cgroup out of memory: Killed process 48213 (ray::WorkerDict)",
        ),
        (
            "events-default.txt",
            "BackOff",
            {"type": "Warning", "object_kind": "Pod", "object_name": WORKER},
            "Back-off restarting failed container ray-worker in pod",
        ),
        (
            "events-wide.txt",
            "FailedScheduling",
            {
                "type": "Warning",
                "object_kind": "Pod",
                "object_name": PENDING_WORKER,
                "count": "14",
            },
            "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
        ),
        (
            "events-wide.txt",
            "BackOff",
            {"type": "Warning", "object_kind": "Pod", "object_name": WORKER, "count": "2"},
            "Back-off restarting failed container ray-worker in pod",
        ),
        (
            "describe-worker-oomkilled.txt",
            "BackOff",
            {
                "type": "Warning",
                "object_kind": "Pod",
                "object_name": WORKER,
                "namespace": "ml-train",
                "count": "2",
                "ray_cluster": "rayjob-verl-raycluster-x7k2p",
                "ray_group": "gpu-group",
                "ray_node_type": "worker",
            },
            "Back-off restarting failed container ray-worker in pod",
        ),
        (
            "raycluster-quota.yaml",
            "FailedToCreateWorkerPod",
            {
                "type": "Warning",
                "object_kind": "RayCluster",
                "object_name": "openrlhf-ppo-raycluster-m2d8k",
                "namespace": "rlhf",
                "count": "5",
            },
            "Failed to create worker Pod rlhf/openrlhf-ppo-raycluster-m2d8k-actor-worker-q8r7t",
        ),
    ],
)
def test_event_signals(name: str, reason: str, fields: dict[str, str], text_start: str) -> None:
    signal = only(signals_of(parts_of(fixture(name))), reason=reason)
    assert dict(signal.fields) == fields
    assert signal.text.startswith(text_start)


def test_a_wide_events_table_keeps_the_message_apart_from_the_columns_after_it() -> None:
    signal = only(signals_of(parts_of(fixture("events-wide.txt"))), reason="FailedScheduling")
    assert signal.text.endswith("No preemption victims found for incoming pod.")


def test_events_in_a_mixed_paste_borrow_what_the_describe_knows() -> None:
    """The events table names pods only; the describe above it gives namespace, cluster
    and group, and a pending pod of the same cluster is recognised by its name."""
    signals = signals_of(parts_of(fixture("mixed-paste.txt")))
    pending = only(signals, reason="FailedScheduling")
    assert dict(pending.fields) == {
        "type": "Warning",
        "object_kind": "Pod",
        "object_name": PENDING_WORKER,
        "namespace": "ml-train",
        "ray_cluster": "rayjob-verl-raycluster-x7k2p",
        "ray_group": "gpu-group",
        "ray_node_type": "worker",
    }
    created = only(signals, reason="CreatedRayCluster")
    assert created.fields["namespace"] == "ml-train"  # from `kubectl get events -n ml-train`


# -- ray_job and ray_cluster --------------------------------------------------------------


def test_rayjob_deadline_exceeded() -> None:
    signal = only(signals_of(parts_of(fixture("rayjob-deadline-exceeded.yaml"))), source="ray_job")
    assert signal.reason == "DeadlineExceeded"
    assert dict(signal.fields) == {
        "rayjob": "verl-grpo-qwen3",
        "namespace": "ml-train",
        "job_deployment_status": "Failed",
        "job_status": "RUNNING",
        "ray_cluster": "verl-grpo-qwen3-raycluster-7kd2p",
        "job_id": "verl-grpo-qwen3-8xq2z",
        # KubeRay 1.5–1.7 fields (bot.core.incidents.kuberay_retries, docs/signals.md)
        "backoff_limit": "0",
        "failed_attempts": "0",
        "succeeded_attempts": "0",
        "active_deadline_seconds": "7200",
        "start_time": "2025-11-03T07:00:03Z",
        # shutdownAfterJobFinishes with ttlSecondsAfterFinished 600
        "deletion_policy": "DeleteCluster",
        "deletion_ttl_seconds": "600",
    }
    assert signal.text == (
        "The RayJob has passed the activeDeadlineSeconds. StartTime: 2025-11-03T07:00:03Z. "
        "ActiveDeadlineSeconds: 7200"
    )


def test_raycluster_with_a_failing_replica_condition() -> None:
    signal = only(signals_of(parts_of(fixture("raycluster-quota.yaml"))), source="ray_cluster")
    assert dict(signal.fields) == {
        "ray_cluster": "openrlhf-ppo-raycluster-m2d8k",
        "namespace": "rlhf",
        "state": "ready",
        "condition": "ReplicaFailure",
        "condition_reason": "FailedCreateWorkerPod",
        "available_workers": "2",
        "ready_workers": "2",
        "desired_workers": "4",
    }
    assert signal.text.startswith(
        'pods "openrlhf-ppo-raycluster-m2d8k-actor-worker-q8r7t" is forbidden: exceeded quota'
    )


def test_ray_job_json_gives_a_signal_and_its_logs_as_driver_log() -> None:
    parts = parts_of(fixture("ray-job-failed.json"))
    signal = only(signals_of(parts), source="ray_job")
    assert dict(signal.fields) == {
        "submission_id": "raysubmit_pX3kW9vLq2Tz8RbN",
        "job_id": "02000000",
        "status": "FAILED",
        "error_type": "JOB_ENTRYPOINT_COMMAND_ERROR",
        "entrypoint": "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
        "trainer.nnodes=2 trainer.n_gpus_per_node=8",
        "driver_exit_code": "1",
        "type": "SUBMISSION",
    }
    assert signal.text == (
        "Job entrypoint command failed with exit code 1, last available logs "
        "(truncated to 20,000 chars):"
    )
    assert signal.time is not None
    (message,) = [p for p in parts if isinstance(p, LogText)]
    assert message.source is SourceKind.DRIVER_LOG
    assert str(message.obj) == "rayjobsubmission/raysubmit_pX3kW9vLq2Tz8RbN"
    assert message.workload == message.obj
    log = b"".join(message.chunks).decode()
    assert "Worker exit type: SYSTEM_ERROR" in log
    assert log.splitlines()[-1].startswith("The actor is dead because its worker process has died.")


def test_ray_job_status_text() -> None:
    signal = only(signals_of(parts_of(fixture("ray-job-status.txt"))), source="ray_job")
    assert dict(signal.fields) == {
        "submission_id": "raysubmit_pX3kW9vLq2Tz8RbN",
        "status": "FAILED",
    }
    assert signal.text == (
        "Job entrypoint command failed with exit code 1, last available logs "
        "(truncated to 20,000 chars):"
    )


@pytest.mark.parametrize(
    ("text", "reason", "fields", "message"),
    [
        (
            "Job submission server address: http://10.0.0.5:8265\n"
            "Status for job 'raysubmit_8nqL2dXbHu1Kc3Ve': RUNNING\n"
            "Status message: Job is currently running.\n",
            "RUNNING",
            {"submission_id": "raysubmit_8nqL2dXbHu1Kc3Ve", "status": "RUNNING"},
            "Job is currently running.",
        ),
        (
            "Status for job '03000000': PENDING\n",
            "PENDING",
            {"job_id": "03000000", "status": "PENDING"},
            "Ray job 03000000: PENDING",
        ),
        (
            "\x1b[33mJob 'raysubmit_Qm2' was stopped\x1b[39m\n",
            "STOPPED",
            {"submission_id": "raysubmit_Qm2", "status": "STOPPED"},
            "Ray job raysubmit_Qm2: STOPPED",
        ),
        (
            "------------------------------------------\n"
            "\x1b[32mJob 'raysubmit_Zx9' succeeded\x1b[39m\n"
            "------------------------------------------\n",
            "SUCCEEDED",
            {"submission_id": "raysubmit_Zx9", "status": "SUCCEEDED"},
            "Ray job raysubmit_Zx9: SUCCEEDED",
        ),
        (  # Ray's CLI logger in record style (output not a terminal: a CI or pod log)
            "2025-11-03 10:14:20,511\tERR cli.py:74 -- Job 'raysubmit_Qk8vXw2mT3nLp9Rb' failed\n"
            "2025-11-03 10:14:20,511\tERR cli.py:75 -- Status message: Job entrypoint "
            "command failed with exit code 1\n",
            "FAILED",
            {"submission_id": "raysubmit_Qk8vXw2mT3nLp9Rb", "status": "FAILED"},
            "Job entrypoint command failed with exit code 1",
        ),
        (
            "2024-05-02 08:01:13,002\tINFO cli.py:290 -- Status for job "
            "'raysubmit_8nqL2dXbHu1Kc3Ve': RUNNING\n",
            "RUNNING",
            {"submission_id": "raysubmit_8nqL2dXbHu1Kc3Ve", "status": "RUNNING"},
            "Ray job raysubmit_8nqL2dXbHu1Kc3Ve: RUNNING",
        ),
        (  # as KubeRay's docs show a `ray job submit` through the dashboard
            "2025-01-06 11:53:38,368\tSUCC cli.py:63 -- ------------------------------------\n"
            "2025-01-06 11:53:38,368\tSUCC cli.py:64 -- Job 'raysubmit_9NfCvwcmcyMNFCvX' succeeded\n",
            "SUCCEEDED",
            {"submission_id": "raysubmit_9NfCvwcmcyMNFCvX", "status": "SUCCEEDED"},
            "Ray job raysubmit_9NfCvwcmcyMNFCvX: SUCCEEDED",
        ),
    ],
)
def test_ray_job_status_variants(
    text: str, reason: str, fields: dict[str, str], message: str
) -> None:
    signal = only(signals_of(parts_of(text)), source="ray_job")
    assert signal.reason == reason
    assert dict(signal.fields) == fields
    assert signal.text == message


def test_a_submitted_job_line_is_not_a_status() -> None:
    parts = parts_of("Job 'raysubmit_Zx9' submitted successfully\n")
    assert signals_of(parts) == []
    assert logs_of(parts) == ["Job 'raysubmit_Zx9' submitted successfully\n"]


# -- fragments people paste -----------------------------------------------------------


def _signals(text: str) -> list[Signal]:
    return [p for p in parts_of(text) if isinstance(p, Signal)]


def test_a_submitter_job_gives_one_ray_job_signal_per_failed_condition() -> None:
    (signal,) = _signals(
        "kind: Job\napiVersion: batch/v1\nmetadata:\n  name: rayjob-sample\n  namespace: ml\n"
        "status:\n  conditions:\n"
        "  - type: Complete\n    status: 'False'\n"
        "  - type: Failed\n    status: 'True'\n    reason: BackoffLimitExceeded\n"
        "    message: Job has reached the specified backoff limit\n  failed: 3\n"
    )
    assert signal.source is SourceKind.RAY_JOB
    assert signal.reason == "BackoffLimitExceeded"
    assert signal.obj is not None
    assert signal.obj.kind == "Job"
    assert signal.fields["message"] == "Job has reached the specified backoff limit"
    assert signal.fields["failed"] == "3"
    assert signal.text.startswith("Job rayjob-sample failed: BackoffLimitExceeded")


def test_a_pod_describe_cut_before_its_containers_is_still_a_pod() -> None:
    (signal,) = _signals(
        "Name:             raycluster-kuberay-head-ldg9f\nNamespace:        default\n"
        "Start Time:       Tue, 02 Jul 2024 22:16:22 +0800\nStatus:           Failed\n"
        "Reason:           Evicted\n"
        "Message:          The node was low on resource: memory.\nIP:               10.42.0.2\n"
    )
    assert (signal.source, signal.reason) == (SourceKind.POD_STATUS, "Evicted")
    assert signal.obj is not None
    assert signal.obj.name == "raycluster-kuberay-head-ldg9f"


@pytest.mark.parametrize(
    ("text", "reason", "fields", "message"),
    [
        (
            "4m11s       Warning   Evicted               pod/egg-<id here>    The node was low"
            " on resource: memory.\n",
            "Evicted",
            {"type": "Warning", "object_kind": "Pod", "object_name": "egg-<id here>", "count": "1"},
            "The node was low on resource: memory.",
        ),
        (
            "ml   2m   Warning   BackOff   pod/ray-head-x   Back-off restarting failed container\n",
            "BackOff",
            {
                "type": "Warning",
                "object_kind": "Pod",
                "object_name": "ray-head-x",
                "namespace": "ml",
                "count": "1",
            },
            "Back-off restarting failed container",
        ),
        (
            "  Warning  Unhealthy  27m (x476 over 72m)    kubelet  Readiness probe failed:\n",
            "Unhealthy",
            {"type": "Warning", "count": "476"},
            "Readiness probe failed:",
        ),
    ],
)
def test_event_rows_without_their_header_are_events(
    text: str, reason: str, fields: dict[str, str], message: str
) -> None:
    (signal,) = _signals(text)
    assert (signal.source, signal.reason) == (SourceKind.K8S_EVENT, reason)
    assert dict(signal.fields) == fields
    assert signal.text == message


def test_a_log_line_is_not_an_event_row() -> None:
    assert _signals("2m Warning: disk almost full on node-3\n(raylet) Warning  pending\n") == []
