"""Where a group's pod template lives in an object, and the JSON-patch ops that change it.

Why this exists: every Kubernetes action patches a pod template inside a RayCluster,
a RayJob's `rayClusterSpec`, a Deployment, StatefulSet or Job. Finding the group and
container (`locate`) and planning ops whose `test` operations pin every value the
preview showed is pure work on the object as a value: no API calls here, so the plans
are tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.adapters.kubernetes.api import BY_KIND, Resource
from bot.core.inputs.values import as_list, as_map, text_at

PROPOSAL_ANNOTATION = "pitcrew.io/last-proposal"
RERUN_ANNOTATION = "pitcrew.io/rerun-by"  # on a RayJob deleted to be created again


@dataclass(frozen=True)
class Site:
    """One container of one pod template inside an object, with the paths to it."""

    kind: str
    namespace: str
    name: str
    obj: Mapping[str, Any]
    pod_spec_path: str  # JSON pointer to the template's pod spec
    label: str  # human path: `workerGroupSpecs[gpu-group]`
    container_index: int
    container_name: str
    guards: tuple[dict[str, Any], ...]  # test ops pinning the group and container

    @property
    def resource(self) -> Resource:
        return BY_KIND[self.kind]

    @property
    def pod_spec(self) -> Mapping[str, Any]:
        return as_map(resolve(self.obj, self.pod_spec_path))

    @property
    def container(self) -> Mapping[str, Any]:
        containers = as_list(self.pod_spec.get("containers"))
        return as_map(containers[self.container_index]) if containers else {}

    @property
    def container_path(self) -> str:
        return f"{self.pod_spec_path}/containers/{self.container_index}"

    @property
    def container_label(self) -> str:
        return f"{self.label}.containers[{self.container_name}]"

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


def locate(kind: str, obj: Mapping[str, Any], group: str, container: str = "") -> Site | None:
    """The site of `group` (a worker group name, `head`, or "" for a plain workload) and
    `container` (name; "" = the first, which KubeRay treats as the Ray container)."""
    metadata = as_map(obj.get("metadata"))
    namespace, name = text_at(metadata, "namespace"), text_at(metadata, "name")
    guards: list[dict[str, Any]] = []
    if kind in ("RayCluster", "RayJob"):
        base = "/spec" if kind == "RayCluster" else "/spec/rayClusterSpec"
        prefix = "" if kind == "RayCluster" else "rayClusterSpec."
        cluster_spec = as_map(resolve(obj, base))
        if group == "head":
            path, label = f"{base}/headGroupSpec/template/spec", f"{prefix}headGroupSpec"
        else:
            groups = as_list(cluster_spec.get("workerGroupSpecs"))
            index = next(
                (i for i, g in enumerate(groups) if text_at(g, "groupName") == group), None
            )
            if index is None:
                return None
            path = f"{base}/workerGroupSpecs/{index}/template/spec"
            label = f"{prefix}workerGroupSpecs[{group}]"
            guards.append(test_op(f"{base}/workerGroupSpecs/{index}/groupName", group))
    else:
        path, label = "/spec/template/spec", "spec.template"
    pod_spec = as_map(resolve(obj, path))
    containers = [as_map(c) for c in as_list(pod_spec.get("containers"))]
    if not containers:
        return None
    if container:
        index = next((i for i, c in enumerate(containers) if text_at(c, "name") == container), -1)
        if index < 0:
            return None
    else:
        index = 0
    container_name = text_at(containers[index], "name")
    guards.append(test_op(f"{path}/containers/{index}/name", container_name))
    return Site(
        kind, namespace, name, obj, path, label, index, container_name or str(index), tuple(guards)
    )


def escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def resolve(obj: Any, pointer: str) -> Any:
    value = obj
    for raw in pointer.strip("/").split("/") if pointer.strip("/") else []:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, Mapping):
            value = value.get(key)
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return None
    return value


def test_op(path: str, value: Any) -> dict[str, Any]:
    return {"op": "test", "path": path, "value": value}


def set_ops(obj: Mapping[str, Any], path: str, value: Any) -> list[dict[str, Any]]:
    """Ops that set `path` to `value`, creating missing parent mappings, pinning the old
    value with a test when there is one."""
    current = resolve(obj, path)
    if current is not None:
        return [test_op(path, current), {"op": "replace", "path": path, "value": value}]
    parent, _, last = path.rpartition("/")
    if parent and resolve(obj, parent) is None:
        return set_ops(obj, parent, _nest(last, value))
    return [{"op": "add", "path": path, "value": value}]


def _nest(escaped_key: str, value: Any) -> dict[str, Any]:
    return {escaped_key.replace("~1", "/").replace("~0", "~"): value}


def annotation_ops(obj: Mapping[str, Any], key: str, value: str) -> list[dict[str, Any]]:
    annotations = resolve(obj, "/metadata/annotations")
    if not isinstance(annotations, Mapping):
        return [{"op": "add", "path": "/metadata/annotations", "value": {key: value}}]
    return [{"op": "add", "path": f"/metadata/annotations/{escape(key)}", "value": value}]


def replicas_of(site: Site) -> int:
    """How many pods run with the site's template (what a quota is charged for)."""
    if site.kind in ("RayCluster", "RayJob"):
        if site.label.endswith("headGroupSpec"):
            return 1
        group = as_map(resolve(site.obj, site.pod_spec_path.rsplit("/template/spec", 1)[0]))
        for key in ("replicas", "minReplicas"):
            value = group.get(key)
            if isinstance(value, int) and value >= 0:
                return max(value, 1)
        return 1
    spec = as_map(site.obj.get("spec"))
    value = spec.get("parallelism" if site.kind == "Job" else "replicas")
    return value if isinstance(value, int) and value > 0 else 1


def group_of(site: Site) -> str:
    if site.label.endswith("headGroupSpec"):
        return "head"
    if "[" in site.label:
        return site.label.rsplit("[", 1)[1].rstrip("]")
    return ""


def proposal_of(obj: Mapping[str, Any]) -> str:
    return text_at(obj, "metadata", "annotations", PROPOSAL_ANNOTATION)
