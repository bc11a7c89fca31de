"""`pitcrew diagnose --kube NS/pod/NAME --prometheus URL --chart FILE`: the live seed pod
(the Kubernetes emulator) with its memory read from a real Prometheus: the memory line,
a sparkline, the bump sized from the group's peak, and the chart saved as a PNG."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from typer.testing import CliRunner

from bot.adapters.prometheus.local import LocalPrometheus
from bot.app.cli_app import app
from tests.e2e.kubernetes.conftest import Emulator, install_seed, kubeconfig
from tests.support import kube_objects as o

pytestmark = pytest.mark.kube


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})


def kube_args(kuberay: Emulator, tmp_path: Path) -> list[str]:
    seed = install_seed(kuberay)
    pod = seed["oom_pod"]["metadata"]["name"]
    config = kubeconfig(tmp_path, kuberay)
    return [
        "diagnose",
        "--kube",
        f"{o.NS}/pod/{pod}",
        "--kubeconfig",
        str(config),
        "--context",
        "kmock",
    ]


def test_the_chart_is_saved_and_the_memory_line_printed(
    kuberay: Emulator, prometheus: LocalPrometheus, tmp_path: Path
) -> None:
    chart = tmp_path / "memory.png"
    result = invoke(
        *kube_args(kuberay, tmp_path), "--prometheus", prometheus.url, "--chart", str(chart)
    )
    assert result.exit_code == 0, result.output
    assert (
        "Memory: peak 15.9Gi of 16Gi, rising 0.8Gi/min for 16 min before the kill (looks like "
        "a leak); the other 2 pods of gpu-group peaked at 11.2Gi"
    ) in result.stdout
    assert "▂▂▂▂" in result.stdout
    assert "█ (limit 16Gi)" in result.stdout
    assert "16Gi → 20Gi (the killed pod's usage at the kill" in result.stdout
    assert Image.open(io.BytesIO(chart.read_bytes())).size == (1000, 500)
    assert f"chart: {chart}" in result.stderr


def test_json_carries_the_memory_line(
    kuberay: Emulator, prometheus: LocalPrometheus, tmp_path: Path
) -> None:
    result = invoke(*kube_args(kuberay, tmp_path), "--prometheus", prometheus.url, "-f", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["memory"].startswith("peak 15.9Gi of 16Gi, rising 0.8Gi/min")
    bump = next(a for a in report["actions"] if a["action"] == "k8s.bump_memory")
    assert "16Gi → 20Gi" in bump["preview"]


@pytest.mark.slow
def test_a_silent_prometheus_leaves_the_factor_and_no_chart(
    kuberay: Emulator, tmp_path: Path
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        result = invoke(
            *kube_args(kuberay, tmp_path), "--prometheus", url, "--chart", str(tmp_path / "x.png")
        )
    assert result.exit_code == 2
    assert f"Memory: no memory metrics: {url} did not answer within 5.0 s" in result.stdout
    assert "16Gi → 24Gi (× 1.5: no memory metrics" in result.stdout
    assert f"pitcrew: --chart: no memory metrics: {url} did not answer within 5.0 s" in (
        result.stderr
    )
    assert not (tmp_path / "x.png").exists()


def test_chart_without_prometheus_is_refused(kuberay: Emulator, tmp_path: Path) -> None:
    result = invoke(*kube_args(kuberay, tmp_path), "--chart", str(tmp_path / "x.png"))
    assert result.exit_code == 2
    assert "pitcrew: --chart draws what --prometheus URL reads; give both" in result.stderr
