"""`ray list actors|jobs|nodes` output pasted into a diagnosis.

The fixtures `ray-list-*` are what Ray 2.60's own CLI formatter
(`ray.util.state.state_cli.output_with_format`) prints for records shaped like
real ones: the default table with its banner, `--format table --detail` (multi-line
YAML cells), `--detail` YAML and `--format json`. The inline tables are the shapes
Ray's docs show for older versions and the same tables pasted without banner or
index, or with their spacing collapsed.
"""

from __future__ import annotations

import functools

import pytest

from bot.adapters.files.playbooks import builtin_engine
from bot.core.diagnosis.engine import Engine
from bot.core.model import Signal, SourceKind
from tests.support.inputs import fixture, logs_of, parts_of, signals_of

WORKER_DIED = "0b7fa4c5ef1a2b3c4d5e6f7a02000000"
NODE_DIED = "1c8e5d6f7a8b9c0d1e2f3a4b02000000"
OOM = "3e0a7f8b9c0d1e2f3a4b5c6d02000000"
NAMESPACE = "7f1c2e9a-1b2c-4d5e-8f90-a1b2c3d4e5f6"


@functools.cache
def engine() -> Engine:
    return builtin_engine()


def actors(signals: list[Signal]) -> list[tuple[str, str, str]]:
    return [
        (s.fields["actor_id"], s.reason, s.fields["class_name"])
        for s in signals
        if s.source is SourceKind.RAY_ACTOR
    ]


@pytest.mark.parametrize(
    "name",
    [
        "ray-list-actors-detail-table.txt",
        "ray-list-actors-detail-yaml.txt",
        "ray-list-actors-detail-json.txt",
    ],
)
def test_dead_actors_with_a_telling_death_become_ray_actor_signals(name: str) -> None:
    parts = parts_of(fixture(name))
    # the ray.kill'd TaskRunner and the ALIVE register center say nothing
    assert actors(signals_of(parts)) == [
        (WORKER_DIED, "WORKER_DIED", "WorkerDict"),
        (NODE_DIED, "NODE_DIED", "RayWorkerWrapper"),
        (OOM, "OUT_OF_MEMORY", "RolloutWorker"),
    ]
    first = signals_of(parts)[0]
    assert dict(first.fields) == {
        "actor_id": WORKER_DIED,
        "actor_name": "qwAKMvWorkerDict_0:0",
        "ray_namespace": NAMESPACE,
        "class_name": "WorkerDict",
        "state": "DEAD",
        "death_kind": "actor_died_error_context",
        "death_reason": "WORKER_DIED",
        "is_detached": "false",
        "pid": "4312",
        "node_id": "5e1d3c2b4a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7",
        "actor_job_id": "02000000",
    }
    # the Ray namespace is a field, never the object's (Kubernetes) namespace
    assert str(first.obj) == "rayactor/qwAKMvWorkerDict_0:0"
    assert first.text.startswith(
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR"
    )
    [deaths] = logs_of(parts, SourceKind.WORKER_LOG)
    prefixes = [
        f"(WorkerDict pid=4312, actor_id={WORKER_DIED}) The actor is dead because its worker",
        f"(RayWorkerWrapper pid=4419, actor_id={NODE_DIED}) The actor died because its node",
        f"(RayWorkerWrapper pid=4419, actor_id={NODE_DIED}) \tthe actor's node was preempted",
        f"(RolloutWorker pid=4520, actor_id={OOM}) The actor is dead because its worker",
        f"(RolloutWorker pid=4520, actor_id={OOM}) Memory on the node (IP: 10.0.3.17, ID:",
    ]
    lines = deaths.splitlines()
    assert [line[: len(want)] for line, want in zip(lines, prefixes, strict=True)] == prefixes
    # the table itself is not left behind as log text: only the command line is
    assert [log.strip() for log in logs_of(parts, SourceKind.DRIVER_LOG)] == [name_command(name)]


def name_command(name: str) -> str:
    return fixture(name).splitlines()[0]


@pytest.mark.parametrize(
    ("name", "primary", "secondary"),
    [
        (
            "ray-list-actors-detail-table.txt",
            "node_lost_preemption",
            ["ray_memory_monitor_oom", "worker_died_system_error"],
        ),
        (
            "ray-list-actors-detail-yaml.txt",
            "node_lost_preemption",
            ["ray_memory_monitor_oom", "worker_died_system_error"],
        ),
        ("ray-list-actors.txt", None, []),  # DEAD rows without their cause
        ("ray-list-nodes.txt", "node_lost_preemption", []),
    ],
)
def test_a_pasted_list_reaches_the_category_its_records_say(
    name: str, primary: str | None, secondary: list[str]
) -> None:
    diagnosis = engine().diagnose_text(fixture(name), name)
    assert (
        str(diagnosis.primary.category) if diagnosis.primary else None,
        [str(f.category) for f in diagnosis.secondary],
    ) == (primary, secondary)


def test_failed_jobs_are_ray_job_signals_and_their_messages_driver_log() -> None:
    parts = parts_of(fixture("ray-list-jobs.txt"))
    jobs = [
        (s.fields.get("submission_id"), s.reason, s.fields.get("error_type"))
        for s in signals_of(parts)
    ]
    assert jobs == [
        ("raysubmit_7wNNGHdVi92R8wt2", "SUCCEEDED", None),
        ("raysubmit_Hc8Zp2Qw5Nx1Rb7M", "FAILED", "JOB_ENTRYPOINT_COMMAND_ERROR"),
        ("raysubmit_Lq9wE2rT5yU8iO1p", "FAILED", "JOB_SUPERVISOR_ACTOR_DIED"),
    ]
    messages = logs_of(parts, SourceKind.DRIVER_LOG)[:2]
    assert [m.splitlines() for m in messages] == [
        [
            "Job entrypoint command failed with exit code 1, last available logs "
            "(truncated to 20,000 chars):",
            "    return self.model.generate(**inputs)",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
            "GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB is free.",
        ],
        [
            "Job supervisor actor died: The actor died because its node has died. "
            "Node Id: 8a84c0348285d1646a36bd5ba70120fae0c0502c68dc4dcfa7dae634"
        ],
    ]
    categories = engine().diagnose_text(fixture("ray-list-jobs.txt")).categories
    assert {"cuda_oom", "node_lost_preemption"} <= set(categories)


def test_dead_nodes_are_node_status_signals_with_their_death_reason() -> None:
    signals = signals_of(parts_of(fixture("ray-list-nodes.txt")))
    assert [(s.source, s.reason, s.fields["death_reason"], str(s.obj)) for s in signals] == [
        (SourceKind.NODE_STATUS, "DEAD", "UNEXPECTED_TERMINATION", "raynode/10.0.3.21"),
        (SourceKind.NODE_STATUS, "DEAD", "AUTOSCALER_DRAIN_IDLE", "raynode/10.0.3.24"),
    ]
    assert signals[0].text == (
        "Unexpected termination: health check failed due to missing too many heartbeats"
    )


# Ray 2.0's table (https://docs.ray.io/en/releases-2.0.0/ray-observability/state/state-api.html),
# with a DEAD row: no death cause in it, so nothing to say.
RAY_2_0 = """\
======== List: 2022-07-23 21:29:39.323925 ========
Stats:
------------------------------
Total: 2

Table:
------------------------------
    ACTOR_ID                          CLASS_NAME    NAME      PID  STATE
0  31405554844820381c2f0f8501000000  Actor                 96956  ALIVE
1  f36758a9f8871a9ca993b1d201000000  Actor                 96955  DEAD
"""
NO_BANNER = """\
    NODE_ID                                                   NODE_IP    IS_HEAD_NODE    STATE    STATE_MESSAGE                                                                   NODE_NAME
 0  8a84c0348285d1646a36bd5ba70120fae0c0502c68dc4dcfa7dae634  10.0.3.21  False           DEAD     Unexpected termination: health check failed due to missing too many heartbeats  10.0.3.21
(raylet) this log line follows the table
"""
NO_INDEX = """\
JOB_ID    SUBMISSION_ID               ENTRYPOINT       TYPE        STATUS  MESSAGE
02000000  raysubmit_Hc8Zp2Qw5Nx1Rb7M  python train.py  SUBMISSION  FAILED  Job supervisor actor died: The actor died because its node has died. Node Id: 8a84c034
"""
COLLAPSED = """\
ACTOR_ID CLASS_NAME STATE JOB_ID NAME NODE_ID PID RAY_NAMESPACE
0  0212a14cbf25f371c95d9dad01000000  Actor  DEAD  01000000  actor1  1ff7880  77  ray-cluster
"""


@pytest.mark.parametrize(
    ("paste", "signals", "logs"),
    [
        (RAY_2_0, [], []),
        (
            NO_BANNER,
            [("node_status", "DEAD", "10.0.3.21")],
            ["\n\n(raylet) this log line follows the table\n"],
        ),
        (
            NO_INDEX,
            [("ray_job", "FAILED", "raysubmit_Hc8Zp2Qw5Nx1Rb7M")],
            [
                "Job supervisor actor died: The actor died because its node has died. "
                "Node Id: 8a84c034"
            ],
        ),
        (COLLAPSED, [], []),
    ],
    ids=["ray-2.0", "no-banner", "no-index", "collapsed-spaces"],
)
def test_older_and_trimmed_tables(
    paste: str, signals: list[tuple[str, str, str]], logs: list[str]
) -> None:
    parts = parts_of(paste)
    found = [(str(s.source), s.reason, s.obj.name if s.obj else "") for s in signals_of(parts)]
    assert (found, logs_of(parts)) == (signals, logs)


@pytest.mark.parametrize(
    "paste",
    [
        # an upper-case line that is no State API header
        "    ACTOR_ID is missing from the request\n",
        # a header with no kind's columns
        "    NODE_ID  RESOURCES  LABELS\n 0  abc  CPU: 1  {}\n",
    ],
)
def test_lines_that_only_look_like_a_header_stay_log_text(paste: str) -> None:
    parts = parts_of(paste)
    assert (signals_of(parts), logs_of(parts)) == ([], [paste])


def test_failed_tasks_give_their_error_message_as_worker_log() -> None:
    parts = parts_of(fixture("ray-list-tasks-detail-yaml.txt"))
    assert signals_of(parts) == []
    [errors] = logs_of(parts, SourceKind.WORKER_LOG)
    prefix = "(tokenize_shard pid=5127, task_id=16310a0f0a45af5cffffffffffffffffffffffff02000000) "
    starts = [prefix + "Task was killed due to the node", prefix + "Memory on the node (IP: 10.0.3"]
    lines = errors.splitlines()
    assert [line[: len(want)] for line, want in zip(lines, starts, strict=True)] == starts
    diagnosis = engine().diagnose_text(fixture("ray-list-tasks-detail-yaml.txt"))
    assert diagnosis.primary is not None
    assert str(diagnosis.primary.category) == "ray_memory_monitor_oom"


def test_the_plain_tasks_table_is_read_but_names_no_cause() -> None:
    parts = parts_of(fixture("ray-list-tasks.txt"))
    assert (signals_of(parts), logs_of(parts)) == ([], ["$ ray list tasks\n\n" + "\n" * 11])
