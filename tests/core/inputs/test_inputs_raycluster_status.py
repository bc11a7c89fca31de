"""A RayCluster's status pasted without the object around it: as YAML under `status:`,
as `yq .status` output, as `-o jsonpath` JSON of the status or of its conditions. Each
unhealthy one gives the cluster's `ray_cluster` signal with the failing condition in
its fields; statuses that are not a RayCluster's stay log text."""

from __future__ import annotations

import textwrap

import pytest

from bot.core.model import SourceKind
from tests.support.inputs import logs_of, parts_of, signals_of

# kubectl get raycluster -o yaml, cut at `status:` (conditions as KubeRay ≥1.5 writes
# them, https://github.com/ray-project/kuberay/pull/4196)
UNDER_STATUS_KEY = """\
$ kubectl get raycluster raycluster-kuberay -o yaml
status:
  conditions:
  - lastTransitionTime: '2025-10-24T21:09:52Z'
    message: 'containers with unready status: [ray-head]; ray-head:
        ImagePullBackOff: Back-off pulling image "rayproject/roy:2.46.0":
        ErrImagePull: rpc error: code = NotFound desc = ...'
    reason: ContainersNotReady
    status: 'False'
    type: HeadPodReady
  desiredWorkerReplicas: 1
  state: ""
"""
# yq .status: the keys at column 0
BARE_KEYS = """\
availableWorkerReplicas: 2
conditions:
- lastTransitionTime: "2025-11-03T08:02:15Z"
  message: ""
  reason: HeadPodRunningAndReady
  status: "True"
  type: HeadPodReady
- lastTransitionTime: "2025-11-03T08:02:20Z"
  message: 'pods "rc-actor-worker-q8r7t" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16, limited: requests.nvidia.com/gpu=16'
  reason: FailedCreateWorkerPod
  status: "True"
  type: ReplicaFailure
desiredWorkerReplicas: 4
readyWorkerReplicas: 2
state: ready
"""
JSONPATH_STATUS = (
    '{"availableWorkerReplicas":0,"conditions":[{"lastTransitionTime":"2025-02-11T08:41:07Z",'
    '"message":"containers with unready status: [ray-head]","reason":"CrashLoopBackOff",'
    '"status":"False","type":"HeadPodReady"}],"desiredWorkerReplicas":1}\n'
)
JSONPATH_CONDITIONS = (
    '[{"lastTransitionTime":"2025-06-02T09:14:31Z","message":"FailedCreateHeadPod\\npods '
    '\\"rc-head-2kq8w\\" is forbidden: exceeded quota: test-quota","reason":"FailedCreateHeadPod",'
    '"status":"True","type":"ReplicaFailure"}]\n'
)
INDENTED_IN_PROSE = """\
The cluster never came up. Its status:

    status:
      conditions:
      - type: HeadPodReady
        status: "False"
        reason: OOMKilled
        message: 'ray-head: OOMKilled'
      desiredWorkerReplicas: 2

Any idea?
"""


@pytest.mark.parametrize(
    ("paste", "reason", "fields", "text"),
    [
        (
            UNDER_STATUS_KEY,
            "ContainersNotReady",
            {
                "condition": "HeadPodReady",
                "condition_reason": "ContainersNotReady",
                "desired_workers": "1",
            },
            'containers with unready status: [ray-head]; ray-head: ImagePullBackOff: Back-off pulling image "rayproject/roy:2.46.0": ErrImagePull: rpc error: code = NotFound desc = ...',
        ),
        (
            BARE_KEYS,
            "ready",
            {
                "state": "ready",
                "condition": "ReplicaFailure",
                "condition_reason": "FailedCreateWorkerPod",
                "available_workers": "2",
                "ready_workers": "2",
                "desired_workers": "4",
            },
            'pods "rc-actor-worker-q8r7t" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16, limited: requests.nvidia.com/gpu=16',
        ),
        (
            JSONPATH_STATUS,
            "CrashLoopBackOff",
            {
                "condition": "HeadPodReady",
                "condition_reason": "CrashLoopBackOff",
                "available_workers": "0",
                "desired_workers": "1",
            },
            "containers with unready status: [ray-head]",
        ),
        (
            JSONPATH_CONDITIONS,
            "FailedCreateHeadPod",
            {"condition": "ReplicaFailure", "condition_reason": "FailedCreateHeadPod"},
            'FailedCreateHeadPod\npods "rc-head-2kq8w" is forbidden: exceeded quota: test-quota',
        ),
        (
            INDENTED_IN_PROSE,
            "OOMKilled",
            {"condition": "HeadPodReady", "condition_reason": "OOMKilled", "desired_workers": "2"},
            "ray-head: OOMKilled",
        ),
    ],
    ids=["under-status-key", "yq-bare-keys", "jsonpath-status", "jsonpath-conditions", "indented"],
)
def test_an_unhealthy_status_fragment_is_the_clusters_signal(
    paste: str, reason: str, fields: dict[str, str], text: str
) -> None:
    [signal] = signals_of(parts_of(paste))
    assert (signal.source, signal.reason, dict(signal.fields), signal.text) == (
        SourceKind.RAY_CLUSTER,
        reason,
        fields,
        text,
    )
    assert (signal.obj, signal.workload) == (None, None)  # a fragment names no cluster


def test_the_fragment_leaves_the_lines_around_it_as_log_text() -> None:
    parts = parts_of(INDENTED_IN_PROSE)
    [log] = logs_of(parts)
    assert log.splitlines() == ["The cluster never came up. Its status:", *[""] * 9, "Any idea?"]


@pytest.mark.parametrize(
    "paste",
    [
        # healthy: every condition holds
        textwrap.dedent(
            """\
            status:
              availableWorkerReplicas: 2
              conditions:
              - {type: HeadPodReady, status: "True", reason: HeadPodRunningAndReady}
              - {type: RayClusterProvisioned, status: "True", reason: AllPodRunningAndReadyFirstTime}
              desiredWorkerReplicas: 2
              state: ready
            """
        ),
        # pods still being created
        '[{"type":"HeadPodReady","status":"False","reason":"RayClusterPodsProvisioning"}]\n',
    ],
    ids=["healthy", "provisioning"],
)
def test_a_healthy_or_provisioning_status_reports_no_failing_condition(paste: str) -> None:
    [signal] = signals_of(parts_of(paste))
    assert signal.source is SourceKind.RAY_CLUSTER
    assert "condition" not in signal.fields
    assert logs_of(parts_of(paste)) == []


@pytest.mark.parametrize(
    "paste",
    [
        # a pod's status fragment: read by the log signatures, not claimed as a cluster's
        "status:\n  containerStatuses:\n  - lastState:\n      terminated:\n        reason: OOMKilled\n",
        # a RayJob's status fragment
        "status:\n  jobDeploymentStatus: Failed\n  reason: SubmissionFailed\n",
        # a RayJob's status holds its cluster's status: still the RayJob's, read as log
        "status:\n  jobDeploymentStatus: Failed\n  rayClusterStatus:\n"
        "    availableWorkerReplicas: 1\n    desiredWorkerReplicas: 1\n",
        # a log line that happens to start with a status key
        "state: loading checkpoint shard 3/8\n",
    ],
    ids=["pod-status", "rayjob-status", "rayjob-with-cluster-status", "log-line"],
)
def test_a_status_that_is_not_a_rayclusters_stays_log_text(paste: str) -> None:
    parts = parts_of(paste)
    assert signals_of(parts) == []
    assert logs_of(parts) == [paste]
