"""What an alert's labels say about the objects pitcrew knows: the namespace, pod,
container, node, Job, RayCluster, RayJob and GPU an alert is about.

Why this exists: an alert carries the labels of the series its rule matched, and
they follow each exporter's conventions, not pitcrew's. Read from the sources:

- kube-state-metrics names `namespace`, `pod`, `container`, `node`, `job_name`
  (kube_job_*), `deployment`, `statefulset`, `daemonset`, and a pod's own labels
  as `label_<name>` on kube_pod_labels (`label_ray_io_cluster`, once allowed by
  `--metric-labels-allowlist`); the kube-prometheus rules keep them
  (kubernetesControlPlane-prometheusRule.yaml, v0.18.0).
- A PodMonitor relabels a pod's labels as told: KubeRay's own
  (config/prometheus/podMonitor.yaml, v1.7.0) puts `ray.io/cluster` in
  `ray_io_cluster`; KubeRay labels every Ray pod `ray.io/cluster`, `ray.io/group`,
  `ray.io/node-type` (ray-operator/controllers/ray/common/pod.go, labelPod) and a
  RayJob's RayCluster `ray.io/originated-from-crd: RayJob` with
  `ray.io/originated-from-cr-name`.
- KubeRay's own metrics name their object `name`: kuberay_job_* a RayJob,
  kuberay_cluster_* a RayCluster (ray-operator/controllers/ray/metrics, v1.7.0);
  which one is read from the rule's expression.
- Prometheus renames a target label the series has too to `exported_<name>`
  (honor_labels: false): there `exported_pod` is the workload's pod and `pod` the
  exporter's own, so `exported_*` wins.
- NVIDIA's DCGM exporter (internal/pkg/rendermetrics/render_metrics.go,
  4.5.3-4.8.2) labels a GPU's series `gpu`, `UUID`, `pci_bus_id`, `device`,
  `modelName` and the node `Hostname` (`hostname` after that release; `gpu_uuid`,
  `model_name` on NVLink series), an Xid's code `err_code` and text `err_msg`
  (DCGM_FI_DEV_XID_ERRORS, since 3.3.5-3.4.0) or `xid` (DCGM_EXP_XID_ERRORS_COUNT),
  and the pod using the GPU `pod`, `namespace`, `container` when it maps pods; a
  GPU series with no user carries the exporter's own pod, which is not the GPU's.

Prometheus' scrape label `job` is never a Kubernetes Job, and `instance` is a node
only when it names no port (kube-prometheus relabels node-exporter's so). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.core.model import ObjectRef

RAYJOB_CRD = "RayJob"  # KubeRay's ray.io/originated-from-crd value for a RayJob's RayCluster
_GPU_LABELS = ("UUID", "uuid", "gpu_uuid", "modelName", "model_name")
_EXPORTER = "dcgm-exporter"


def _first(labels: Mapping[str, str], *names: str) -> str:
    for name in names:
        value = labels.get(name, "")
        if value:
            return value
    return ""


def _ray(labels: Mapping[str, str], key: str) -> str:
    """A KubeRay pod label as a PodMonitor (`ray_io_x`) or kube-state-metrics
    (`label_ray_io_x`) writes it."""
    return _first(labels, f"ray_io_{key}", f"label_ray_io_{key}")


def is_gpu_alert(labels: Mapping[str, str], expr: str = "") -> bool:
    """The alert is about a GPU: the DCGM exporter's labels, or its metric in the rule."""
    return any(name in labels for name in _GPU_LABELS) or "DCGM_F" in expr or "DCGM_EXP" in expr


def _where(labels: Mapping[str, str], gpu: bool) -> dict[str, str]:
    """Namespace, pod and container: the workload's, never a GPU exporter's own."""
    found = {
        "namespace": _first(labels, "exported_namespace", "namespace"),
        "pod": _first(labels, "exported_pod", "pod"),
        "container": _first(labels, "exported_container", "container"),
    }
    exporters = _EXPORTER in found["pod"] or _EXPORTER in found["container"]
    if gpu and "exported_pod" not in labels and exporters:
        return {}
    return found


def _node(labels: Mapping[str, str]) -> str:
    node = _first(labels, "exported_node", "node", "kubernetes_node", "Hostname", "hostname")
    instance = labels.get("instance", "")
    if not node and instance and ":" not in instance and "/" not in instance:
        return instance
    return node


def _kuberay_object(labels: Mapping[str, str], expr: str) -> dict[str, str]:
    name = labels.get("name", "")
    if not name:
        return {}
    if "kuberay_job_" in expr:
        return {"rayjob": name}
    if "kuberay_cluster_" in expr:
        return {"ray_cluster": name}
    return {}


def _gpu(labels: Mapping[str, str]) -> dict[str, str]:
    return {
        "gpu": labels.get("gpu", ""),
        "gpu_uuid": _first(labels, "UUID", "uuid", "gpu_uuid"),
        "gpu_model": _first(labels, "modelName", "model_name"),
        "pci_bus_id": labels.get("pci_bus_id", ""),
        "xid": _first(labels, "err_code", "xid"),
        "xid_message": labels.get("err_msg", ""),
    }


def object_fields(labels: Mapping[str, str], expr: str = "") -> dict[str, str]:
    """The signal fields (docs/signals.md) the labels name; none is empty."""
    gpu = is_gpu_alert(labels, expr)
    fields = {**_where(labels, gpu), "node": _node(labels), "job": labels.get("job_name", "")}
    for kind in ("deployment", "statefulset", "daemonset"):
        fields[kind] = labels.get(kind, "")
    fields["ray_cluster"] = _ray(labels, "cluster")
    fields["ray_group"] = _ray(labels, "group")
    fields["ray_node_type"] = _ray(labels, "node_type")
    if _ray(labels, "originated_from_crd") == RAYJOB_CRD:
        fields["rayjob"] = _ray(labels, "originated_from_cr_name")
    for key, value in _kuberay_object(labels, expr).items():
        fields[key] = fields.get(key) or value
    if gpu:
        fields.update(_gpu(labels))
    return {key: value for key, value in fields.items() if value}


_WORKLOADS = (
    ("rayjob", "RayJob"),
    ("ray_cluster", "RayCluster"),
    ("deployment", "Deployment"),
    ("statefulset", "StatefulSet"),
    ("daemonset", "DaemonSet"),
    ("job", "Job"),
)


def refs(fields: Mapping[str, str]) -> tuple[ObjectRef | None, ObjectRef | None]:
    """The object the alert is about (a pod, else a Job, a node, a RayCluster) and the
    workload that owns it when the labels name one."""
    namespace = fields.get("namespace", "")
    workload = next(
        (ObjectRef(kind, fields[key], namespace) for key, kind in _WORKLOADS if fields.get(key)),
        None,
    )
    if fields.get("pod"):
        return ObjectRef("Pod", fields["pod"], namespace), workload
    if fields.get("job"):
        return ObjectRef("Job", fields["job"], namespace), workload
    if fields.get("node"):
        return ObjectRef("Node", fields["node"]), workload
    return workload, workload
