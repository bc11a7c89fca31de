"""The first five minutes with pitcrew, each answer exactly as a new user sees it: any
byte sequence is diagnosed (undecodable bytes read as U+FFFD, said once), from the
command line and from /ingest; `pitcrew ingest` sends a large log's tail under the
daemon's limit and says so; client commands need no chat tokens; `-h` and
`--version`; whole lines in a pipe; "No failure found" points to `--explain`; an
empty input says it is empty; help shows what to type, not Python's type names."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot import __version__
from bot.adapters.files.playbooks import playbook_files
from bot.adapters.http.ingest import route as ingest_route
from bot.adapters.http.server import MAX_BODY, HealthServer, Probes
from bot.app.commands import INGEST_BODY_LIMIT, log_tail
from bot.daemon.feed import Observation
from bot.daemon.metrics import Metrics
from tests.support.cli import SEED, pitcrew

OOM_LINE = b"container ray-worker last terminated: OOMKilled (exit code 137)\n"
# A log cut mid-character (`kubectl logs --limit-bytes`), then the failure.
CUT = "caf\u00e9".encode()[:-1] + b"\n" + OOM_LINE
UNDECODABLE = "not UTF-8 text (invalid byte 0xc3 at offset 3); undecodable bytes are read as U+FFFD"


@dataclass
class Accepted:
    items: list[Observation] = field(default_factory=list)

    def accept(self, observation: Observation) -> str | None:
        self.items.append(observation)
        return None


def test_a_log_with_an_invalid_byte_is_diagnosed_and_said_once(tmp_path: Path) -> None:
    path = tmp_path / "driver.log"
    path.write_bytes(CUT * 3)
    result = pitcrew("diagnose", "--format", "json", str(path))
    assert result.returncode == 0
    assert result.stderr.decode() == f"pitcrew: {path}: {UNDECODABLE}\n"
    assert json.loads(result.stdout)["primary"] == "pod_oom_killed"


def test_ingest_takes_an_invalid_byte_and_says_so() -> None:
    accepted = Accepted()
    status, _, body = ingest_route(accepted)("/ingest?origin=driver.log", {}, CUT)
    assert (status, json.loads(body)) == (
        202,
        {"accepted": 1, "notes": [f"driver.log: {UNDECODABLE}"]},
    )
    assert len(accepted.items) == 1


def test_ingest_sends_a_large_logs_tail_under_the_daemons_limit(tmp_path: Path) -> None:
    assert INGEST_BODY_LIMIT == MAX_BODY  # the daemon's own cap
    line = b"(TaskRunner pid=1187) step:3 - timing_s/gen:61.201 " + b"x" * 47 + b"\n"  # 99 B
    big = tmp_path / "driver.log"
    big.write_bytes(line * 20_000 + OOM_LINE)  # 1.98 MB, the failure at its end
    accepted = Accepted()
    server = HealthServer(
        "127.0.0.1", 0, Metrics(), Probes(lambda: {"pipeline": True}, lambda: {"store": True})
    )
    server.mount("/ingest", ingest_route(accepted), private=True)
    server.start()
    try:
        result = pitcrew("ingest", str(big), "--url", f"http://127.0.0.1:{server.port}")
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode() == (
        "pitcrew: sent the last 1,044,415 bytes (10,550 lines) of 1,980,064: the daemon takes "
        "at most 1,048,576 bytes per request, and a failure is at a log's end\n"
    )
    assert result.stdout.decode() == f"queued 1 part of {big}\n"
    assert len(accepted.items) == 1


def test_ingest_of_a_directory_sends_each_of_its_files(tmp_path: Path) -> None:
    (tmp_path / "driver.log").write_bytes(OOM_LINE)
    (tmp_path / "events.txt").write_bytes(b"Warning  BackOff  pod/p1  Back-off restarting\n")
    (tmp_path / ".hidden").write_bytes(b"not evidence\n")
    accepted = Accepted()
    server = HealthServer(
        "127.0.0.1", 0, Metrics(), Probes(lambda: {"pipeline": True}, lambda: {"store": True})
    )
    server.mount("/ingest", ingest_route(accepted), private=True)
    server.start()
    try:
        result = pitcrew("ingest", str(tmp_path), "--url", f"http://127.0.0.1:{server.port}")
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == (
        f"queued 1 part of {tmp_path / 'driver.log'}\nqueued 1 part of {tmp_path / 'events.txt'}\n"
    )
    assert len(accepted.items) == 2


def test_a_log_within_the_limit_is_sent_whole() -> None:
    assert log_tail(OOM_LINE, 100) == (OOM_LINE, "")


@pytest.mark.slow
def test_client_commands_need_no_chat_tokens(tmp_path: Path) -> None:
    config = tmp_path / "pitcrew.yaml"
    config.write_text("chat:\n  kind: slack\n")
    log = tmp_path / "driver.log"
    log.write_bytes(OOM_LINE)
    result = pitcrew("ingest", str(log), "--config", str(config), "--url", "http://127.0.0.1:9")
    assert result.returncode == 2
    assert result.stderr.decode().startswith(
        "pitcrew: http://127.0.0.1:9/ingest: cannot reach the daemon: "
    )
    status = pitcrew("status", "--config", str(config), "--store", str(tmp_path / "none.db"))
    assert status.stderr.decode() == (
        f"pitcrew: {tmp_path / 'none.db'}: no pitcrew state here; point at the daemon's with "
        "--config or --store\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_answers_to_h(flag: str) -> None:
    result = pitcrew(flag)
    assert result.returncode == 0
    assert "[OPTIONS] COMMAND [ARGS]..." in result.stdout.decode()  # `python -m bot` here


def test_version() -> None:
    result = pitcrew("--version")
    assert (result.returncode, result.stdout.decode()) == (0, f"pitcrew {__version__}\n")


@pytest.mark.slow
def test_help_shows_what_to_type_not_python_types() -> None:
    shown = pitcrew("diagnose", "-h").stdout.decode() + pitcrew("silence", "-h").stdout.decode()
    assert "<bool>" not in shown
    assert "list[" not in shown
    assert "diagnose [OPTIONS] [INPUT]..." in shown  # `python -m bot` here
    assert "--kube NAMESPACE/KIND/NAME" in shown
    assert "-p, --playbooks DIR" in shown
    assert "KEY=VALUE[,KEY=VALUE], each KEY one of playbook," in shown
    assert "=VA…" not in shown


@pytest.mark.slow
def test_output_in_a_pipe_keeps_whole_lines() -> None:
    result = pitcrew("diagnose", str(SEED))
    lines = result.stdout.decode().splitlines()
    assert lines[:2] == [
        "ROOT CAUSE: pod_oom_killed  Pod OOMKilled at its memory limit",
        f"    {SEED}/worker-pod.describe.txt  container ray-worker last terminated: "
        "OOMKilled (exit code 137)",
    ]
    assert "…" not in "\n".join(lines[:4])


@pytest.mark.slow
def test_no_failure_found_points_to_explain() -> None:
    result = pitcrew("diagnose", stdin=b"Job 'raysubmit_x' submitted successfully\n")
    assert (result.returncode, result.stdout.decode()) == (
        0,
        "No failure found: nothing in the input matches a playbook.\n"
        "No playbook matched. `pitcrew diagnose --explain` shows the lines that look like "
        "failures no playbook knows.\n",
    )


@pytest.mark.slow
def test_an_empty_input_says_it_is_empty(tmp_path: Path) -> None:
    empty = tmp_path / "driver.log"
    empty.write_bytes(b"")
    result = pitcrew("diagnose", str(empty))
    assert (result.returncode, result.stderr.decode()) == (
        2,
        f"pitcrew: {empty}: empty, nothing to diagnose\n",
    )
    piped = pitcrew("diagnose", stdin=b"")
    assert piped.stderr.decode() == "pitcrew: standard input: empty, nothing to diagnose\n"


GOOD = """\
id: team-disk-full
title: Scratch disk full
category: {category}
severity: {severity}
match:
  - name: no-space
    sources: [driver_log]
    regex: 'No space left on device'
diagnosis: The job's scratch disk is full.
examples:
  - name: a full disk
    input: "OSError: [Errno 28] No space left on device\\n"
    expect: {{match: true, primary: application_error}}
"""


def test_playbooks_check_reports_every_bad_file_with_did_you_mean(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GOOD.format(category="aplication_error", severity="error"))
    (tmp_path / "b.yaml").write_text(GOOD.format(category="application_error", severity="eror"))
    result = pitcrew("playbooks", "check", str(tmp_path))
    assert (result.returncode, result.stderr.decode()) == (
        2,
        f"pitcrew: {tmp_path / 'a.yaml'}:3: category: 'aplication_error' is not one of the "
        "allowed values; did you mean 'application_error'?\n"
        f"pitcrew: {tmp_path / 'b.yaml'}:4: severity: 'eror' is not one of the allowed "
        "values; did you mean 'error'?\n",
    )


@pytest.mark.slow  # two processes each render every template against its examples
def test_playbooks_check_of_the_built_in_directory_reads_it_once(tmp_path: Path) -> None:
    """Checked by hand, or named again through a symlink, the shipped playbooks are
    not reported as redefining themselves."""
    builtin = Path(__file__).resolve().parents[2] / "playbooks"
    (tmp_path / "link").symlink_to(builtin)
    count = len(playbook_files(builtin))
    for directory in (builtin, tmp_path / "link"):
        result = pitcrew("playbooks", "check", str(directory))
        assert (result.returncode, result.stdout.decode(), result.stderr.decode()) == (
            0,
            f"{directory}: {count} playbooks OK\n",
            "",
        )


IMAGE_PULL = """\
LAST SEEN   TYPE      REASON    OBJECT                                      MESSAGE
2m          Warning   Failed    pod/llama-sft-raycluster-p8d2m-head-xk2lq   Error: ErrImagePull
1m          Warning   Failed    pod/llama-sft-raycluster-p8d2m-head-xk2lq   Error: ImagePullBackOff
"""


def test_files_of_unrelated_workloads_in_one_directory_are_diagnosed_apart(
    tmp_path: Path,
) -> None:
    for path in SEED.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    (tmp_path / "sft-events.txt").write_text(IMAGE_PULL)
    result = pitcrew("diagnose", "--format", "json", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode() == (
        "pitcrew: these inputs are 2 unrelated workloads, diagnosed apart\n"
    )
    seed, sft = (json.loads(line) for line in result.stdout.decode().splitlines())
    assert (seed["primary"], seed["inputs"]) == (
        "pod_oom_killed",
        [str(tmp_path / p.name) for p in sorted(SEED.iterdir())],
    )
    assert "image_pull_backoff" not in seed["secondary"]
    assert (sft["primary"], sft["secondary"], sft["inputs"]) == (
        "image_pull_backoff",
        [],
        [str(tmp_path / "sft-events.txt")],
    )


def test_the_seeds_files_are_one_workload() -> None:
    result = pitcrew("diagnose", "--format", "json", str(SEED))
    assert result.stderr == b""
    assert "inputs" not in json.loads(result.stdout)
