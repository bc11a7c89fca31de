"""Ray clusters found from RayCluster objects: kmock's emulator serves the RayClusters,
a loopback stand-in serves their dashboards (tests/support/ray_dashboards.py).

A RayCluster created gets a poller at the URL its head service gives; deleted, the poller
goes; a RayJob's cluster puts the RayJob on every signal; a configured cluster at the same
URL is polled once; a head that is still starting is not an outage; bookmarks are keyed by
namespace/name, so a restart reports nothing twice; the Ray executors find discovered
clusters by RayCluster name; without KubeRay, one log line and no crash.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kuberay.clusters import DIRECTORY_KEY, discovered_configs
from bot.adapters.kuberay.discovery import DiscoveryOptions, DiscoveryScope, RayDiscoverySource
from bot.adapters.kubernetes.api import RAY_CLUSTERS
from bot.adapters.kubernetes.source import KubernetesSource
from bot.adapters.ray.bookmarks import MemoryBookmarks, jobs_key
from bot.adapters.ray.client import RayClusterConfig
from bot.adapters.ray.executor_base import RayClusters
from bot.adapters.ray.source import RayClusterSource, RaySourceOptions
from bot.app.factories import build_sources, ray_executor
from bot.app.settings.sections import Settings
from bot.core.actions.params import StopJob
from bot.core.errors import ActionRefusedError
from bot.core.incidents.workloads import workload_keys, workload_refs
from bot.core.model import ObjectRef, Signal, SourceKind
from bot.daemon.feed import Observation
from tests.e2e.kubernetes.conftest import Emulator, kubeconfig, wait_for
from tests.support import kube_objects as o
from tests.support.daemon_process import wait_until
from tests.support.executors import look
from tests.support.ray_dashboards import Dashboards, failed_job, serve

pytestmark = pytest.mark.kube

FAST = DiscoveryOptions(backoff_initial=0.05, backoff_max=0.5, crd_recheck=0.1)


class Recorder:
    """The daemon's pipeline as a Sink: records what it is given."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._lock = threading.Lock()

    def submit(self, item: Any) -> bool:
        with self._lock:
            self.items.append(item)
        return True

    def observations(self) -> list[Observation]:
        with self._lock:
            return [i for i in self.items if isinstance(i, Observation)]

    def signals(self, source: SourceKind = SourceKind.RAY_JOB) -> list[Signal]:
        return [
            p
            for ob in self.observations()
            for p in ob.parts
            if isinstance(p, Signal) and p.source is source
        ]


@pytest.fixture
def dashboards() -> Iterator[Dashboards]:
    yield from serve()


def template(dashboards: Dashboards) -> str:
    """Each RayCluster's dashboard at /<namespace>/<service>/<port> of the stand-in."""
    return f"http://127.0.0.1:{dashboards.port}/{{namespace}}/{{service}}/{{port}}"


def cluster(name: str, namespace: str = o.NS, **status: Any) -> dict[str, Any]:
    obj = o.standalone_cluster(name, "gpu", {o.GPU_PRODUCT: o.A100})
    obj["metadata"]["namespace"] = namespace
    obj["status"] = {"state": "ready", **status}
    return obj


def discovery(
    emulator: Emulator,
    dashboards: Dashboards,
    sink: Recorder,
    bookmarks: MemoryBookmarks,
    *,
    namespaces: tuple[str, ...] = (o.NS,),
    configured: tuple[RayClusterConfig, ...] = (),
    url_template: str | None = None,
    ray_options: RaySourceOptions | None = None,
) -> RayDiscoverySource:
    scope = DiscoveryScope(
        namespaces=namespaces,
        url_template=url_template or template(dashboards),
        configured=configured,
    )
    return RayDiscoverySource(
        emulator.api, sink, bookmarks, scope=scope, ray_options=ray_options, options=FAST
    )


def settings_for(
    emulator: Emulator,
    tmp_path: Path,
    dashboards: Dashboards,
    *,
    resources: tuple[str, ...] = ("rayclusters",),
    enabled: bool | None = None,
    **extra: Any,
) -> Settings:
    return Settings.model_validate(
        {
            "sources": {
                "kubernetes": {
                    "enabled": True,
                    "kubeconfig": str(kubeconfig(tmp_path, emulator)),
                    "context": "kmock",
                    "namespaces": [o.NS],
                    "resources": list(resources),
                },
                "ray_discovery": {"url_template": template(dashboards), "enabled": enabled},
                **extra,
            },
            "actions": {"executors": {"ray.*": "ray"}},
        }
    )


def test_a_raycluster_gets_a_poller_at_its_dashboard_until_it_is_deleted(
    kuberay: Emulator, dashboards: Dashboards
) -> None:
    dashboards.add(f"{o.NS}/rc-a-head-svc/8265", failed_job("raysubmit_a1"))
    dashboards.add(f"{o.NS}/rc-b-head-svc/8265")
    kuberay.create(cluster("rc-a"))
    sink, marks = Recorder(), MemoryBookmarks()
    source = discovery(kuberay, dashboards, sink, marks)
    source.start()
    try:
        assert wait_until(source.synced, 5)
        url_a = dashboards.url(f"{o.NS}/rc-a-head-svc/8265")
        assert {n: c.url for n, c in source.clusters().items()} == {"ml-train.rc-a": url_a}
        assert source.healthy() is True

        source.poll()
        [signal] = sink.signals()
        assert signal.reason == "FAILED"
        assert signal.fields["submission_id"] == "raysubmit_a1"
        assert signal.fields["cluster"] == "ml-train.rc-a"
        assert signal.fields["namespace"] == o.NS
        assert signal.fields["ray_cluster"] == "rc-a"
        assert "rayjob" not in signal.fields
        assert workload_refs(signal)[0] == ObjectRef("RayCluster", "rc-a", o.NS)
        assert dashboards.hits(f"{o.NS}/rc-a-head-svc/8265") == 1
        assert marks.get(jobs_key("ml-train.rc-a"))  # keyed by namespace and name

        # created while watching: a poller appears; deleted: it goes, after a last poll
        kuberay.create(cluster("rc-b"))
        wait_for(lambda: "ml-train.rc-b" in source.clusters(), what="the rc-b poller")
        kuberay.api.delete(RAY_CLUSTERS, o.NS, "rc-a")
        wait_for(lambda: "ml-train.rc-a" not in source.clusters(), what="rc-a removed")
        assert list(source.clusters()) == ["ml-train.rc-b"]
        directory = json.loads(marks.get(DIRECTORY_KEY) or "{}")["clusters"]
        assert [e["ray_cluster"] for e in directory] == ["rc-b"]
        source.poll()  # rc-b, and rc-a one last time
        assert dashboards.hits(f"{o.NS}/rc-a-head-svc/8265") == 2
        assert dashboards.hits(f"{o.NS}/rc-b-head-svc/8265") == 1
        source.poll()
        assert dashboards.hits(f"{o.NS}/rc-a-head-svc/8265") == 2
        assert dashboards.hits(f"{o.NS}/rc-b-head-svc/8265") == 2
        assert len(sink.signals()) == 1  # reported once
        status = source.status()
        assert status["kuberay"] == "watching"
        assert list(status["clusters"]) == ["ml-train.rc-b"]
        assert status["clusters"]["ml-train.rc-b"]["raycluster"] == "ml-train/rc-b"
    finally:
        source.stop()


def test_a_rayjob_cluster_puts_its_rayjob_on_every_signal(
    kuberay: Emulator, dashboards: Dashboards
) -> None:
    rayjob = o.seed_rayjob()
    owned = o.cluster_of(rayjob)  # ownerReferences: the RayJob
    # KubeRay's report of its head service, with a dashboard port that is not 8265
    owned["status"]["head"] = {"serviceName": "verl-head", "podIP": "10.0.0.5"}
    owned["status"]["endpoints"] = {"dashboard": "8266", "client": "10001"}
    kuberay.create(rayjob)
    kuberay.create(owned)
    dashboards.add(f"{o.NS}/verl-head/8266", failed_job("verl-ppo-qwen-x7k2p"))
    sink = Recorder()
    source = discovery(kuberay, dashboards, sink, MemoryBookmarks())
    source.start()
    try:
        assert wait_until(source.synced, 5)
        name = f"{o.NS}.{owned['metadata']['name']}"
        config = source.clusters()[name]
        assert config.url == dashboards.url(f"{o.NS}/verl-head/8266")
        assert (config.k8s_namespace, config.rayjob) == (o.NS, "verl-ppo-qwen")
        source.poll()
    finally:
        source.stop()
    [observation] = sink.observations()
    assert observation.context.namespace == o.NS
    [signal] = sink.signals()
    assert signal.fields["rayjob"] == "verl-ppo-qwen"
    assert signal.fields["ray_cluster"] == owned["metadata"]["name"]
    assert workload_refs(signal)[0] == ObjectRef("RayJob", "verl-ppo-qwen", o.NS)
    assert workload_keys(signal)[0] == f"{name}/{o.NS}/RayJob/verl-ppo-qwen"


def test_a_configured_cluster_at_the_same_url_is_polled_once_and_executors_find_it(
    kuberay: Emulator, dashboards: Dashboards, tmp_path: Path
) -> None:
    kuberay.create(cluster("rc-a"))
    url = dashboards.url(f"{o.NS}/rc-a-head-svc/8265")
    dashboards.add(f"{o.NS}/rc-a-head-svc/8265", failed_job("raysubmit_a1"))
    # the same dashboard, written differently (a trailing slash)
    settings = settings_for(
        kuberay, tmp_path, dashboards, ray=[{"name": "prod", "address": url + "/"}]
    )
    sink, marks = Recorder(), MemoryBookmarks()
    sources = build_sources(settings, sink, marks)  # as the daemon does
    kinds = sorted(type(s).__name__ for s in sources)
    assert kinds == ["KubernetesSource", "RayClusterSource", "RayDiscoverySource"]
    [prod] = [s for s in sources if isinstance(s, RayClusterSource)]
    [found] = [s for s in sources if isinstance(s, RayDiscoverySource)]
    [kube] = [s for s in sources if isinstance(s, KubernetesSource)]
    assert found.poll_interval == timedelta(seconds=10)
    found.start()
    kube.start()
    try:
        assert wait_until(found.synced, 5)
        assert found.clusters() == {}
        assert found.status()["shadowed"] == {
            "ml-train/rc-a": "polled as the configured cluster prod"
        }
        prod.poll()
        found.poll()
        assert len(sink.signals()) == 1  # once, by `prod`
        assert dashboards.hits(f"{o.NS}/rc-a-head-svc/8265") == 1

        # the executors (built with the same bookmarks) find it by its RayCluster name
        executor = ray_executor(settings, marks)
        stop = executor["ray.stop_job"]
        resolved = stop.clusters.config("rc-a")
        assert (resolved.name, resolved.k8s_namespace, resolved.ray_cluster) == (
            "prod",
            o.NS,
            "rc-a",
        )
        facts, preview = look(stop, StopJob(submission_id="raysubmit_a1", cluster="rc-a"))
        assert facts == {"ray.job_running": False, "ray.job_terminal": True}
        assert preview.startswith("[prod] nothing to stop: Ray job raysubmit_a1 (FAILED")
    finally:
        kube.stop()
        found.stop()
        prod.stop()


def test_executors_find_discovered_clusters_by_raycluster_name(
    kuberay: Emulator, dashboards: Dashboards, tmp_path: Path
) -> None:
    other = "ml-eval"
    for namespace, name in ((o.NS, "rc-a"), (o.NS, "shared"), (other, "shared")):
        kuberay.create(cluster(name, namespace))
        dashboards.add(f"{namespace}/{name}-head-svc/8265", failed_job(f"raysubmit_{name}"))
    settings = settings_for(kuberay, tmp_path, dashboards)
    marks = MemoryBookmarks()
    executor = ray_executor(settings, marks)
    clusters: RayClusters = executor["ray.stop_job"].clusters
    with pytest.raises(ActionRefusedError, match="'rc-a' is configured or discovered"):
        clusters.config("rc-a")  # nothing discovered yet

    source = discovery(kuberay, dashboards, Recorder(), marks, namespaces=())
    source.start()
    try:
        assert wait_until(source.synced, 5)
        assert sorted(source.clusters()) == ["ml-eval.shared", "ml-train.rc-a", "ml-train.shared"]
        assert clusters.config("rc-a").name == "ml-train.rc-a"
        assert clusters.config("ml-train.rc-a").url == dashboards.url(f"{o.NS}/rc-a-head-svc/8265")
        with pytest.raises(ActionRefusedError, match=r"ambiguous.*ml-eval, ml-train"):
            clusters.config("shared")
        assert clusters.config("ml-eval/shared").name == "ml-eval.shared"
        with pytest.raises(
            ActionRefusedError, match="names no Ray cluster and 3 are configured or discovered"
        ):
            clusters.config("")
        stop = executor["ray.stop_job"]
        _, preview = look(stop, StopJob(submission_id="raysubmit_rc-a", cluster="rc-a"))
        assert preview.startswith("[ml-train.rc-a] nothing to stop")

        kuberay.api.delete(RAY_CLUSTERS, other, "shared")
        wait_for(lambda: "ml-eval.shared" not in source.clusters(), what="ml-eval/shared gone")
        assert clusters.config("shared").name == "ml-train.shared"
    finally:
        source.stop()
    assert [c.name for c in discovered_configs(marks)] == ["ml-train.rc-a", "ml-train.shared"]


def test_a_restart_reports_a_failure_once_even_for_a_recreated_raycluster(
    kuberay: Emulator, dashboards: Dashboards
) -> None:
    prefix = f"{o.NS}/rc-a-head-svc/8265"
    dashboards.add(prefix, failed_job("raysubmit_a1"))
    kuberay.create(cluster("rc-a"))
    sink, marks = Recorder(), MemoryBookmarks()
    first = discovery(kuberay, dashboards, sink, marks)
    first.start()
    try:
        assert wait_until(first.synced, 5)
        first.poll()
    finally:
        first.stop()
    assert len(sink.signals()) == 1

    # pitcrew is down; the RayCluster is deleted and created again (a new uid), and
    # another job fails on it
    kuberay.api.delete(RAY_CLUSTERS, o.NS, "rc-a")
    recreated = cluster("rc-a")
    recreated["metadata"]["uid"] = "uid-rc-a-2"
    kuberay.create(recreated)
    dashboards.add(prefix, failed_job("raysubmit_a2"))
    second = discovery(kuberay, dashboards, sink, marks)
    second.start()
    try:
        assert wait_until(second.synced, 5)
        second.poll()
        second.poll()
    finally:
        second.stop()
    ids = [s.fields["submission_id"] for s in sink.signals()]
    assert ids == ["raysubmit_a1", "raysubmit_a2"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_head_still_starting_is_not_an_outage_until_kubernetes_says_it_is_up(
    kuberay: Emulator, dashboards: Dashboards
) -> None:
    starting = cluster("rc-new")
    starting["status"] = {}  # just created: no head yet
    kuberay.create(starting)
    sink = Recorder()
    options = RaySourceOptions(
        backoff_base=timedelta(hours=1), down_after=timedelta(0), initial_lookback=timedelta(0)
    )
    source = discovery(
        kuberay,
        dashboards,
        sink,
        MemoryBookmarks(),
        url_template=f"http://127.0.0.1:{_closed_port()}/{{namespace}}/{{name}}",
        ray_options=options,
    )
    source.start()
    try:
        assert wait_until(source.synced, 5)
        name = "ml-train.rc-new"
        source.poll()
        source.poll()  # backing off (an hour): not tried again
        status = source.status()["clusters"][name]
        assert (status["starting"], status["healthy"], status["failures"]) == (True, False, 1)
        assert sink.signals(SourceKind.RAY_CLUSTER) == []  # not reported down

        ready = {"state": "ready", "head": {"podIP": "10.0.0.9"}}
        kuberay.api.patch(RAY_CLUSTERS, o.NS, "rc-new", {"status": ready})
        wait_for(
            lambda: not source.status()["clusters"][name]["starting"], what="the head is ready"
        )
        source.poll()  # tried at once, whatever the backoff
        assert source.status()["clusters"][name]["failures"] == 2
        [down] = sink.signals(SourceKind.RAY_CLUSTER)
        assert down.reason == "DashboardUnreachable"
        assert down.obj == ObjectRef("RayCluster", "rc-new", o.NS)
        assert source.healthy() is True  # an unreachable dashboard is not the source failing
    finally:
        source.stop()


def test_a_suspended_or_deleting_raycluster_has_no_poller(
    kuberay: Emulator, dashboards: Dashboards
) -> None:
    kuberay.create(cluster("rc-a"))
    source = discovery(kuberay, dashboards, Recorder(), MemoryBookmarks())
    source.start()
    try:
        assert wait_until(source.synced, 5)
        assert list(source.clusters()) == ["ml-train.rc-a"]
        kuberay.api.patch(RAY_CLUSTERS, o.NS, "rc-a", {"spec": {"suspend": True}})
        wait_for(lambda: not source.clusters(), what="the suspended cluster's poller gone")
        kuberay.api.patch(RAY_CLUSTERS, o.NS, "rc-a", {"spec": {"suspend": False}})
        wait_for(lambda: source.clusters(), what="resumed: polled again")
        deleting = {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}
        kuberay.api.patch(RAY_CLUSTERS, o.NS, "rc-a", deleting)
        wait_for(lambda: not source.clusters(), what="the deleting cluster's poller gone")
    finally:
        source.stop()


def test_without_kuberay_one_log_line_and_no_crash(
    emulator: Emulator, dashboards: Dashboards, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.adapters.kuberay.discovery")
    source = discovery(emulator, dashboards, Recorder(), MemoryBookmarks())
    source.start()
    try:
        assert wait_until(source.synced, 5)
        wait_for(lambda: source.status()["watches"]["RayCluster@ml-train"]["state"] == "absent")
        threading.Event().wait(0.5)  # several more looks (crd_recheck is 0.1s here)
        assert source.healthy() is True
        assert source.status()["kuberay"].startswith("absent")
        source.poll()
        absent = [r for r in caplog.records if "KubeRay CRDs are not installed" in r.message]
        assert len(absent) == 1
        assert absent[0].levelno == logging.WARNING
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]

        # KubeRay installed later: found at the next look
        emulator.install_kuberay()
        emulator.create(cluster("rc-a"))
        wait_for(lambda: source.clusters(), timeout=5, what="discovery once KubeRay is there")
        assert source.status()["kuberay"] == "watching"
    finally:
        source.stop()


def test_discovery_is_off_when_told_or_when_rayclusters_are_not_watched(
    kuberay: Emulator, dashboards: Dashboards, tmp_path: Path
) -> None:
    cases = [
        ({}, True),
        ({"enabled": False}, False),
        ({"resources": ("pods",)}, False),
        ({"resources": ("pods",), "enabled": True}, True),
    ]
    for overrides, expected in cases:
        settings = settings_for(kuberay, tmp_path, dashboards, **overrides)
        assert settings.sources.discovers_ray_clusters() is expected
        built = build_sources(settings, Recorder(), MemoryBookmarks())
        assert any(isinstance(s, RayDiscoverySource) for s in built) is expected
        assert any(isinstance(s, KubernetesSource) for s in built)
