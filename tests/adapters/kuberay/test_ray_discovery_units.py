"""Where a RayCluster's dashboard is, which RayClusters get a poller, and the settings that
turn discovery on: pure functions, no API server (tests/e2e/kubernetes/test_ray_discovery.py runs
discovery against kmock's emulator)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bot.adapters.kuberay.clusters import (
    DIRECTORY_KEY,
    DiscoveredCluster,
    dashboard_port,
    directory_text,
    discover,
    discovered_configs,
    head_ready,
    head_service,
    kuberay_name,
    owning_rayjob,
    plan,
    same_url,
)
from bot.adapters.ray.bookmarks import MemoryBookmarks
from bot.adapters.ray.client import RayClusterConfig
from bot.adapters.ray.executor_base import RayClusters
from bot.app.settings.loading import ConfigError, load
from bot.app.settings.sections import Settings
from bot.core.errors import ActionRefusedError

BASE: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "rc", "namespace": "ml", "uid": "u1"},
    "spec": {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}},
        }
    },
}


def rc(**changes: Any) -> dict[str, Any]:
    """BASE with nested changes: `rc(status={...})`, `rc(spec__headGroupSpec__serviceType=…)`."""
    obj = copy.deepcopy(BASE)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = obj
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return obj


def test_the_head_service_is_reported_else_named_else_kuberays_default() -> None:
    assert head_service(rc()) == "rc-head-svc"
    named = rc(spec__headGroupSpec__headService={"metadata": {"name": "custom"}})
    assert head_service(named) == "custom"
    reported = rc(status={"head": {"serviceName": "reported-svc"}})
    assert head_service(reported) == "reported-svc"
    # KubeRay's CheckName: the last 50 characters, not starting with a digit or a dash
    for cut_at in ("7", "-"):
        name = "a" * 15 + cut_at + "b" * 40
        expected = "r" + "b" * 40 + "-head-svc"
        assert head_service(rc(metadata={"name": name, "namespace": "ml"})) == expected
    assert kuberay_name("x" * 60) == "x" * 50
    assert kuberay_name("7abc") == "rabc"


@pytest.mark.parametrize(
    ("changes", "port"),
    [
        ({}, 8265),
        ({"status": {"endpoints": {"dashboard": "8266"}}}, 8266),
        # a NodePort service: KubeRay reports the node port, not the service's port
        (
            {
                "status": {"endpoints": {"dashboard": "30265"}},
                "spec__headGroupSpec__serviceType": "NodePort",
            },
            8265,
        ),
        (
            {
                "spec__headGroupSpec__template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "ray-head",
                                "ports": [{"name": "dashboard", "containerPort": 9000}],
                            }
                        ]
                    }
                }
            },
            9000,
        ),
        (
            {
                "spec__headGroupSpec__headService": {
                    "spec": {"ports": [{"name": "dashboard", "port": 80, "targetPort": 8265}]}
                },
                "status": {"endpoints": {"dashboard": "8265"}},
            },
            80,
        ),
        ({"status": {"endpoints": {"dashboard": "not-a-port"}}}, 8265),
    ],
)
def test_the_dashboard_port_is_the_head_services(changes: dict[str, Any], port: int) -> None:
    assert dashboard_port(rc(**changes)) == port


def test_the_owning_rayjob_comes_from_owner_references_else_kuberays_labels() -> None:
    owner = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train", "uid": "j1"}
    assert owning_rayjob(rc(metadata={"name": "rc", "ownerReferences": [owner]})) == "train"
    labels = {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "eval"}
    assert owning_rayjob(rc(metadata={"name": "rc", "labels": labels})) == "eval"
    service = {**owner, "kind": "RayService", "name": "serve"}
    assert owning_rayjob(rc(metadata={"name": "rc", "ownerReferences": [service]})) == ""


def test_the_head_is_ready_by_condition_or_state() -> None:
    assert head_ready(rc()) is False
    assert head_ready(rc(status={"state": "ready"})) is True
    condition = {"type": "HeadPodReady", "status": "False"}
    assert head_ready(rc(status={"state": "ready", "conditions": [condition]})) is False
    assert head_ready(rc(status={"conditions": [{**condition, "status": "True"}]})) is True


def test_discover_renders_the_url_template_and_skips_what_has_no_dashboard() -> None:
    found = discover(rc(status={"state": "ready", "head": {"podIP": "10.1.2.3"}}))
    assert found == DiscoveredCluster(
        namespace="ml",
        name="rc",
        url="http://rc-head-svc.ml.svc:8265",
        service="rc-head-svc",
        port=8265,
        head_ready=True,
        head="10.1.2.3",
    )
    assert found.cluster_name == "ml.rc"
    proxied = discover(rc(), "https://ray.example.com/{namespace}/{name}/")
    assert proxied is not None
    assert proxied.url == "https://ray.example.com/ml/rc"
    assert discover(rc(spec__suspend=True)) is None
    assert discover(rc(status={"state": "suspended"})) is None
    deleting = rc(
        metadata={"name": "rc", "namespace": "ml", "deletionTimestamp": "2026-01-01T00:00:00Z"}
    )
    assert discover(deleting) is None
    assert discover(rc(metadata={"name": "rc"})) is None  # no namespace
    assert discover(rc(), "{service}:{port}") is None  # not an http(s) URL


def test_urls_are_the_same_up_to_case_default_ports_and_trailing_slashes() -> None:
    assert same_url("HTTP://Head.ML.svc/") == same_url("http://head.ml.svc:80")
    assert same_url("https://ray.example.com/ml/rc/") == same_url(
        "https://RAY.example.com:443/ml/rc"
    )
    assert same_url("http://head:8265") != same_url("http://head:8266")
    assert same_url("http://head/a") != same_url("http://head/b")


def found(namespace: str, name: str, url: str, rayjob: str = "") -> DiscoveredCluster:
    return DiscoveredCluster(namespace, name, url, f"{name}-head-svc", 8265, rayjob)


def test_plan_polls_each_url_once_and_configured_clusters_win() -> None:
    configured = [RayClusterConfig("prod", "http://rc-a.ml.svc:8265/")]
    items = [
        found("ml", "rc-a", "HTTP://rc-a.ml.svc:8265"),
        found("ml", "rc-b", "http://shared:8265", "job-b"),
        found("aa", "rc-c", "http://shared:8265/"),
        found("ml", "prod", "http://other:8265"),
    ]
    result = plan(items, configured, {"Authorization": "Bearer t"})
    assert sorted(result.pollers) == ["aa.rc-c", "ml.prod"]
    config, _ = result.pollers["aa.rc-c"]
    assert config.headers == {"Authorization": "Bearer t"}
    assert (config.k8s_namespace, config.ray_cluster, config.rayjob) == ("aa", "rc-c", "")
    assert result.shadowed == {
        "ml/rc-a": "polled as the configured cluster prod",
        "ml/rc-b": "same dashboard URL as aa.rc-c",
    }
    by_raycluster = {(e["namespace"], e["ray_cluster"]): e["cluster"] for e in result.directory}
    assert by_raycluster == {
        ("aa", "rc-c"): "aa.rc-c",
        ("ml", "prod"): "ml.prod",
        ("ml", "rc-a"): "prod",
        ("ml", "rc-b"): "aa.rc-c",
    }
    clashing = plan([found("ml", "rc", "http://x:1")], [RayClusterConfig("ml.rc", "http://y:2")])
    assert clashing.pollers == {}
    assert "a configured cluster is named ml.rc" in clashing.shadowed["ml/rc"]


def test_executors_read_the_live_set_from_the_bookmarks() -> None:
    marks = MemoryBookmarks()
    clusters = RayClusters(
        [RayClusterConfig("prod", "http://prod:8265", ray_cluster="rc-prod")],
        discovered=lambda: discovered_configs(marks, {}),
    )
    assert clusters.config("rc-prod").name == "prod"
    with pytest.raises(
        ActionRefusedError, match="no Ray cluster 'rc-a' is configured or discovered"
    ):
        clusters.config("rc-a")
    result = plan([found("ml", "rc-a", "http://a:8265", "train")], [])
    marks.set(DIRECTORY_KEY, directory_text(result.directory))
    config = clusters.config("rc-a")
    assert (config.name, config.url, config.rayjob) == ("ml.rc-a", "http://a:8265", "train")
    assert clusters.config("ml/rc-a") == config
    assert clusters.config("ml.rc-a") == config
    with pytest.raises(
        ActionRefusedError, match="names no Ray cluster and 2 are configured or discovered"
    ):
        clusters.config("")
    marks.set(DIRECTORY_KEY, "not json")
    assert discovered_configs(marks) == []
    assert RayClusters([RayClusterConfig("prod", "http://prod:8265")]).config("").name == "prod"


def test_discovery_follows_the_kubernetes_source_unless_told(tmp_path: Any) -> None:
    def sources(text: str) -> Any:
        path = tmp_path / "pitcrew.yaml"
        path.write_text(text)
        return load(path, {}).sources

    assert not Settings().sources.discovers_ray_clusters()
    assert sources("sources: {kubernetes: {enabled: true}}\n").discovers_ray_clusters()
    kube_pods = "sources:\n  kubernetes: {enabled: true, resources: [pods]}\n"
    assert not sources(kube_pods).discovers_ray_clusters()
    forced = kube_pods + "  ray_discovery: {enabled: true}\n"
    assert sources(forced).discovers_ray_clusters()
    off = "sources:\n  kubernetes: {enabled: true}\n  ray_discovery: {enabled: false}\n"
    assert not sources(off).discovers_ray_clusters()
    custom = "sources:\n  kubernetes: {enabled: true}\n  ray_discovery: {poll_interval: 30s}\n"
    assert sources(custom).ray_discovery.poll_interval.total_seconds() == 30


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "sources:\n  ray_discovery: {enabled: true}\n",
            "discovering RayClusters needs sources.kubernetes.enabled",
        ),
        (
            "sources:\n  ray_discovery: {url_template: 'http://{svc}:8265'}\n",
            "unknown placeholder {svc}",
        ),
        (
            "sources:\n  ray_discovery: {url_template: '{service}.{namespace}:{port}'}\n",
            "does not make an http(s) URL",
        ),
    ],
)
def test_discovery_settings_are_checked(tmp_path: Any, text: str, problem: str) -> None:
    path = tmp_path / "pitcrew.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        load(path, {})
