"""The seed case's objects as the demo creates them: each pod's log is served before the
pod exists, as a kubelet serves a terminated container's log from the moment the pod
shows it, so a watcher that reads the log at its first sight of the pod finds it
(`pitcrew demo`'s card named the driver log's clash only when the watcher was slow)."""

from __future__ import annotations

from typing import Any

from bot.app.demo import seed


class Recording:
    """A cluster that records what `install` asks of it, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"create {obj['kind']} {obj['metadata']['name']}")
        return obj

    def serve_log(self, namespace: str, pod: str, text: bytes) -> None:
        self.calls.append(f"log {namespace}/{pod} ({len(text.splitlines())} lines)")


def test_the_logs_are_served_before_any_pod_exists() -> None:
    cluster = Recording()
    seed.install(cluster)
    driver_lines = len(seed.seed_driver_log().splitlines())
    assert cluster.calls[:2] == [
        f"log ml-train/verl-ppo-qwen-x9z2k ({driver_lines} lines)",
        "log ml-train/verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-9zq4f (2 lines)",
    ]
    pods = [call for call in cluster.calls if call.startswith("create Pod ")]
    assert pods == [
        "create Pod verl-ppo-qwen-raycluster-x7k2p-head-8ffkm",
        "create Pod verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-9zq4f",
        "create Pod verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-2mdkq",
        "create Pod verl-ppo-qwen-x9z2k",
    ]
    assert cluster.calls[-4:] == pods
