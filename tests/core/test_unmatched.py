"""'No failure found' explains itself: `pitcrew diagnose --explain` shows what matched and,
when nothing did, the lines that look like failures; the daemon's store keeps those by
shape, and `pitcrew unmatched` / `/pitcrew unmatched` list them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.adapters.slack.commands import UnmatchedCommand, Usage, explain_unmatched, parse
from bot.adapters.store.store import Store
from bot.app.cli_app import app
from bot.core.diagnosis import unmatched
from bot.core.diagnosis.unmatched import failure_lines, shape
from tests.support.cli import pitcrew

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
UNKNOWN = (
    b"step:41 - actor/pg_loss:0.012\n"
    b"(TaskRunner pid=1187) ERROR 2025-11-03 trainer.py:88 -- reward server returned 503\n"
    b"Traceback (most recent call last):\n"
    b'  File "reward.py", line 3, in <module>\n'
    b"QuuxError: the widget is gone\n"
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("ERROR worker 10.0.3.17:6379 lost 3 shards", "ERROR worker <ip> lost <n> shards"),
        ("(WorkerDict pid=811, ip=10.0.3.17) ERROR boom", "ERROR boom"),
        ("\x1b[31mERROR\x1b[0m task 4f1e0c9a3b7d52e8a6c1 failed", "ERROR task <hex> failed"),
        ("namespace 6b2a8f0e-1d3c-4a5b-9e7f-2c4d6e8f0a1b gone", "namespace <id> gone"),
        ("pod verl-gpu-group-worker-9zq4f Killed", "pod <name> Killed"),
    ],
)
def test_shapes_normalise_digits_ids_hex_and_prefixes(line: str, expected: str) -> None:
    assert shape(line) == expected


@pytest.mark.parametrize(
    ("line", "failure"),
    [
        ("Traceback (most recent call last):", True),
        ("KeyError: 'reward_fn'", True),
        ("Exit Code:    2", True),
        ("container exited with code 1", True),
        ("Killed", True),
        ("Exit Code:    0", False),
        ("INFO 11-03 worker.py:12] Error budget fine", False),
        ("FutureWarning: the Error class is deprecated", False),
        ("step:41 - actor/pg_loss:0.012", False),
        # glog/klog E and F lines, Ray's spdlog at E/C level, a failed check
        ('E0623 15:44:33.989839    1746 pod_workers.go:951] "Error syncing pod, skipping"', True),
        ("F0207 11:16:26.652703 51019 direct_task_transport.cc:154] Lost connection", True),
        ("[2025-07-22 15:32:09,880 C 742 742] task_manager.cc:1068: Check failed: it != end", True),
        ('I0623 15:42:16.744070 1748 nodeshutdown_manager_linux.go:316] "Shutdown manager"', False),
        # logrus' and zap's error level, whatever the message says
        ('time="2025-12-06T12:00:00Z" level=error msg="cannot resize a deleted process"', True),
        ('time="2025-12-06T12:00:00Z" level=warning msg="cannot resize a deleted process"', False),
        ('{"level":"error","ts":"2025-12-06T12:00:00Z","msg":"RayCluster not ready"}', True),
        ('{"level":"info","ts":"2025-12-06T12:00:00Z","msg":"reconciling RayCluster"}', False),
        # the kernel's and Slurm's OOM killer
        ("[12345.678] Memory cgroup out of memory: Killed process 4242 (raylet)", True),
        ("slurmstepd: error: Detected 1 oom_kill event in StepId=42.0", True),
        # lowercase runtime errors, a shell that cannot find a program
        ("exec /usr/bin/python3: exec format error", True),
        ("error: failed to create containerd task: exec format error", True),
        ("failed to mount rootfs component: no such file or directory", True),
        ("/bin/bash: line 1: ray: command not found", True),
        # an exception quoted in prose, behind a backtick or a timestamp
        ("I'm getting a `TimeoutError: Timed out waiting for RayJob ray/x", True),
        # Kubernetes states and Warning events as table rows print them
        ("raycluster-head-x7k2p   0/1     CrashLoopBackOff   5 (13s ago)   3m42s", True),
        ("user-directory-646bbbc878-lf4tq   2/3     OOMKilled   16 (5m13s ago)   57m", True),
        ("  Warning  PodGroupPending  38s  vc-controller-manager  PodGroup unschedulable", True),
        ("  Normal   Scheduled        82s  default-scheduler      Successfully assigned", False),
        # debug chatter, errors retried by their emitter, a benign lookup (benign noise)
        ("DEBUG 06-12 19:58:31 [__init__.py:76] Exception happens when checking CUDA", False),
        ("ConnectionResetError: [Errno 104] Connection reset by peer (upload retried)", False),
        ("Failed to look up actor with name 'N4K03i_register_center'.", False),
    ],
)
def test_what_looks_like_a_failure(line: str, failure: bool) -> None:
    assert bool(failure_lines([line])) is failure


@pytest.mark.slow
def test_explain_lists_the_failure_lines_no_playbook_knows() -> None:
    result = pitcrew("diagnose", "--explain", "--format", "json", stdin=UNKNOWN)
    out = json.loads(result.stdout)
    assert out["primary"] is None
    assert [(u["line"], u["text"]) for u in out["explain"]["unmatched"]] == [
        (2, "(TaskRunner pid=1187) ERROR 2025-11-03 trainer.py:88 -- reward server returned 503"),
        (3, "Traceback (most recent call last):"),
        (5, "QuuxError: the widget is gone"),
    ]
    assert out["unknown"] == [
        "<stdin>:2  (TaskRunner pid=1187) ERROR 2025-11-03 trainer.py:88 -- reward server returned 503",
        "<stdin>:3  Traceback (most recent call last):",
        "<stdin>:5  QuuxError: the widget is gone",
    ]
    text = pitcrew("diagnose", "--explain", stdin=UNKNOWN).stdout.decode()
    assert "pitcrew does not know this failure" in text
    assert "Lines that look like failures and that no playbook knows:" in text
    assert "<stdin>:5  QuuxError: the widget is gone" in text


@pytest.mark.slow
def test_explain_shows_which_line_matched_which_signature() -> None:
    root = Path(__file__).resolve().parents[2]
    log = root / "examples" / "seed" / "driver.log"
    out = json.loads(pitcrew("diagnose", "--explain", "--format", "json", str(log)).stdout)
    matched = {(m["playbook"], m["signature"], m["line"]) for m in out["explain"]["matched"]}
    assert ("named-actor-conflict", "already-taken", 44) in matched
    assert out["explain"]["unmatched"] == []  # listed only when nothing matched


def test_pitcrew_unmatched_lists_shapes_with_counts_and_first_and_last_seen(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    with Store(path) as store:
        for minute, ip in ((0, "10.0.3.17"), (9, "10.0.4.2")):
            lines = failure_lines([f"ERROR worker {ip} lost 3 shards"], "w.log")
            store.record_unmatched(lines, T0 + timedelta(minutes=minute))
    result = CliRunner().invoke(app, ["unmatched", "--store", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        " count  first seen           last seen            shape / example",
        "     2  2026-11-03 10:00:00  2026-11-03 10:09:00  ERROR worker <ip> lost <n> shards",
        "                                                  e.g. w.log: ERROR worker 10.0.4.2 lost 3 "
        "shards",
    ]


def test_the_slash_command_parses_and_words_the_shapes(tmp_path: Path) -> None:
    assert parse("unmatched") == UnmatchedCommand()
    assert parse("unmatched 5") == UnmatchedCommand(5)
    assert isinstance(parse("unmatched many"), Usage)
    with Store(tmp_path / "state.db") as store:
        store.record_unmatched(failure_lines(["KeyError: 'reward_fn'"]), T0)
        text = explain_unmatched(store.unmatched())
    assert text == (
        "*Failures no playbook knows (by shape):*\n"
        "• ×1 (2026-11-03 10:00 to 2026-11-03 10:00) `KeyError: 'reward_fn'`"
    )
    assert explain_unmatched(()) == (
        "No unmatched failures: every failure seen matched a playbook."
    )


@pytest.mark.slow  # reads every line of the inventory and the corpora
def test_the_quick_screen_never_hides_a_failure_line() -> None:
    """`_MAYBE` is only a shortcut: every line of the real inputs kept here (the seed, the
    test inputs and corpus, the playbooks' examples) that the full pattern calls a
    failure contains one of its words, so screening first changes no answer."""
    roots = [ROOT / "examples", ROOT / "tests" / "data", ROOT / "playbooks"]
    lines = [
        line
        for root in roots
        for path in sorted(root.rglob("*"))
        if path.is_file()
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
    ]
    failures = [line for line in lines if unmatched._FAILURE.search(line)]
    assert len(failures) > 100
    assert [line for line in failures if not unmatched._MAYBE.search(line)] == []
