"""The watch keeps every change and reports each once through what a long watch goes through.

The emulator's pod watch is scripted: a stream the server ends cleanly (the source
resumes from the last resourceVersion, no relist), a stream cut in the middle of an
event, a `410 Gone` inside the stream and one as the HTTP status of the watch request.
Between them, pods are changed behind the API's back (no watch event), as happens while
a watch is disconnected: only the relist can find those changes, and the state-keyed
reconcile must report each new state once and nothing twice. kmock's own watch then
replays every object as ADDED (it ignores resourceVersion), which must add nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import kmock
import pytest

from bot.adapters.kubernetes.api import PODS, RAY_JOBS
from bot.adapters.kubernetes.source import KubernetesSource, KubeSourceConfig
from bot.app.factories import build_sources
from bot.app.settings.sections import Settings
from bot.core.inputs import InputPart, LogText
from bot.core.model import ObjectRef, Signal, SourceKind
from bot.daemon.feed import Healthy, Observation
from tests.e2e.kubernetes.conftest import Emulator, kubeconfig, validate_kuberay, wait_for
from tests.support import kube_objects as o
from tests.support.daemon_process import wait_until

pytestmark = pytest.mark.kube

GONE = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "code": 410,
    "reason": "Expired",
    "message": "too old resource version: 7 (8812)",
}


def pod(name: str, status: dict[str, Any], rv: str = "5") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": o.NS, "uid": f"uid-{name}", "resourceVersion": rv},
        "spec": {"containers": [{"name": "main", "image": "trainer"}]},
        "status": status,
    }


def oom(finished: str, restarts: int) -> dict[str, Any]:
    return {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": "main",
                "restartCount": restarts,
                "state": {"running": {}},
                "lastState": {
                    "terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": finished}
                },
            }
        ],
    }


def waiting(reason: str) -> dict[str, Any]:
    return {
        "phase": "Pending",
        "containerStatuses": [
            {"name": "main", "restartCount": 0, "state": {"waiting": {"reason": reason}}}
        ],
    }


EVICTED = {
    "phase": "Failed",
    "reason": "Evicted",
    "message": "The node was low on resource: memory. Container main was using 30Gi, "
    "which exceeds its request of 8Gi.",
}


def failures(items: list[InputPart]) -> Counter[tuple[str, str, str]]:
    """(pod, reason, when) of every pod_status signal emitted."""
    return Counter(
        (i.obj.name if i.obj else "", i.reason, i.time.isoformat() if i.time else "")
        for i in items
        if isinstance(i, Signal) and i.source is SourceKind.POD_STATUS
    )


def script_pod_watch(emulator: Emulator) -> None:
    """Four watch requests that end badly, in order; then kmock's own watch."""
    pods = kmock.resource("v1/pods")

    def silently(name: str, body: dict[str, Any] | None, *, new: bool = False) -> Any:
        """A change to a stored pod that no watch hears about."""

        def change() -> None:
            key = (pods, o.NS, name)
            if body is None:
                emulator.k.objects[key].delete()
            elif new:
                emulator.k.objects[key] = body
            else:
                emulator.k.objects[key].patch(body)

        return change

    def script(k: Any) -> None:
        # 1. the server ends the stream cleanly after one (already known) state
        k[kmock.action.WATCH, pods] << iter(
            [{"type": "MODIFIED", "object": pod("pod-a", oom("2025-11-03T10:00:00Z", 1), "7")}]
        )
        # 2. a new pod, then changes the watch never delivers, then the cut mid-event
        k[kmock.action.WATCH, pods] << iter(
            [
                silently("pod-b", pod("pod-b", EVICTED, "8"), new=True),
                {"type": "ADDED", "object": pod("pod-b", EVICTED, "8")},
                silently("pod-a", {"status": oom("2025-11-03T10:05:00Z", 2)}),
                silently("pod-c", pod("pod-c", waiting("CrashLoopBackOff")), new=True),
                b'{"type": "MODIFIED", "object": {"metadata": {"name": "pod-',
            ]
        )
        # 3. more missed changes, then 410 Gone inside the stream
        k[kmock.action.WATCH, pods] << iter(
            [
                silently("pod-d", pod("pod-d", waiting("ImagePullBackOff")), new=True),
                silently("pod-b", None),
                {"type": "ERROR", "object": GONE},
            ]
        )
        # 4. 410 Gone as the watch request's own status
        k[kmock.action.WATCH, pods] << 410 << iter([GONE])

    emulator.run(script)


def test_cut_streams_and_410_gone_lose_nothing_and_repeat_nothing(emulator: Emulator) -> None:
    emulator.create(pod("pod-a", oom("2025-11-03T10:00:00Z", 1)))
    script_pod_watch(emulator)
    items: list[InputPart] = []
    source = KubernetesSource(
        emulator.api,
        KubeSourceConfig(
            namespaces=(o.NS,), kinds=("Pod",), backoff_initial=0.01, backoff_max=0.05
        ),
    )
    source.start(items.append)
    try:
        wait_for(lambda: source.status()["watches"]["Pod@ml-train"]["lists"] >= 4, what="relists")
        wait_for(lambda: source.status()["watches"]["Pod@ml-train"]["state"] == "watching")
        wait_for(lambda: ("pod-d", "ImagePullBackOff", "") in failures(items), what="pod-d")
        # a change through the API while kmock's own watch streams: delivered live
        emulator.api.patch(PODS, o.NS, "pod-a", {"status": oom("2025-11-03T10:09:00Z", 3)})
        wait_for(lambda: len(failures(items)) == 6, what="the live change")
        status = source.status()["watches"]["Pod@ml-train"]
    finally:
        source.stop()

    seen = failures(items)
    assert seen == Counter(
        {
            ("pod-a", "OOMKilled", "2025-11-03T10:00:00+00:00"): 1,  # the first list
            ("pod-b", "Evicted", ""): 1,  # watch 2
            ("pod-a", "OOMKilled", "2025-11-03T10:05:00+00:00"): 1,  # missed; relist after cut
            ("pod-c", "CrashLoopBackOff", ""): 1,  # missed; relist after the cut
            ("pod-d", "ImagePullBackOff", ""): 1,  # missed; relist after 410
            ("pod-a", "OOMKilled", "2025-11-03T10:09:00+00:00"): 1,  # live
        }
    )
    assert status["cuts"] == 1
    assert status["gone"] == 2
    assert status["lists"] == 4  # the first list and one relist per broken stream
    assert status["tracked_objects"] == 3  # pod-b was deleted while away: forgotten

    watches = emulator.requests(kmock.action.WATCH, "pods")
    assert watches[1]["resourceVersion"] == "7"  # resumed where the clean stream ended
    assert all(w.get("allowWatchBookmarks") == "true" for w in watches)


def test_bookmarks_resume_a_restarted_source_without_listing(emulator: Emulator) -> None:
    emulator.create(pod("pod-a", oom("2025-11-03T10:00:00Z", 1), rv="40"))
    config = KubeSourceConfig(namespaces=(o.NS,), kinds=("Pod",), backoff_initial=0.01)
    first = KubernetesSource(emulator.api, config)
    first.start()
    try:
        assert wait_until(first.synced, 5)
        wait_for(lambda: first.bookmarks().get("Pod@ml-train"), what="a bookmark")
    finally:
        first.stop()
    items = first.poll()
    assert list(failures(items)) == [("pod-a", "OOMKilled", "2025-11-03T10:00:00+00:00")]

    lists_before = len(emulator.requests(kmock.action.LIST, "pods"))
    resumed = KubeSourceConfig(namespaces=(o.NS,), kinds=("Pod",), resume_from=first.bookmarks())
    second = KubernetesSource(emulator.api, resumed)
    second.start()
    try:
        assert wait_until(second.synced, 5)
    finally:
        second.stop()
    assert len(emulator.requests(kmock.action.LIST, "pods")) == lists_before
    assert emulator.requests(kmock.action.WATCH, "pods")[-1]["resourceVersion"] == "40"


def test_without_kuberay_crds_one_clear_line_and_the_rest_still_watches(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    emulator.create(pod("pod-b", EVICTED))
    source = KubernetesSource(
        emulator.api,
        KubeSourceConfig(namespaces=(o.NS, "other"), backoff_initial=0.01),
    )
    with caplog.at_level(logging.INFO, logger="bot.adapters.kubernetes.source"):
        source.start()
        try:
            assert wait_until(source.synced, 5)
            wait_for(lambda: failures(source.poll()), what="the evicted pod")
            assert source.healthy()
            status = source.status()
        finally:
            source.stop()
    lines = [r.getMessage() for r in caplog.records if "KubeRay" in r.getMessage()]
    assert len(lines) == 1
    assert "ray.io/v1 rayjobs, rayclusters" in lines[0]
    assert "not installed" in lines[0]
    assert status["kuberay"].startswith("absent")
    assert sorted(status["watches"]) == [
        "Event@ml-train",
        "Event@other",
        "Node",
        "Pod@ml-train",
        "Pod@other",
    ]


def test_health_goes_down_when_the_api_server_does(emulator: Emulator) -> None:
    source = KubernetesSource(
        emulator.api,
        KubeSourceConfig(
            namespaces=(o.NS,),
            kinds=("Pod", "Node"),
            backoff_initial=0.01,
            backoff_max=0.05,
            unhealthy_after=0.3,
            read_timeout=1,
        ),
    )
    source.start()
    try:
        assert wait_until(source.synced, 5)
        assert source.healthy()
        emulator.stop()
        wait_for(lambda: not source.healthy(), what="the source to turn unhealthy")
        status = source.status()
        assert not status["healthy"]
        watch = status["watches"]["Pod@ml-train"]
        assert watch["errors"] >= 1
        assert watch["last_error"]
        assert watch["state"] in ("backoff", "listing")
    finally:
        source.stop()


def test_owners_are_resolved_through_the_api_and_cached(emulator: Emulator) -> None:
    """Pod → ReplicaSet → Deployment and Pod → Job → CronJob; an event storm about one
    pod costs one lookup per owner."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "reward-server", "namespace": o.NS, "uid": "uid-dep"},
        "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "x"}]}}},
    }
    replicaset = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "reward-server-7c9f8d6b5",
            "namespace": o.NS,
            "uid": "uid-rs",
            "ownerReferences": [
                {
                    "kind": "Deployment",
                    "name": "reward-server",
                    "uid": "uid-dep",
                    "controller": True,
                }
            ],
        },
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "nightly-eval-29123",
            "namespace": o.NS,
            "uid": "uid-job",
            "ownerReferences": [
                {"kind": "CronJob", "name": "nightly-eval", "uid": "uid-cj", "controller": True}
            ],
        },
    }
    web = pod("reward-server-7c9f8d6b5-x2x7q", waiting("CrashLoopBackOff"))
    web["metadata"]["labels"] = {"pod-template-hash": "7c9f8d6b5"}
    web["metadata"]["ownerReferences"] = [
        {
            "kind": "ReplicaSet",
            "name": "reward-server-7c9f8d6b5",
            "uid": "uid-rs",
            "controller": True,
        }
    ]
    batch = pod("nightly-eval-29123-4kq", EVICTED)
    batch["metadata"]["ownerReferences"] = [
        {"kind": "Job", "name": "nightly-eval-29123", "uid": "uid-job", "controller": True}
    ]
    for obj in (deployment, replicaset, job, web, batch):
        emulator.create(obj)
    for i in range(20):
        emulator.create(
            o.event(
                f"reward-server.{i}",
                "Pod",
                web["metadata"]["name"],
                "BackOff",
                f"Back-off restarting failed container main in pod {web['metadata']['name']} #{i}",
            )
        )
    source = KubernetesSource(
        emulator.api, KubeSourceConfig(namespaces=(o.NS,), kinds=("Pod", "Event"))
    )
    source.start()
    try:
        assert wait_until(source.synced, 5)
        items: list[InputPart] = []
        wait_for(lambda: items.extend(source.poll()) or len(items) >= 22, what="all signals")
        lookups = source.status()["owners"]["lookups"]
    finally:
        source.stop()
    signals = [i for i in items if isinstance(i, Signal)]
    by_object = {(s.source, s.obj.name if s.obj else ""): s.workload for s in signals}
    assert by_object[(SourceKind.POD_STATUS, web["metadata"]["name"])] == ObjectRef(
        "Deployment", "reward-server", o.NS
    )
    assert by_object[(SourceKind.POD_STATUS, batch["metadata"]["name"])] == ObjectRef(
        "CronJob", "nightly-eval", o.NS
    )
    events = [s for s in signals if s.source is SourceKind.K8S_EVENT]
    assert len(events) == 20
    assert {e.workload for e in events} == {ObjectRef("Deployment", "reward-server", o.NS)}
    assert lookups <= 4  # ReplicaSet and Job (and the pods, if an event came first): cached


class Recorder:
    """The daemon's pipeline as a Sink: records what it is given; full for a while."""

    def __init__(self, full_for: int = 0) -> None:
        self.items: list[Any] = []
        self.full_for = full_for

    def submit(self, item: Any) -> bool:
        if self.full_for > 0:
            self.full_for -= 1
            return False
        self.items.append(item)
        return True

    def observed(self) -> list[InputPart]:
        return [p for i in self.items if isinstance(i, Observation) for p in i.parts]


def test_the_daemon_builds_the_source_and_gets_observations_and_health(
    kuberay: Emulator, tmp_path: Path
) -> None:
    rayjob = o.seed_rayjob()
    kuberay.create(rayjob)
    kuberay.create(pod("pod-b", EVICTED))
    settings = Settings.model_validate(
        {
            "sources": {
                "kubernetes": {
                    "enabled": True,
                    "kubeconfig": str(kubeconfig(tmp_path, kuberay)),
                    "context": "kmock",
                    "namespaces": [o.NS],
                    "resources": ["pods", "rayjobs"],
                }
            }
        }
    )
    sink = Recorder(full_for=2)  # the queue is full at first: the source waits, then puts
    [source, stuck] = build_sources(settings, sink)  # watching rayjobs: stuck ones too
    assert isinstance(source, KubernetesSource)
    assert stuck.name == "rayjob-stuck"
    assert source.name == "kubernetes"
    source.start()
    try:
        assert wait_until(source.synced, 5)
        assert sorted(source.status()["watches"]) == ["Pod@ml-train", "RayJob@ml-train"]
        wait_for(lambda: len(sink.observed()) >= 3, what="the observations")
        # KubeRay retries the failed RayJob and it runs: healthy again
        running = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "reason": None}
        patched = kuberay.api.patch(RAY_JOBS, o.NS, "verl-ppo-qwen", {"status": running})
        validate_kuberay(patched)
        wait_for(lambda: any(isinstance(i, Healthy) for i in sink.items), what="Healthy")
    finally:
        source.stop()
    observations = [i for i in sink.items if isinstance(i, Observation)]
    failed = next(
        ob
        for ob in observations
        if any(p.reason == "AppFailed" for p in ob.parts if isinstance(p, Signal))
    )
    assert failed.context.workload == ObjectRef("RayJob", "verl-ppo-qwen", o.NS)
    assert failed.context.namespace == o.NS
    assert any(isinstance(p, LogText) for p in failed.parts)  # its message, as driver log
    healthy = [i for i in sink.items if isinstance(i, Healthy)]
    assert [h.workload for h in healthy] == [ObjectRef("RayJob", "verl-ppo-qwen", o.NS)]
    assert source.status()["dropped"] == 0
