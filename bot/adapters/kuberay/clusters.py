"""Where a KubeRay RayCluster's dashboard is, and which clusters discovery polls (pure).

Why this exists: discovery (`bot.adapters.kuberay.discovery`) turns RayCluster objects
into Ray pollers; reading an object's head service, dashboard port and owning RayJob,
choosing the pollers (configured clusters first, one poller per URL) and the directory
the executors read are judgements on values, tested without an API server. The rules
are those the discovery module's docstring lists.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from bot.adapters.ray.client import RayClusterConfig, headers_from_env
from bot.core.inputs.values import as_list, as_map, as_text, text_at
from bot.daemon.ports import Bookmarks

log = logging.getLogger("bot.adapters.kuberay.discovery")

DEFAULT_TEMPLATE = "http://{service}.{namespace}.svc:{port}"
DASHBOARD_PORT = 8265
DIRECTORY_KEY = "ray-discovery/clusters"
"""The bookmark holding the discovered clusters, for the executors (JSON)."""
_KUBERAY_MAX_NAME = 50  # KubeRay's CheckName: generated names keep their last 50 characters
_RAYJOB_LABEL_KIND = "ray.io/originated-from-crd"
_RAYJOB_LABEL_NAME = "ray.io/originated-from-cr-name"


# -- where a RayCluster's dashboard is (pure) ----------------------------------------------


@dataclass(frozen=True)
class DiscoveredCluster:
    """One RayCluster as discovery sees it: where its dashboard is and what owns it."""

    namespace: str
    name: str
    url: str
    service: str
    port: int
    rayjob: str = ""
    head_ready: bool = False
    head: str = ""
    """The head pod Kubernetes reports (IP, else name); "" before there is one."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def cluster_name(self) -> str:
        """pitcrew's name for it (signals' `cluster`, bookmark keys): `<namespace>.<name>`."""
        return cluster_name(self.namespace, self.name)


def cluster_name(namespace: str, name: str) -> str:
    # Not `/`: a cluster name is the first part of an incident's `cluster/ns/Kind/name`.
    return f"{namespace}.{name}"


def kuberay_name(text: str) -> str:
    """KubeRay's `CheckName`: at most the last 50 characters, never starting with a digit
    or punctuation (how it names a RayCluster's head service)."""
    if len(text) > _KUBERAY_MAX_NAME:
        text = text[len(text) - _KUBERAY_MAX_NAME :]
    if text and (text[0].isdigit() or not text[0].isalnum()):
        text = "r" + text[1:]
    return text


def head_service(obj: Mapping[str, Any]) -> str:
    """The head service's name: reported by KubeRay, else set in the spec, else generated."""
    reported = text_at(obj, "status", "head", "serviceName")
    if reported:
        return reported
    named = text_at(obj, "spec", "headGroupSpec", "headService", "metadata", "name")
    if named:
        return named
    return kuberay_name(f"{text_at(obj, 'metadata', 'name')}-head-svc")


def dashboard_port(obj: Mapping[str, Any]) -> int:
    """The head service's `dashboard` port (see the module docstring), else 8265."""
    head = as_map(as_map(obj.get("spec")).get("headGroupSpec"))
    service_spec = as_map(as_map(head.get("headService")).get("spec"))
    for port in as_list(service_spec.get("ports")):
        if text_at(port, "name") == "dashboard" and _port(as_map(port).get("port")):
            return _port(as_map(port).get("port"))
    service_type = text_at(head, "serviceType") or text_at(service_spec, "type")
    # KubeRay reports a NodePort service's node port here, not the service's own port.
    if service_type in ("", "ClusterIP"):
        reported = _port(as_map(as_map(obj.get("status")).get("endpoints")).get("dashboard"))
        if reported:
            return reported
    containers = as_list(as_map(as_map(head.get("template")).get("spec")).get("containers"))
    ray_container = as_map(containers[0]) if containers else {}  # KubeRay: Ray runs in the first
    for port in as_list(ray_container.get("ports")):
        if text_at(port, "name") == "dashboard" and _port(as_map(port).get("containerPort")):
            return _port(as_map(port).get("containerPort"))
    return DASHBOARD_PORT


def owning_rayjob(obj: Mapping[str, Any]) -> str:
    """The RayJob that made this RayCluster: its owner reference, else KubeRay's labels."""
    metadata = as_map(obj.get("metadata"))
    for owner in as_list(metadata.get("ownerReferences")):
        if text_at(owner, "kind") == "RayJob" and text_at(owner, "apiVersion").startswith(
            "ray.io/"
        ):
            return text_at(owner, "name")
    labels = as_map(metadata.get("labels"))
    if as_text(labels.get(_RAYJOB_LABEL_KIND)) == "RayJob":
        return as_text(labels.get(_RAYJOB_LABEL_NAME))
    return ""


def head_ready(obj: Mapping[str, Any]) -> bool:
    """KubeRay reports the head ready: condition HeadPodReady, or state `ready`."""
    status = as_map(obj.get("status"))
    for condition in as_list(status.get("conditions")):
        if text_at(condition, "type") == "HeadPodReady":
            return text_at(condition, "status") == "True"
    return text_at(status, "state").lower() == "ready"


def polled(obj: Mapping[str, Any]) -> bool:
    """Whether a RayCluster has a dashboard to poll: not being deleted, not suspended."""
    if text_at(obj, "metadata", "deletionTimestamp"):
        return False
    if as_map(obj.get("spec")).get("suspend") is True:
        return False
    return text_at(obj, "status", "state").lower() != "suspended"


def discover(obj: Mapping[str, Any], template: str = DEFAULT_TEMPLATE) -> DiscoveredCluster | None:
    """Where a RayCluster's dashboard is; None when it has none to poll or no usable name."""
    namespace = text_at(obj, "metadata", "namespace")
    name = text_at(obj, "metadata", "name")
    if not namespace or not name or not polled(obj):
        return None
    service = head_service(obj)
    port = dashboard_port(obj)
    try:
        url = template.format(service=service, namespace=namespace, port=port, name=name)
        RayClusterConfig(cluster_name(namespace, name), url)  # an http(s) URL
    except (KeyError, IndexError, ValueError) as error:
        log.warning(
            "RayCluster %s/%s: no dashboard URL from %r: %s", namespace, name, template, error
        )
        return None
    status = as_map(obj.get("status"))
    return DiscoveredCluster(
        namespace=namespace,
        name=name,
        url=url.rstrip("/"),
        service=service,
        port=port,
        rayjob=owning_rayjob(obj),
        head_ready=head_ready(obj),
        head=text_at(status, "head", "podIP") or text_at(status, "head", "podName"),
    )


def same_url(url: str) -> str:
    """A URL's identity for "same cluster": scheme, host and port (defaults filled in,
    case folded) and path without its trailing slash."""
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        return url.strip().rstrip("/")
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}{parts.path.rstrip('/')}"


def _port(value: Any) -> int:
    text = as_text(value)
    if not text.isdigit():
        return 0
    number = int(text)
    return number if 0 < number < 65536 else 0


# -- which pollers (pure) -----------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What the discovered RayClusters come to: a poller per distinct URL, and for every
    RayCluster the cluster that serves it (for the executors)."""

    pollers: Mapping[str, tuple[RayClusterConfig, DiscoveredCluster]]
    directory: tuple[Mapping[str, str], ...]
    shadowed: Mapping[str, str]
    """RayClusters without a poller of their own: namespace/name -> why."""


def plan(
    found: Iterable[DiscoveredCluster],
    configured: Sequence[RayClusterConfig],
    headers: Mapping[str, str] | None = None,
    k8s_cluster: str = "",
) -> Plan:
    """Configured clusters win their URL; among RayClusters the first by namespace/name."""
    by_url = {same_url(c.url): c for c in configured}
    configured_names = {c.name for c in configured}
    served: dict[str, str] = {}  # same_url -> discovered cluster name
    pollers: dict[str, tuple[RayClusterConfig, DiscoveredCluster]] = {}
    directory: list[Mapping[str, str]] = []
    shadowed: dict[str, str] = {}
    for item in sorted(found, key=lambda d: (d.namespace, d.name)):
        identity = same_url(item.url)
        mine = {"namespace": item.namespace, "ray_cluster": item.name, "rayjob": item.rayjob}
        if identity in by_url:
            config = by_url[identity]
            shadowed[item.key] = f"polled as the configured cluster {config.name}"
            directory.append({"cluster": config.name, "url": config.url, **mine})
            continue
        if identity in served:
            shadowed[item.key] = f"same dashboard URL as {served[identity]}"
            directory.append({"cluster": served[identity], "url": item.url, **mine})
            continue
        name = item.cluster_name
        if name in configured_names:
            shadowed[item.key] = f"a configured cluster is named {name} (another URL)"
            continue
        config = RayClusterConfig(
            name,
            item.url,
            headers or {},
            k8s_namespace=item.namespace,
            ray_cluster=item.name,
            rayjob=item.rayjob,
            k8s_cluster=k8s_cluster,
        )
        pollers[name] = (config, item)
        served[identity] = name
        directory.append({"cluster": name, "url": item.url, **mine})
    return Plan(pollers, tuple(directory), shadowed)


def directory_text(entries: Sequence[Mapping[str, str]]) -> str:
    return json.dumps({"v": 1, "clusters": [dict(e) for e in entries]}, sort_keys=True)


def discovered_configs(
    bookmarks: Bookmarks, headers: Mapping[str, str] | None = None
) -> list[RayClusterConfig]:
    """The discovered clusters as the discovery source last wrote them (one config per
    RayCluster, named as the poller that serves it), for the Ray executors."""
    text = bookmarks.get(DIRECTORY_KEY)
    if not text:
        return []
    try:
        entries = json.loads(text).get("clusters", [])
    except (ValueError, AttributeError):
        log.warning("ignoring an unreadable %s bookmark: %.80s", DIRECTORY_KEY, text)
        return []
    env = headers_from_env() if headers is None else headers
    configs = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        try:
            configs.append(
                RayClusterConfig(
                    str(entry["cluster"]),
                    str(entry["url"]),
                    env,
                    k8s_namespace=str(entry.get("namespace") or ""),
                    ray_cluster=str(entry.get("ray_cluster") or ""),
                    rayjob=str(entry.get("rayjob") or ""),
                )
            )
        except (KeyError, ValueError):
            continue
    return configs
