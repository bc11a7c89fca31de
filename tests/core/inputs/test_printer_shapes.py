"""kubectl's printers, one shape each, as their source prints them: `kubectl get pods`
(plain, `-o wide`, `-A`, `--show-kind`, `-o custom-columns`), `kubectl get all`'s kind/name rows, `kubectl get
events` and `kubectl events`, `kubectl describe` of a Pod (Last State) and a Node
(Conditions), and status fragments in YAML and JSON; kubectl 1.13's tab-separated events,
rows indented or quoted as an issue quotes them. Each must reach its class.

Column sets: pkg/printers/internalversion/printers.go (podColumnDefinitions, the wide
columns IP, NODE, NOMINATED NODE, READINESS GATES; RESTARTS as "N (age ago)" since 1.22),
staging/src/k8s.io/kubectl/pkg/cmd/get (NAMESPACE first with -A, kind/name with
--show-kind and for several kinds), staging/src/k8s.io/kubectl/pkg/cmd/events/
event_printer.go (`kubectl events`: LAST SEEN with "(xN over T)", OBJECT as Kind/name),
staging/src/k8s.io/kubectl/pkg/describe/describe.go."""

from __future__ import annotations

import textwrap

import pytest

from bot.core.diagnosis.engine import Engine
from tests.support.daemon import engine as builtin_engine

SHAPES = [
    (
        "get pods",
        """\
        NAME                                  READY   STATUS      RESTARTS      AGE
        raycluster-kuberay-head-x2k9p         1/1     Running     0             19m
        raycluster-kuberay-worker-gpu-7xk2p   0/1     OOMKilled   3 (41s ago)   19m
        """,
        "pod_oom_killed",
    ),
    (
        "get pods -o wide",
        """\
        NAME                                  READY   STATUS             RESTARTS       AGE   IP           NODE                         NOMINATED NODE   READINESS GATES
        raycluster-kuberay-worker-gpu-7xk2p   0/1     CrashLoopBackOff   6 (2m ago)     19m   10.4.3.21    gke-ml-a100-pool-8f2c-vq4n   <none>           <none>
        """,
        "crash_loop_backoff",
    ),
    (
        "get pods -A",
        """\
        NAMESPACE   NAME                                  READY   STATUS    RESTARTS   AGE
        ml          raycluster-kuberay-worker-gpu-7xk2p   0/1     Evicted   0          3h
        """,
        "pod_eviction",
    ),
    (
        "get pods -A --show-kind",
        """\
        NAMESPACE   NAME                                      READY   STATUS             RESTARTS   AGE
        ml          pod/raycluster-kuberay-worker-gpu-7xk2p   0/1     ImagePullBackOff   0          4m
        """,
        "image_pull_backoff",
    ),
    (
        "get pods -o custom-columns",
        """\
        NAME                                  STATUS    LAST-REASON   EXIT
        raycluster-kuberay-head-x2k9p         Running   <none>        <none>
        raycluster-kuberay-worker-gpu-7xk2p   Running   OOMKilled     137
        """,
        "pod_oom_killed",
    ),
    (
        "get all",
        """\
        NAME                                      READY   STATUS         RESTARTS   AGE
        pod/raycluster-kuberay-head-x2k9p         1/1     Running        0          41m
        pod/raycluster-kuberay-worker-gpu-7xk2p   0/1     NodeShutdown   0          41m

        NAME                                  TYPE        CLUSTER-IP    EXTERNAL-IP   PORT(S)                       AGE
        service/raycluster-kuberay-head-svc   ClusterIP   10.96.12.4    <none>        10001/TCP,8265/TCP,6379/TCP   41m
        """,
        "node_lost_preemption",
    ),
    (
        "get events",
        """\
        LAST SEEN   TYPE      REASON             OBJECT                                    MESSAGE
        2m          Warning   FailedScheduling   pod/raycluster-kuberay-worker-gpu-7xk2p   0/6 nodes are available: 6 Insufficient nvidia.com/gpu. preemption: 0/6 nodes are available: 6 No preemption victims found for incoming pod..
        """,
        "failed_scheduling_insufficient",
    ),
    (
        "kubectl events",
        """\
        LAST SEEN           TYPE      REASON      OBJECT                                    MESSAGE
        8s (x4 over 2m)     Warning   BackOff     Pod/raycluster-kuberay-head-x2k9p         Back-off restarting failed container ray-head in pod raycluster-kuberay-head-x2k9p_ml(681d0337-535c-4106-a2ad-eac8c3caf9da)
        """,
        "crash_loop_backoff",
    ),
    (
        "kubectl events -A",
        """\
        NAMESPACE   LAST SEEN   TYPE      REASON      OBJECT                                    MESSAGE
        ml          41s         Warning   Unhealthy   Pod/raycluster-kuberay-head-x2k9p         Liveness probe failed: HTTP probe failed with statuscode: 503
        """,
        "probe_failure",
    ),
    (
        "describe pod, Last State",
        """\
        Name:             raycluster-kuberay-worker-gpu-7xk2p
        Namespace:        ml
        Status:           Running
        Containers:
          ray-worker:
            Image:          rayproject/ray:2.40.0-gpu
            State:          Running
              Started:      Mon, 03 Nov 2025 08:04:11 +0000
            Last State:     Terminated
              Reason:       OOMKilled
              Exit Code:    137
              Started:      Mon, 03 Nov 2025 07:52:40 +0000
              Finished:     Mon, 03 Nov 2025 08:04:02 +0000
            Ready:          True
            Restart Count:  1
        """,
        "pod_oom_killed",
    ),
    (
        "describe node, Conditions",
        """\
        Name:               gke-ml-a100-pool-8f2c-vq4n
        Roles:              <none>
        Conditions:
          Type             Status    LastHeartbeatTime                 LastTransitionTime                Reason              Message
          ----             ------    -----------------                 ------------------                ------              -------
          MemoryPressure   Unknown   Mon, 03 Nov 2025 08:02:11 +0000   Mon, 03 Nov 2025 08:03:52 +0000   NodeStatusUnknown   Kubelet stopped posting node status.
          Ready            Unknown   Mon, 03 Nov 2025 08:02:11 +0000   Mon, 03 Nov 2025 08:03:52 +0000   NodeStatusUnknown   Kubelet stopped posting node status.
        """,
        "node_lost_preemption",
    ),
    (
        "status fragment, YAML",
        """\
        containerStatuses:
        - name: ray-head
          lastState:
            terminated:
              exitCode: 137
              reason: OOMKilled
          restartCount: 2
        """,
        "pod_oom_killed",
    ),
    (
        "status fragment, JSON",
        """\
        "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \\"rayproject/ray:2.99.0-gpu\\""}}
        """,
        "image_pull_backoff",
    ),
    (
        "get events, kubectl 1.13 and before (tabs, source in braces)",
        "2016-05-23 17:14:02 -0700 PDT\t2016-05-23 17:24:12 -0700 PDT\t41\tweb-1\tPod\t"
        "spec.containers{web}\tWarning\tUnhealthy\t{kubelet gke-pool-441034bf-vddb}\t"
        "Liveness probe failed: Get http://10.112.2.4:80/health: read tcp: use of closed network connection\n",
        "probe_failure",
    ),
    (
        "get pods -A with kinds, indented as an issue quotes the rows",
        """\
              ml     pod/train-grpo-head-x2k9p     1/1   Running     0                57m
              ml     pod/train-grpo-worker-7xk2p   2/3   OOMKilled   16 (5m13s ago)   57m
        """,
        "pod_oom_killed",
    ),
    (
        "a reply quoting describe Events",
        """\
        > Events:
        >   Type     Reason       Age   From     Message
        >   ----     ------       ----  ----     -------
        >   Warning  FailedMount  2m    kubelet  MountVolume.SetUp failed for volume "ckpt" : mount failed: exit status 32
        """,
        "volume_mount_failure",
    ),
    (
        "describe node, a GPU fewer allocatable than its capacity",
        """\
        Name:               gke-ml-a100-pool-8f2c-vq4n
        Roles:              <none>
        Capacity:
          cpu:                128
          nvidia.com/gpu:     8
        Allocatable:
          cpu:                127900m
          nvidia.com/gpu:     7
        System Info:
          Kernel Version:     5.15.0-1049-gke
        """,
        "gpu_unavailable",
    ),
    (
        "a Node as JSON, a GPU fewer allocatable",
        '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-7"}, '
        '"status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "6"}}}\n',
        "gpu_unavailable",
    ),
]


@pytest.fixture(scope="module")
def engine() -> Engine:
    return builtin_engine()


@pytest.mark.parametrize(
    ("text", "category"), [pytest.param(t, c, id=name) for name, t, c in SHAPES]
)
def test_each_printed_shape_reaches_its_class(engine: Engine, text: str, category: str) -> None:
    primary = engine.diagnose_text(textwrap.dedent(text)).primary
    assert primary is not None
    assert str(primary.category) == category
