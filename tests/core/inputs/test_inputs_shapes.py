"""More input shapes: nodes, describe of nodes and RayJobs, lists, multi-document YAML,
the events.k8s.io API, old and misaligned tables, and how several objects in one paste
are told apart."""

from __future__ import annotations

import json
import textwrap

import pytest

from bot.core.model import SourceKind
from tests.support.inputs import fixture, logs_of, only, parts_of, signals_of, summary

# -- nodes ------------------------------------------------------------------------------

NODE_SIGNALS = [
    ("NotReady", "Kubelet stopped posting node status."),
    ("Taint", "taint nvidia.com/gpu=present:NoSchedule"),
    ("Taint", "taint node.kubernetes.io/unreachable:NoSchedule"),
    ("Taint", "taint node.kubernetes.io/unreachable:NoExecute"),
]


@pytest.mark.parametrize("name", ["node-notready.json", "describe-node.txt"])
def test_a_not_ready_node_and_its_taints(name: str) -> None:
    signals = [s for s in signals_of(parts_of(fixture(name))) if s.source is SourceKind.NODE_STATUS]
    assert sorted((s.reason, s.text) for s in signals) == sorted(NODE_SIGNALS)
    assert {str(s.obj) for s in signals} == {"node/gpu-h100-node-7"}
    not_ready = only(signals, reason="NotReady")
    assert dict(not_ready.fields) == {
        "node": "gpu-h100-node-7",
        "condition": "Ready",
        "status": "Unknown",
        "condition_reason": "NodeStatusUnknown",
    }
    gpu = only(signals, taint_key="nvidia.com/gpu")
    assert dict(gpu.fields) == {
        "node": "gpu-h100-node-7",
        "taint_key": "nvidia.com/gpu",
        "taint_value": "present",
        "taint_effect": "NoSchedule",
    }


def test_describe_node_events_are_about_the_node() -> None:
    event = only(signals_of(parts_of(fixture("describe-node.txt"))), reason="NodeNotReady")
    assert summary(event) == ("k8s_event", "NodeNotReady", "node/gpu-h100-node-7", None)
    assert event.text == "Node gpu-h100-node-7 status is now: NodeNotReady"


def test_a_ready_node_without_taints_gives_nothing() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "cpu-node-1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    parts = parts_of(json.dumps(node, indent=2))
    assert parts == []


# -- describe of a RayJob (a custom resource) ------------------------------------------------


def test_describe_rayjob_reads_the_status_and_its_multi_line_message() -> None:
    """kubectl prints multi-line values (runtimeEnvYAML, the status message) from column 0;
    the describe block goes on past them, and the message's log lines become driver log."""
    parts = parts_of(fixture("describe-rayjob.txt"))
    job = only(signals_of(parts), source="ray_job")
    assert summary(job) == (
        "ray_job",
        "AppFailed",
        "default/rayjob/rayjob-sample",
        "default/rayjob/rayjob-sample",
    )
    assert dict(job.fields) == {
        "rayjob": "rayjob-sample",
        "namespace": "default",
        "job_deployment_status": "Failed",
        "job_status": "FAILED",
        "ray_cluster": "rayjob-sample-raycluster-2h7ds",
        "job_id": "rayjob-sample-prbts",
        "failed_attempts": "1",
        "succeeded_attempts": "0",
        "start_time": "2025-11-03T08:40:12Z",
    }
    assert logs_of(parts) == [
        "Job entrypoint command failed with exit code 2, last available logs (truncated to "
        "20,000 chars):\npython: can't open file '/home/ray/samples/sample_code.ppy': "
        "[Errno 2] No such file or directory"
    ]
    events = [s.reason for s in signals_of(parts) if s.source is SourceKind.K8S_EVENT]
    assert events == ["CreatedRayCluster", "CreatedJob", "Completed"]


# -- several objects in one paste -------------------------------------------------------------

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: ml-train
status:
  phase: Failed
  reason: Evicted
  message: 'The node was low on resource: ephemeral-storage.'
"""


# -- describe of a RayCluster (a custom resource) --------------------------------------------


def test_describe_raycluster_reads_the_operators_events_about_it() -> None:
    """KubeRay's own events in the RayCluster's Events block are about the RayCluster (the
    worker pod the quota refused has no name yet), and classify as the scheduling class."""
    parts = parts_of(fixture("describe-raycluster.txt"))
    events = [s for s in signals_of(parts) if s.source is SourceKind.K8S_EVENT]
    assert [(e.reason, e.obj and e.obj.kind, e.obj and e.obj.name) for e in events] == [
        ("CreatedHeadPod", "RayCluster", "verl-ppo-qwen-raycluster-x7k2p"),
        ("FailedToCreateWorkerPod", "RayCluster", "verl-ppo-qwen-raycluster-x7k2p"),
    ]
    assert "exceeded quota: ml-train-quota" in events[1].text


@pytest.mark.parametrize(
    "separator",
    ["---\n", "", "\n"],
    ids=["with ---", "back to back", "blank line between"],
)
def test_two_yaml_objects_are_two_objects(separator: str) -> None:
    text = POD_YAML.format(name="a") + separator + POD_YAML.format(name="b")
    signals = signals_of(parts_of(text))
    assert [str(s.obj) for s in signals] == ["ml-train/pod/a", "ml-train/pod/b"]
    assert logs_of(parts_of(text)) == []


def test_yaml_separators_comments_and_document_end_markers() -> None:
    text = "---\n# Source: chart/templates/pod.yaml\n" + POD_YAML.format(name="a") + "...\n"
    assert [str(s.obj) for s in signals_of(parts_of(text))] == ["ml-train/pod/a"]


DESCRIBE_POD = """\
Name:         {name}
Namespace:    ml-train
Labels:       ray.io/cluster=c1
Status:       Pending
Containers:
  ray-worker:
    State:          Waiting
      Reason:       ErrImagePull
    Restart Count:  0
"""


@pytest.mark.parametrize("separator", ["\n", ""], ids=["blank line between", "back to back"])
def test_kubectl_describe_pods_lists_several_pods(separator: str) -> None:
    text = DESCRIBE_POD.format(name="p1") + separator + DESCRIBE_POD.format(name="p2")
    signals = signals_of(parts_of(text))
    assert [(s.reason, str(s.obj)) for s in signals] == [
        ("ErrImagePull", "ml-train/pod/p1"),
        ("ErrImagePull", "ml-train/pod/p2"),
    ]


def test_kind_list_of_events_and_event_list_items_without_kind() -> None:
    event_list = {
        "apiVersion": "v1",
        "kind": "EventList",
        "items": [
            {
                "metadata": {"name": "w.1", "namespace": "ml-train"},
                "involvedObject": {"kind": "Pod", "name": "w", "namespace": "ml-train"},
                "reason": "Unhealthy",
                "message": "Readiness probe failed: command timed out",
                "type": "Warning",
                "count": 31,
                "lastTimestamp": "2025-11-03T10:00:00Z",
            }
        ],
    }
    (signal,) = signals_of(parts_of(json.dumps(event_list)))
    assert summary(signal) == ("k8s_event", "Unhealthy", "ml-train/pod/w", None)
    assert signal.fields["count"] == "31"
    assert signal.time is not None


def test_a_json_array_of_objects() -> None:
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": n},
            "status": {"reason": "Evicted"},
        }
        for n in ("a", "b")
    ]
    assert [str(s.obj) for s in signals_of(parts_of(json.dumps(pods)))] == ["pod/a", "pod/b"]


def test_a_ray_jobs_api_list() -> None:
    jobs = [
        {"submission_id": "raysubmit_a", "job_id": "01000000", "status": "SUCCEEDED",
         "entrypoint": "python a.py", "message": "Job finished successfully."},
        {"submission_id": "raysubmit_b", "job_id": None, "status": "FAILED",
         "entrypoint": "python b.py", "message": "Job entrypoint command failed with exit code 1. No logs available."},
    ]  # fmt: skip
    signals = signals_of(parts_of(json.dumps(jobs, indent=2)))
    assert [(s.reason, s.fields.get("job_id")) for s in signals] == [
        ("SUCCEEDED", "01000000"),
        ("FAILED", None),
    ]


# -- events.k8s.io/v1 ---------------------------------------------------------------------


def test_events_k8s_io_v1_reads_note_regarding_and_series() -> None:
    text = textwrap.dedent(
        """\
        apiVersion: events.k8s.io/v1
        kind: Event
        metadata:
          name: w.17a
          namespace: ml-train
        reason: BackOff
        note: Back-off restarting failed container ray-worker in pod w_ml-train(abc)
        regarding:
          kind: Pod
          name: w
          namespace: ml-train
        series:
          count: 12
          lastObservedTime: "2025-11-03T10:00:00.000000Z"
        type: Warning
        """
    )
    (signal,) = signals_of(parts_of(text))
    assert summary(signal) == ("k8s_event", "BackOff", "ml-train/pod/w", None)
    assert signal.text.startswith("Back-off restarting failed container ray-worker")
    assert signal.fields["count"] == "12"
    assert signal.time is not None


# -- tables ---------------------------------------------------------------------------------


def test_old_kubectl_events_layout_with_name_and_kind_columns() -> None:
    text = (
        "LAST SEEN   FIRST SEEN   COUNT     NAME      KIND      SUBOBJECT   TYPE      REASON"
        "             SOURCE              MESSAGE\n"
        "1m          5m           7         w-1       Pod                   Warning   "
        "FailedScheduling   default-scheduler   0/3 nodes are available: 3 Insufficient memory.\n"
    )
    (signal,) = signals_of(parts_of(text))
    assert summary(signal) == ("k8s_event", "FailedScheduling", "pod/w-1", None)
    assert signal.fields["count"] == "7"
    assert signal.text == "0/3 nodes are available: 3 Insufficient memory."


def test_a_table_whose_spaces_were_collapsed_is_split_on_gaps() -> None:
    text = (
        "LAST SEEN   TYPE   REASON   OBJECT   MESSAGE\n"
        '3m  Warning  FailedMount  pod/w  MountVolume.SetUp failed for volume "shm"\n'
    )
    (signal,) = signals_of(parts_of(text))
    assert (signal.reason, signal.text) == (
        "FailedMount",
        'MountVolume.SetUp failed for volume "shm"',
    )


def test_the_table_ends_at_the_first_line_that_is_not_an_event() -> None:
    text = fixture("events-default.txt") + 'Traceback (most recent call last):\n  File "x"\n'
    parts = parts_of(text)
    assert len(signals_of(parts)) == 4
    assert logs_of(parts)[0].strip().splitlines() == [
        "Traceback (most recent call last):",
        '  File "x"',
    ]


def test_kubectl_get_pods_output_stays_log_text() -> None:
    text = (
        "NAME                                                  READY   STATUS      RESTARTS      AGE\n"
        "rayjob-verl-raycluster-x7k2p-gpu-group-worker-9zq4f   0/1     OOMKilled   3 (40s ago)   34m\n"
    )  # fmt: skip
    parts = parts_of(text)
    assert signals_of(parts) == []
    assert logs_of(parts) == [text]


def test_crlf_line_endings() -> None:
    text = fixture("describe-worker-oomkilled.txt").replace("\n", "\r\n")
    signal = only(signals_of(parts_of(text)), reason="OOMKilled")
    assert signal.fields["memory_limit"] == "16Gi"
    assert signal.fields["ray_group"] == "gpu-group"
