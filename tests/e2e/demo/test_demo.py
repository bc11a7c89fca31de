"""`pitcrew demo --yes` end to end, as `make demo` runs it without a terminal.

A real subprocess: it starts its own Ray head (real jobs fail the real way), the
daemon in process, and kmock's Kubernetes API emulator for the seed case; every
scenario must reach its expected end (exit 0, a ✓ row each in the summary), and
nothing it started may outlive it: not the Ray head's process group, not a process
of its temporary directories, not the directories themselves.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.adapters.ray.local import is_running, process_table

pytestmark = [pytest.mark.ray, pytest.mark.slow]

PITCREW = Path(sys.executable).with_name("pitcrew")
ROWS = {
    "stale named actor (Ray)": ("named_actor_conflict", "ray.kill_actor, ray.resubmit_job"),
    "missing dependency (Ray)": ("dependency_runtime_env", "none offered"),
    "the seed (EMULATED Kubernetes)": (
        "pod_oom_killed (+ named_actor_conflict)",
        "k8s.bump_memory, kuberay.recreate_rayjob",
    ),
}


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the first rich table in `text`, each cell's wrapped lines joined."""
    rows: list[list[str]] = []
    current: list[list[str]] = []
    body = text[text.index("┡") :]
    for line in body.splitlines():
        if line.startswith("│"):
            current.append([cell.strip() for cell in line.strip().strip("│").split("│")])
        elif line.startswith(("├", "└")) and current:
            rows.append([" ".join(filter(None, parts)) for parts in zip(*current, strict=True)])
            current = []
        if line.startswith("└"):
            break
    return rows


def _mentions(pid: int, text: str) -> bool:
    try:
        return text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _survivors(pgid: int, *directories: str) -> list[int]:
    return [
        pid
        for pid, (_, group) in process_table().items()
        if (group == pgid or any(_mentions(pid, d) for d in directories)) and is_running(pid)
    ]


@pytest.mark.timeout(900)
def test_pitcrew_demo_yes_reaches_every_scenarios_end_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "COLUMNS": "160", "TERM": "dumb", "NO_COLOR": "1"}
    env.pop("PITCREW_CONFIG", None)
    started = time.monotonic()
    done = subprocess.run(
        [str(PITCREW), "demo", "--yes"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=840,
    )
    elapsed = time.monotonic() - started
    out = done.stdout
    assert done.returncode == 0, f"exit {done.returncode}\n{out[-6000:]}\n{done.stderr[-3000:]}"

    head = re.search(r"process group (\d+), temp dir (\S+)", out)
    store = re.search(r"store (\S+)/pitcrew\.db", out)
    assert head, out[:3000]
    assert store, out[:3000]
    pgid, ray_dir, demo_dir = int(head[1]), head[2], store[1]
    assert _survivors(pgid, ray_dir, demo_dir) == []
    assert not Path(ray_dir).exists()
    assert not Path(demo_dir).exists()

    summary = out[out.index("pitcrew demo: summary") :]
    rows = {row[0]: row for row in table_rows(summary)}
    assert sorted(rows) == sorted(ROWS), summary
    for scenario, (cause, action) in ROWS.items():
        _, found_cause, found_action, result, to_card = rows[scenario]
        unwrapped = found_action.replace(" _", "_").replace(". ", ".")  # a cell wraps anywhere
        assert (found_cause, unwrapped) == (cause, action), rows[scenario]
        assert result.startswith("✓"), rows[scenario]
        assert re.fullmatch(r"\d+\.\d s", to_card), rows[scenario]
    assert "✗" not in summary

    # What each scenario showed on the way (wrapped lines joined).
    flat = " ".join(out.split())
    assert "The name trainer_register_center (namespace=rl-train) is already taken" in flat
    # the kill and the resubmission are one plan, the card's primary button
    assert "one plan, one Approve: ray.kill_actor → ray.resubmit_job" in flat
    assert "the State API shows actor trainer_register_center DEAD" in flat
    assert re.search(r"the rerun pitcrew-resubmit-\S+ SUCCEEDED", flat)
    assert "No module named 'flash_attn'" in flat
    assert "EMULATED Kubernetes API" in flat
    # the seed's memory evidence (a throwaway Prometheus) before the offer sized from it
    evidence = flat.index("memory (from Prometheus, before the card was posted): peak 15.9Gi")
    offer = flat.index("the bump offered, sized from it: RayCluster ml-train/")
    approved = flat.index("one plan, one Approve: k8s.bump_memory → kuberay.recreate_rayjob")
    assert evidence < offer < approved
    assert "16Gi → 20Gi (the killed pod's usage at the kill" in flat
    assert "16Gi → 24Gi" not in flat
    # the seed's evidence bundle, in its card's thread (kept after the cluster is gone)
    assert re.search(r"Evidence bundle of RayJob ml-train/verl-ppo-qwen \(\d+\.\d KiB", flat)
    assert (  # the printed `pitcrew bundle` is not for the store the demo deletes
        "(the demo's store and bundles are deleted when it ends: that command is for a daemon "
        "of your own, `pitcrew run`)"
    ) in flat
    assert "memory limit 20Gi" in flat
    assert "Named actor already taken (RayJob and 1 pod)" in flat
    assert re.search(
        r"RayJob verl-ppo-qwen recreated \(from uid \S+\), group gpu-group memory limit 20Gi, "
        r"Running",
        flat,
    )
    assert "ray.kill_actor not offered: the clash is a symptom of pod_oom_killed" in flat
    print(f"pitcrew demo --yes took {elapsed:.0f} s")
