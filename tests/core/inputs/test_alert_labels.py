"""An alert's labels name the objects pitcrew knows, read as a specification: each row is
the labels a real rule's alert carries (kube-state-metrics, a KubeRay PodMonitor,
KubeRay's own metrics, NVIDIA's DCGM exporter, node-exporter as kube-prometheus
relabels it) and what pitcrew reads from them."""

from __future__ import annotations

import pytest

from bot.core.inputs.alert_labels import object_fields, refs
from bot.core.model import ObjectRef

NS = "ml-train"
RC = "verl-ppo-raycluster-x7k2p"
POD = f"{RC}-gpu-group-worker-9zq4f"
GPU = {"gpu": "3", "UUID": "GPU-5b7c", "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": "gpu-7"}


@pytest.mark.parametrize(
    ("labels", "expr", "fields", "obj", "workload"),
    [
        # kube-state-metrics (KubePodCrashLooping); `job` is the scrape job, no Kubernetes Job
        ({"namespace": NS, "pod": POD, "container": "ray-worker", "job": "kube-state-metrics"}, "",
         {"namespace": NS, "pod": POD, "container": "ray-worker"},
         ObjectRef("Pod", POD, NS), None),
        # a pod's KubeRay labels through kube_pod_labels (label_ray_io_*), RayJob's RayCluster
        ({"namespace": NS, "pod": POD, "label_ray_io_cluster": RC, "label_ray_io_group": "gpu-group",
          "label_ray_io_node_type": "worker"}, "",
         {"namespace": NS, "pod": POD, "ray_cluster": RC, "ray_group": "gpu-group", "ray_node_type": "worker"},
         ObjectRef("Pod", POD, NS), ObjectRef("RayCluster", RC, NS)),
        # KubeRay's PodMonitor (config/prometheus/podMonitor.yaml) relabels ray.io/cluster
        ({"namespace": NS, "pod": POD, "ray_io_cluster": RC, "ray_io_originated_from_crd": "RayJob",
          "ray_io_originated_from_cr_name": "verl-ppo"}, "",
         {"namespace": NS, "pod": POD, "ray_cluster": RC, "rayjob": "verl-ppo"},
         ObjectRef("Pod", POD, NS), ObjectRef("RayJob", "verl-ppo", NS)),
        # KubeRay's own metrics name their object `name`: which kind, from the rule
        ({"name": "verl-ppo", "namespace": NS, "deployment_status": "Failed"},
         'kuberay_job_deployment_status{deployment_status="Failed"} == 1',
         {"namespace": NS, "rayjob": "verl-ppo"}, ObjectRef("RayJob", "verl-ppo", NS),
         ObjectRef("RayJob", "verl-ppo", NS)),
        ({"name": RC, "namespace": NS, "condition": "false"}, "kuberay_cluster_condition_provisioned == 0",
         {"namespace": NS, "ray_cluster": RC}, ObjectRef("RayCluster", RC, NS), ObjectRef("RayCluster", RC, NS)),
        ({"name": "x", "namespace": NS}, "up == 0", {"namespace": NS}, None, None),
        # KubeJobFailed: kube-state-metrics' job_name is the Job
        ({"job_name": "verl-ppo", "namespace": NS, "job": "kube-state-metrics"}, "",
         {"namespace": NS, "job": "verl-ppo"}, ObjectRef("Job", "verl-ppo", NS), ObjectRef("Job", "verl-ppo", NS)),
        # KubeNodeNotReady
        ({"node": "gpu-7", "job": "kube-state-metrics"}, "", {"node": "gpu-7"}, ObjectRef("Node", "gpu-7"), None),
        # node-exporter as kube-prometheus relabels it: instance is the node's name
        ({"instance": "gpu-7", "job": "node-exporter"}, "", {"node": "gpu-7"}, ObjectRef("Node", "gpu-7"), None),
        ({"instance": "10.0.4.9:9100", "job": "node-exporter"}, "", {}, None, None),
        # the DCGM exporter: its own pod is not the GPU's user ...
        ({**GPU, "err_code": "79", "err_msg": "GPU has fallen off the bus", "namespace": "gpu-operator",
          "pod": "nvidia-dcgm-exporter-x2x7k", "container": "nvidia-dcgm-exporter"}, "DCGM_FI_DEV_XID_ERRORS > 0",
         {"node": "gpu-7", "gpu": "3", "gpu_uuid": "GPU-5b7c", "gpu_model": "NVIDIA A100-SXM4-80GB",
          "xid": "79", "xid_message": "GPU has fallen off the bus"},
         ObjectRef("Node", "gpu-7"), None),
        # ... the pod it maps to the GPU is, renamed exported_* by honor_labels: false
        ({**GPU, "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x2x7k", "exported_namespace": NS,
          "exported_pod": POD, "exported_container": "ray-worker", "xid": "48"}, "DCGM_EXP_XID_ERRORS_COUNT > 0",
         {"namespace": NS, "pod": POD, "container": "ray-worker", "node": "gpu-7", "gpu": "3", "gpu_uuid": "GPU-5b7c",
          "gpu_model": "NVIDIA A100-SXM4-80GB", "xid": "48"},
         ObjectRef("Pod", POD, NS), None),
        # NVLink series, and the exporter after 4.5.3-4.8.2: lower-case names
        ({"gpu": "3", "gpu_uuid": "GPU-5b7c", "model_name": "H100", "hostname": "gpu-7", "nvlink": "2"}, "",
         {"node": "gpu-7", "gpu": "3", "gpu_uuid": "GPU-5b7c", "gpu_model": "H100"}, ObjectRef("Node", "gpu-7"), None),
    ],
)  # fmt: skip
def test_labels_name_the_objects_pitcrew_knows(
    labels: dict[str, str],
    expr: str,
    fields: dict[str, str],
    obj: ObjectRef | None,
    workload: ObjectRef | None,
) -> None:
    found = object_fields(labels, expr)
    assert found == fields
    assert refs(found) == (obj, workload)
