"""Each inventory message is carried the way its emitter prints it
(bot.core.quality.emitter_carriers)."""

from __future__ import annotations

import json

import pytest

from bot.core.quality.emitter_carriers import carriers_of
from bot.core.quality.inventory import InventoryEntry, parse_inventory


def entry(
    project: str, level: str = "error", source: str = "pkg/x/y.go", **more: str
) -> InventoryEntry:
    header = {"project": project, "read": "the test", "releases": ["1"]}
    file = more.pop("file", f"{project}.jsonl")
    item = {
        "id": "it-broke", "emitter": more.pop("emitter", "e"), "level": level, "kind": "log",
        "source": source, "versions": "1", "wordings": [{"template": "it broke", "versions": "1"}],
        "verdict": "unclassified", **more,
    }  # fmt: skip
    return parse_inventory(json.dumps(header) + "\n" + json.dumps(item) + "\n", file)[0]


def carried(item: InventoryEntry) -> dict[str, str | None]:
    return {c.name: c.carry(item, "it broke") for c in carriers_of(item)}


@pytest.mark.parametrize(
    ("item", "name", "text"),
    [
        (entry("kubernetes", source="pkg/kubelet/kubelet.go"), "klog",
         "E1206 12:00:00.123456    4721 kubelet.go:123] it broke"),
        (entry("kubernetes", "warning"), "klog-structured",
         'W1206 12:00:00.123456    4721 y.go:123] "it broke" pod="ml/train-0"'),
        (entry("containerd"), "logrus",
         'time="2025-12-06T12:00:00.123456789Z" level=error msg="it broke"'),
        (entry("runc", "warning"), "logrus",
         'time="2025-12-06T12:00:00.123456789Z" level=warning msg="it broke"'),
        (entry("kuberay", "info-with-error"), "zap-json",
         '{"level": "info", "ts": "2025-12-06T12:00:00.123Z", "logger": '
         '"controllers.RayCluster", "msg": "it broke", "RayCluster": {"name": "train", '
         '"namespace": "ml"}}'),
        (entry("kuberay"), "zap-console",
         "2025-12-06T12:00:00.123Z\tERROR\tcontrollers.RayCluster\tit broke"),
        (entry("nccl", "warning", "src/transport/net.cc"), "nccl-warn",
         "gpu-node-7:4721:4790 [3] NCCL WARN it broke"),
        (entry("slurm", source="src/slurmd/slurmstepd/req.c"), "slurmstepd",
         "slurmstepd: error: it broke"),
        (entry("slurm", "info"), "slurmstepd", "slurmstepd: it broke"),
        (entry("linux", source="mm/oom_kill.c"), "dmesg", "[183042.771203] it broke"),
        (entry("linux"), "journal", "Dec 06 12:00:00 gpu-node-7 kernel: it broke"),
        (entry("ray", "fatal", "src/ray/raylet/node_manager.cc"), "glog",
         "[2025-12-06 12:00:00,123 C 4721 4790] node_manager.cc:123: it broke"),
        (entry("ray", "error", "src/ray/raylet/node_manager.cc"), "raylet-prefix",
         "(raylet, ip=10.4.3.21) [2025-12-06 12:00:00,123 E 4721 4790] node_manager.cc:123: "
         "it broke"),
        (entry("ray", "warning", "ray/_private/worker.py"), "actor-prefix",
         "(TrainWorker pid=4721, ip=10.4.3.21) 2025-12-06 12:00:00,123\tWARNING worker.py:123 "
         "-- it broke"),
        (entry("vllm", "error", "vllm/engine/llm_engine.py"), "vllm-logger",
         "ERROR 12-06 12:00:00 [llm_engine.py:123] it broke"),
        (entry("pytorch", "warning", "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"), "c10",
         "[rank0]:[W1206 12:00:00.123456000 4721 ProcessGroupNCCL.cpp:123] it broke"),
        (entry("pytorch", source="libcudart.so (cudaGetErrorString)"), "torch-raise",
         "RuntimeError: it broke"),
        (entry("nvidia", file="nvidia-device-plugin.jsonl"), "klog",
         "E1206 12:00:00.123456    4721 y.go:123] it broke"),
        (entry("nvidia", file="nvidia-container-toolkit.jsonl"), "logrus",
         'time="2025-12-06T12:00:00.123456789Z" level=error msg="it broke"'),
    ],
)  # fmt: skip
def test_a_message_is_carried_behind_its_emitters_prefix(
    item: InventoryEntry, name: str, text: str
) -> None:
    assert carried(item)[name] == text


@pytest.mark.parametrize(
    ("item", "names"),
    [
        # the kubelet's, containerd's, a controller's lines never reach a Ray driver
        (entry("kubernetes"), ["bare", "klog", "klog-structured", "wrap-80", "wrap-120", "first-line"]),
        (entry("cri-o"), ["bare", "logrus", "wrap-80", "wrap-120", "first-line"]),
        # what a Ray worker prints reaches the driver, in a RayJob's status, a job record
        (entry("vllm", source="vllm/worker/worker.py"),
         ["bare", "vllm-logger", "actor-prefix", "repeated", "colour", "rayjob-status",
          "job-record", "wrap-80", "wrap-120", "first-line"]),
        # a raise is its traceback's last line: no logger's prefix
        (entry("vllm", "raise", "vllm/config.py", exception="ValueError"),
         ["bare", "actor-prefix", "repeated", "colour", "rayjob-status", "job-record",
          "wrap-80", "wrap-120", "first-line"]),
    ],
)  # fmt: skip
def test_the_carriers_are_those_the_emitters_output_goes_through(
    item: InventoryEntry, names: list[str]
) -> None:
    assert [c.name for c in carriers_of(item)] == names


def test_the_driver_carries_a_workers_line_behind_its_own_prefix() -> None:
    item = entry("vllm", source="vllm/worker/worker.py")
    assert carried(item)["repeated"] == (
        "(TrainWorker pid=4721, ip=10.4.3.21) ERROR 12-06 12:00:00 [worker.py:123] it broke"
        " [repeated 3x across cluster]"
    )
