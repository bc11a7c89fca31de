"""Malformed, partial and hostile input: never a crash, always a sensible split.

Whatever cannot be read as a known object stays log text, objects with missing
parts give signals with what they do have, and large or pathological pastes are
split in time proportional to their size.
"""

from __future__ import annotations

import json
import time

import pytest

from bot.core.inputs import LogText
from bot.core.model import SourceKind
from tests.support.inputs import fixture, logs_of, parts_of, signals_of, summary


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(fixture("pod-oomkilled.json")[:1500], id="truncated Pod JSON"),
        pytest.param('{"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "x"', id="unclosed"),
        pytest.param('{"level": "info", "msg": "step 12", "loss": 0.12}\n' * 3, id="JSON-lines"),
        pytest.param('{"kind": "Pod"}\n', id="JSON with kind but no apiVersion"),
        pytest.param("[1, 2, 3]\n[]\n{}\n", id="JSON that is no object"),
        pytest.param("[2025-11-03 10:14:02,123 I 12 12] raylet.cc:1: hi\n", id="raylet line"),
        pytest.param("kind: of a log line\nwith words\n", id="kind: in prose"),
        pytest.param("---\nfoo: bar\nbaz: [1, 2]\n", id="YAML that is not a k8s object"),
        pytest.param("Name: the trial\nsome prose\n", id="Name: in prose"),
        pytest.param("LAST SEEN is a column\n", id="LAST SEEN in prose"),
        pytest.param("Status for job 'x': \n", id="status line without a status"),
        pytest.param("{" * 5000 + "\n", id="deeply nested braces"),
        pytest.param("[\n" * 5000, id="deeply nested brackets"),
    ],
)  # fmt: skip
def test_unreadable_structures_stay_log_text(text: str) -> None:
    parts = parts_of(text)
    assert signals_of(parts) == []
    assert logs_of(parts) == [text]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("apiVersion: v1\nkind: Pod\n\tbad: tab\n", "\tbad: tab"),
        ("apiVersion: v1\nkind: Pod\nspec:\n  a: " + "[a: " * 3000 + "\n", "  a: [a: [a: "),
        (
            'apiVersion: v1\nkind: Pod\nstatus:\n  reason: Evicted\n  File "x.py", line 3\n',
            '  File "x.py", line 3',
        ),
        ("apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n", "metadata: [unclosed"),
    ],
    ids=["a tab", "nested too deep", "an indented log line after the object", "unclosed"],
)
def test_yaml_broken_after_its_start_is_read_up_to_the_break(text: str, kept: str) -> None:
    """The document is parsed once more without the line that broke it and what
    follows; those lines stay log text, with their line numbers."""
    parts = parts_of(text)
    assert all(not s.fields.get("message") for s in signals_of(parts))
    (log,) = logs_of(parts)
    assert log.count("\n") == text.count("\n")
    assert kept in log
    assert not log.startswith("apiVersion")


def test_empty_and_blank_pastes_give_nothing() -> None:
    assert parts_of("") == []
    assert parts_of("\n\n   \n") == []


def test_a_truncated_object_does_not_hide_the_log_after_it() -> None:
    text = fixture("pod-oomkilled.json")[:900] + "\nModuleNotFoundError: No module named 'vllm'\n"
    (log,) = logs_of(parts_of(text))
    assert "ModuleNotFoundError: No module named 'vllm'" in log


def test_a_pod_without_status_gives_no_signals() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}}
    assert parts_of(json.dumps(pod)) == []


def test_objects_with_wrong_types_give_empty_values_not_errors() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": ["not", "a", "string"], "labels": "ray.io/cluster=x"},
        "spec": {"containers": "ray-worker"},
        "status": {
            "phase": 3,
            "reason": {"nested": True},
            "containerStatuses": [
                None,
                "text",
                {"name": "w", "state": {"terminated": {"exitCode": 137, "reason": None}}},
                {"name": "v", "state": {"waiting": []}, "lastState": "OOMKilled"},
            ],
            "conditions": [{"type": "PodScheduled", "status": False}],
        },
    }
    signals = signals_of(parts_of(json.dumps(pod)))
    assert [(s.reason, s.fields.get("state")) for s in signals] == [
        ("", "terminated"),
        ("", "condition"),
    ]
    terminated = signals[0]
    assert terminated.text == "container w terminated: no reason given (exit code 137)"
    assert dict(terminated.fields) == {
        "phase": "3",
        "container": "w",
        "init": "false",
        "state": "terminated",
        "exit_code": "137",
    }
    assert terminated.obj is not None
    assert terminated.obj.name == ""
    assert terminated.workload is None


def test_an_event_without_message_has_empty_text() -> None:
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "reason": "FailedCreate",
        "involvedObject": {"kind": "Job", "name": "rayjob-verl", "namespace": "ml-train"},
    }
    (signal,) = signals_of(parts_of(json.dumps(event)))
    assert summary(signal) == (
        "k8s_event",
        "FailedCreate",
        "ml-train/job/rayjob-verl",
        "ml-train/job/rayjob-verl",
    )
    assert signal.text == ""
    assert dict(signal.fields) == {
        "object_kind": "Job",
        "object_name": "rayjob-verl",
        "namespace": "ml-train",
    }


def test_an_event_about_nothing() -> None:
    (signal,) = signals_of(parts_of('{"apiVersion": "v1", "kind": "Event"}'))
    assert (signal.reason, signal.text, signal.obj, dict(signal.fields)) == ("", "", None, {})


def test_a_rayjob_without_status() -> None:
    rayjob = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"}}
    (signal,) = signals_of(parts_of(json.dumps(rayjob)))
    assert (signal.source, signal.reason, dict(signal.fields)) == (
        SourceKind.RAY_JOB,
        "",
        {"rayjob": "j"},
    )
    assert signal.text == "RayJob j: no deployment status"


def test_unknown_kinds_are_consumed_without_signals() -> None:
    """A Deployment is a Kubernetes object, not a log: no signal and no log text."""
    text = fixture("raycluster-quota.yaml").replace("kind: RayCluster", "kind: RayService")
    parts = parts_of(text)
    assert [s.reason for s in signals_of(parts)] == ["FailedToCreateWorkerPod"]
    configmap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n"
    assert parts_of(configmap) == []


def test_a_huge_message_is_kept_whole() -> None:
    tail = "".join(f"(WorkerDict pid=512) step {i} loss 0.{i:04d}\n" for i in range(20000))
    job = {
        "submission_id": "raysubmit_big",
        "status": "FAILED",
        "entrypoint": "python train.py",
        "message": "Job entrypoint command failed with exit code 1, last available logs "
        "(truncated to 20,000 chars):\n" + tail + "torch.OutOfMemoryError: CUDA out of memory.",
    }
    parts = parts_of(json.dumps(job, indent=2))
    (log,) = logs_of(parts, SourceKind.DRIVER_LOG)
    assert log.endswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert log.count("\n") == 20001


def test_log_text_is_bytes_of_the_original_including_carriage_returns() -> None:
    text = "progress 10%\rprogress 50%\rprogress 100%\nERROR boom\n"
    (part,) = parts_of(text)
    assert isinstance(part, LogText)
    assert b"".join(part.chunks) == text.encode()


# -- size ---------------------------------------------------------------------------------

MIB = 1 << 20


def _filled(line: str, size: int) -> str:
    return line * (size // len(line))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "seconds_per_mib"),
    [
        pytest.param(_filled("(WorkerDict pid=1, ip=10.0.0.1) INFO step 12 loss 0.1\n", 16 * MIB), 0.5, id="16 MiB log"),
        pytest.param(_filled('{"level": "info", "msg": "x"}\n', 4 * MIB), 0.5, id="JSON-lines"),
        pytest.param(_filled('{"kind": "Pod", "apiVersion": "v1", "metadata": \n', 4 * MIB), 2, id="unclosed JSON lines"),
        pytest.param(_filled("[\n", 4 * MIB), 0.5, id="brackets"),
        pytest.param(_filled("\n", 4 * MIB), 0.5, id="empty lines"),
        pytest.param(_filled("Name:   x\nNamespace:  y\nTraceback (most recent call last):\n", 2 * MIB), 3, id="describe starts"),
        pytest.param(_filled("apiVersion: v1\nkind: Pod\n  a: [\n", MIB // 2), 8, id="broken YAML documents"),
    ],
)  # fmt: skip
def test_large_and_pathological_pastes_split_in_linear_time(
    text: str, seconds_per_mib: float
) -> None:
    """Generous bounds, about quadratic blow-ups rather than speed: an ordinary log is
    a regex scan; every candidate line costs microseconds, every YAML document ~50 µs."""
    started = time.perf_counter()
    parts = parts_of(text)
    elapsed = time.perf_counter() - started
    budget = 1 + seconds_per_mib * len(text) / MIB
    assert elapsed < budget, f"{elapsed:.1f}s for {len(text) / MIB:.1f} MiB"
    assert sum(len(b"".join(p.chunks)) for p in parts if isinstance(p, LogText)) <= len(text)


@pytest.mark.slow
def test_a_large_kubectl_list_is_read() -> None:
    pod = json.loads(fixture("pod-oomkilled.json"))
    pods = {"apiVersion": "v1", "kind": "List", "items": [pod] * 2000}
    signals = signals_of(parts_of(json.dumps(pods, indent=4)))
    assert len(signals) == 4000


def test_describe_events_in_a_layout_the_table_reader_does_not_split_are_kept_as_text() -> None:
    """kubectl 1.0 printed Events tab-separated with empty cells (kubernetes#11453)."""
    text = (
        "Name:\t\t\t\tmysql\n"
        "Namespace:\t\t\tdefault\n"
        "Status:\t\t\t\tPending\n"
        "Events:\n"
        "  FirstSeen\t\t\t\tLastSeen\t\t\tCount\tFrom\t\tSubobjectPath\tReason\t\t\tMessage\n"
        "  Fri, 17 Jul 2015 10:30:55 -0700\tFri, 17 Jul 2015 10:31:10 -0700\t5\t{scheduler }"
        "\t\t\tfailedScheduling\tFailed for reason PodFitsResources and possibly others\n"
    )
    (log,) = logs_of(parts_of(text))
    assert log == (
        "  Fri, 17 Jul 2015 10:30:55 -0700\tFri, 17 Jul 2015 10:31:10 -0700\t5\t{scheduler }"
        "\t\t\tfailedScheduling\tFailed for reason PodFitsResources and possibly others\n"
    )
