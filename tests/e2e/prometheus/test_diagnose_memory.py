"""`/pitcrew diagnose` of a pod killed for memory, with `sources.prometheus` set: the answer
says how the pod's memory went before the kill and offers the bump sized from it, as the
card and `pitcrew diagnose --kube --prometheus` do (the Kubernetes emulator for the pod,
a real Prometheus for its series)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.adapters.prometheus.local import LocalPrometheus
from bot.adapters.slack.commands import DiagnoseTarget
from bot.app.on_demand import Diagnoser
from bot.app.settings.sections import Settings
from bot.app.settings.sources import (
    KubernetesSourceSettings,
    PrometheusSourceSettings,
    SourceSettings,
)
from bot.daemon.feed import Item
from tests.e2e.kubernetes.conftest import Emulator, install_seed, kubeconfig
from tests.support import kube_objects as o
from tests.support.daemon import engine

pytestmark = pytest.mark.kube


class Queue:
    def __init__(self) -> None:
        self.items: list[Item] = []

    def submit(self, item: Item) -> bool:
        self.items.append(item)
        return True


def diagnose(kuberay: Emulator, tmp_path: Path, prometheus_url: str) -> str:
    pod = install_seed(kuberay)["oom_pod"]["metadata"]["name"]
    kube = KubernetesSourceSettings(kubeconfig=kubeconfig(tmp_path, kuberay), context="kmock")
    prometheus = PrometheusSourceSettings(url=prometheus_url, timeout=timedelta(seconds=2))
    settings = Settings(sources=SourceSettings(kubernetes=kube, prometheus=prometheus))
    diagnoser = Diagnoser(settings, engine().library, Queue())
    return diagnoser(DiagnoseTarget("pod", pod, o.NS), "U0ALICE")


@pytest.mark.slow
def test_the_answer_says_how_the_memory_went_and_sizes_the_bump_from_it(
    kuberay: Emulator, prometheus: LocalPrometheus, tmp_path: Path
) -> None:
    lines = diagnose(kuberay, tmp_path, prometheus.url).splitlines()
    assert lines[1].startswith("Root cause: pod_oom_killed")
    assert lines[2] == (
        "Memory: peak 15.9Gi of 16Gi, rising 0.8Gi/min for 16 min before the kill (looks like "
        "a leak); the other 2 pods of gpu-group peaked at 11.2Gi. At the 16Gi limit before the "
        "kill: the kernel's OOM kill"
    )
    (bump,) = [line for line in lines if line.startswith("Offered: k8s.bump_memory")]
    assert "16Gi → 20Gi (the killed pod's usage at the kill" in bump


def test_a_prometheus_that_does_not_answer_is_said_and_the_factor_applies(
    kuberay: Emulator, tmp_path: Path
) -> None:
    lines = diagnose(kuberay, tmp_path, "http://127.0.0.1:9").splitlines()
    (memory,) = [line for line in lines if line.startswith("Memory: ")]
    assert memory.startswith("Memory: no memory metrics: ")
    assert "127.0.0.1:9" in memory
    (bump,) = [line for line in lines if line.startswith("Offered: k8s.bump_memory")]
    assert "16Gi → 24Gi" in bump
