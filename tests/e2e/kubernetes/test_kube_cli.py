"""`pitcrew diagnose --kube NAMESPACE/KIND/NAME` as a user runs it: a real process with a
kubeconfig pointing at the emulator, the same output shapes as file diagnosis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.app.cli_app import app
from tests.e2e.kubernetes.conftest import Emulator, install_seed, kubeconfig
from tests.support import kube_objects as o

pytestmark = pytest.mark.kube

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = "verl-ppo-qwen-raycluster-x7k2p"


def pitcrew(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )


@pytest.mark.slow
def test_diagnose_kube_rayjob_json(kuberay: Emulator, tmp_path: Path) -> None:
    install_seed(kuberay)
    config = kubeconfig(tmp_path, kuberay)
    result = pitcrew(
        "diagnose",
        "--kube",
        f"{o.NS}/rayjob/verl-ppo-qwen",
        "--kubeconfig",
        str(config),
        "--context",
        "kmock",
        "-f",
        "json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["primary"] == "pod_oom_killed"
    assert "named_actor_conflict" in report["secondary"]
    actions = {a["action"]: a for a in report["actions"]}
    bump = actions["k8s.bump_memory"]
    assert bump["offered"]
    assert (
        f"RayCluster ml-train/{CLUSTER}:\n  workerGroupSpecs[gpu-group].containers[ray-worker]"
        ".resources.limits.memory: 16Gi → 24Gi"
    ) in bump["preview"]
    assert "fits: largest matching node allocatable 180Gi" in bump["preview"]
    assert not actions["ray.kill_actor"]["offered"]


def invoke(*args: str) -> Any:
    """The same command in this process (faster than a new interpreter)."""
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.mark.slow
def test_diagnose_kube_pod_text(kuberay: Emulator, tmp_path: Path) -> None:
    seed = install_seed(kuberay)
    config = kubeconfig(tmp_path, kuberay)
    pod = seed["oom_pod"]["metadata"]["name"]
    result = invoke(
        "diagnose", "--kube", f"{o.NS}/pod/{pod}", "--kubeconfig", str(config), "--context", "kmock"
    )
    assert result.exit_code == 0, result.output
    assert "ROOT CAUSE: pod_oom_killed" in result.stdout
    # Not a terminal: whole lines, no panel, and the evidence names the pod it was read from.
    assert f"    {o.NS}/pod/{pod}" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--kube", "ml-train/deployment/x"),
            "unknown kind 'deployment'; use pod, rayjob or raycluster",
        ),
        (("--kube", "just-a-name"), "expected NAMESPACE/pod/NAME"),
        (("--kube", "ml-train/rayjob/missing"), "ml-train/rayjob/missing: not found"),
        (
            ("--kube", "ml-train/pod/x", "some.log"),
            "--kube reads from the cluster; give no input files",
        ),
    ],
)
def test_diagnose_kube_errors_exit_2_with_one_line(
    kuberay: Emulator, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    config = kubeconfig(tmp_path, kuberay)
    result = invoke("diagnose", *args, "--kubeconfig", str(config), "--context", "kmock")
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
