"""`pitcrew diagnose` as a user runs it: real process, files, stdin, exit codes, JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.classify import realistic_log
from tests.support.cli import ROOT, SEED, pitcrew


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b"\x00\x01\x02binary", "binary data, not text (NUL byte at offset 0)"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary data, not text (NUL byte at offset 8)"),
    ],
)
def test_unreadable_input_exits_2_with_one_line_naming_it(
    tmp_path: Path, content: bytes, error: str
) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(content)
    result = pitcrew("diagnose", str(path))
    assert result.returncode == 2
    assert result.stderr.decode() == f"pitcrew: {path}: {error}\n"
    assert result.stdout == b""


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["diagnose", "/nonexistent/driver.log"],
            "pitcrew: /nonexistent/driver.log: no such file\n",
        ),
        (
            ["diagnose", "--format", "xml", "x"],
            "pitcrew: --format must be text or json, not 'xml'\n",
        ),
    ],
)
def test_usage_errors_exit_2(args: list[str], error: str) -> None:
    result = pitcrew(*args)
    assert (result.returncode, result.stderr.decode()) == (2, error)


def test_no_failure_is_exit_0_and_a_null_primary() -> None:
    result = pitcrew(
        "diagnose", "--format", "json", stdin=b"Job 'raysubmit_x' submitted successfully\n"
    )
    assert result.returncode == 0
    assert json.loads(result.stdout) == {
        "primary": None,
        "likely": False,
        "secondary": [],
        "findings": [],
        "actions": [],
        "diagnosis": "No failure found: nothing in the input matches a playbook.",
        "remediation": [],
        "runbook": [],
        "unknown": [],
        "unrendered": [],
    }


@pytest.mark.slow
def test_the_seed_case_json() -> None:
    result = pitcrew("diagnose", str(SEED), "--format", "json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) == {
        "primary",
        "likely",
        "secondary",
        "findings",
        "actions",
        "diagnosis",
        "remediation",
        "runbook",
        "unknown",
        "unrendered",
    }
    assert out["unrendered"] == []
    assert out["remediation"][0] == (
        "Raise the worker group's memory limit (keep requests equal to limits), then resubmit."
    )
    assert out["runbook"] == [
        "https://kubernetes.io/docs/tasks/configure-pod-container/assign-memory-resource/"
    ]
    assert out["primary"] == "pod_oom_killed"
    assert out["likely"] is False
    assert out["secondary"][0] == "named_actor_conflict"
    roles = {f["category"]: f["role"] for f in out["findings"]}
    assert roles["pod_oom_killed"] == "primary"
    assert roles["named_actor_conflict"] == "secondary"
    for finding in out["findings"]:
        assert set(finding) >= {"playbook", "category", "severity", "role", "evidence", "captures"}
        assert finding["strength"] == "strong"
    symptoms = {f["category"]: f["symptom_of"] for f in out["findings"] if f["why"]}
    assert symptoms == dict.fromkeys(
        [
            "named_actor_conflict",
            "worker_died_system_error",
            "rayjob_cr_failure",
            "application_error",
        ],
        "pod_oom_killed",
    )
    actions = {a["action"]: a for a in out["actions"]}
    bump = actions["k8s.bump_memory"]
    assert bump["offered"] is True
    assert bump["preview"] == (
        "RayCluster ml-train/verl-ppo-qwen-raycluster-x7k2p workerGroupSpecs[gpu-group]"
        ".containers[ray-worker].resources.limits.memory: 16Gi → 24Gi (× 1.5: no memory metrics)"
    )
    kill = actions["ray.kill_actor"]
    assert kill["offered"] is False
    assert (
        kill["reason"]
        == "the clash is a symptom of pod_oom_killed; killing the actor would not help"
    )
    assert kill["params"] == {"name": "qwAKMv_register_center", "namespace": "None", "cluster": ""}


@pytest.mark.slow
def test_text_output_names_root_cause_and_actions() -> None:
    result = pitcrew("diagnose", str(SEED))
    text = result.stdout.decode()
    assert result.returncode == 0
    assert "ROOT CAUSE: pod_oom_killed" in text
    assert "symptom of pod_oom_killed: named_actor_conflict" in text
    assert "why: the actor's constructor ran again after its worker died" in text
    assert "withheld" in text
    assert "offered" in text


@pytest.mark.slow
def test_stdin_and_a_mix_pasted_together() -> None:
    pasted = (
        (SEED / "worker-pod.describe.txt").read_bytes() + b"\n" + (SEED / "driver.log").read_bytes()
    )
    result = pitcrew("diagnose", "-", "--format", "json", stdin=pasted)
    out = json.loads(result.stdout)
    assert (out["primary"], out["secondary"][0]) == ("pod_oom_killed", "named_actor_conflict")


@pytest.mark.slow
def test_a_large_log_is_streamed_not_loaded(tmp_path: Path) -> None:
    small, large = tmp_path / "small.log", tmp_path / "large.log"
    small.write_bytes(b"(TaskRunner pid=1) step 1\n")
    large.write_bytes(realistic_log(96))

    def peak_rss_kb(path: Path) -> int:
        probe = (
            "import resource, subprocess, sys;"
            "subprocess.run([sys.executable, '-m', 'bot', 'diagnose', '--format', 'json', sys.argv[1]],"
            " check=True, stdout=subprocess.DEVNULL);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
        )
        out = subprocess.run(
            [sys.executable, "-c", probe, str(path)], capture_output=True, check=True, cwd=ROOT
        )
        return int(out.stdout)

    growth_mb = (peak_rss_kb(large) - peak_rss_kb(small)) / 1024
    assert growth_mb < 48, f"a 96 MB log grew the process by {growth_mb:.0f} MB"


@pytest.mark.slow
def test_the_seed_driver_log_alone_ranks_the_death_before_the_clash() -> None:
    """docs/failure-classes.md, "Precedence": without the pod status, the clash follows the worker death, and
    the explanation says so once, never the other way round."""
    result = pitcrew("diagnose", str(SEED / "driver.log"), "--format", "json")
    out = json.loads(result.stdout)
    assert out["primary"] == "worker_died_system_error"
    assert out["secondary"][0] == "named_actor_conflict"
    clash = next(f for f in out["findings"] if f["category"] == "named_actor_conflict")
    assert clash["symptom_of"] == "worker_died_system_error"
    assert "symptom of named_actor_conflict" not in out["diagnosis"]
    assert "Look for the death first" not in out["diagnosis"]
    kill = next(a for a in out["actions"] if a["action"] == "ray.kill_actor")
    assert kill["offered"] is False
    assert kill["reason"].startswith("needs a live check that the name's live holder")


@pytest.mark.slow
def test_a_weak_finding_alone_is_likely_and_offers_nothing() -> None:
    result = pitcrew(
        "diagnose",
        "--format",
        "json",
        stdin=b"(raylet, ip=10.0.3.17) Raylet is terminated. Termination is unexpected. "
        b"Possible reasons include: (1) SIGKILL by the user or system OOM killer, (2) Invalid "
        b"memory access from Raylet causing SIGSEGV or SIGBUS, (3) Other termination signals.\n",
    )
    out = json.loads(result.stdout)
    assert (out["primary"], out["likely"]) == ("worker_died_system_error", True)
    assert out["findings"][0]["strength"] == "weak"
    assert out["diagnosis"].startswith("Likely root cause (weak evidence): ")
    assert not [a for a in out["actions"] if a["offered"]]


def test_the_readmes_seed_output_shows_the_offers_as_the_command_prints_them() -> None:
    """README.md's `pitcrew diagnose examples/seed/` excerpt: each offer line it shows (the
    plan of the bump and the rerun, the withheld actions) is what the command prints, up
    to where the excerpt cuts a long line with …"""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    excerpt = readme.split("$ pitcrew diagnose examples/seed/", 1)[1].split("```", 1)[0]
    start = "offered as one plan"
    shown = [line.split("…", 1)[0] for line in excerpt[excerpt.index(start) :].splitlines()]
    result = pitcrew("diagnose", str(SEED))
    printed = result.stdout.decode().splitlines()
    offers = printed[
        printed.index("offered as one plan, its steps run in order with one Approve:") :
    ]
    assert shown[0] == offers[0]
    assert len(shown) == len(offers)
    assert all(line.startswith(prefix) for prefix, line in zip(shown, offers, strict=True))
