"""`pitcrew run` for real: HTTP on loopback, real subprocesses, real signals.

Read as a specification: /healthz, /readyz and /metrics answer over HTTP; evidence
posted to /ingest becomes a card; SIGTERM stops the daemon cleanly with the outbox
flushed; and a daemon killed mid-flow and started again posts nothing twice, still
accepts the pending approval from `pitcrew approve ID` in another process, and runs
the approved action exactly once (the built-in `echo` executor records each run).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from bot.adapters.store.store import Store
from bot.app import factories
from bot.app import wiring as app
from bot.app.cli_app import app as cli_app
from bot.app.settings.loading import load
from bot.core.model import ActionResult, ProposalState
from tests.support.daemon import (
    DESCRIBE,
    DRIVER_LOG,
    SEED,
    WORKLOAD,
    RecordingChat,
    config,
    engine,
    http,
)
from tests.support.daemon_process import Daemon, cards, posts, wait_until
from tests.support.ledger import ledger_entry

ROOT = Path(__file__).resolve().parents[2]


# -- in process: the HTTP endpoints -----------------------------------------------------------


def test_healthz_readyz_and_metrics_answer_over_http(daemon: app.Daemon) -> None:
    base = f"http://127.0.0.1:{daemon.http.port}"
    status, body = http(f"{base}/healthz")
    assert status == 200
    assert json.loads(body) == {
        "checks": {"chat": True, "outbox": True, "pipeline": True},
        "ok": True,
    }
    status, body = http(f"{base}/readyz")
    assert status == 200
    assert json.loads(body)["checks"]["store"] is True

    describe = (SEED / DESCRIBE).read_bytes()
    status, body = http(f"{base}/ingest?origin=describe.txt", describe)
    assert (status, json.loads(body)) == (202, {"accepted": 6})
    chat = daemon.outbox._chat
    assert isinstance(chat, RecordingChat)
    wait_until(lambda: chat.kinds() == ["post"], what="the card")

    def exposed() -> str:
        text = http(f"{base}/metrics")[1].decode()
        delivered = 'pitcrew_notifications_total{kind="post",result="delivered"} 1.0'
        offered = 'pitcrew_proposals_total{state="offered"} 1.0'
        return text if offered in text and delivered in text else ""  # counted after the post

    text = wait_until(exposed, what="the proposal metric")
    chat.down = True  # a chat known to be down fails the liveness probe
    assert http(f"{base}/healthz")[0] == 503
    chat.down = False
    for line in (
        'pitcrew_signals_total{source="pod_status"} 2.0',
        'pitcrew_findings_total{category="pod_oom_killed"} 1.0',
        "pitcrew_incidents_opened_total 1.0",
        "pitcrew_incidents_open 1.0",
        'pitcrew_notifications_total{kind="post",result="delivered"} 1.0',
        "pitcrew_pipeline_lag_seconds_count 1.0",
        "pitcrew_chat_errors_total 0.0",
    ):
        assert line in text


@pytest.mark.parametrize(
    ("query", "body", "error"),
    [
        ("origin=x", b"   \n", "x: empty body"),
        ("workload=Pod/p1", b"log line\n", "workload 'Pod/p1': the kind must be one of"),
        ("origin=bin", b"\x00\x01", "bin: binary data, not text"),
    ],
)
def test_ingest_refuses_what_it_cannot_read(
    daemon: app.Daemon, query: str, body: bytes, error: str
) -> None:
    status, reply = http(f"http://127.0.0.1:{daemon.http.port}/ingest?{query}", body)
    assert status == 400
    assert json.loads(reply)["error"].startswith(error)


@dataclass
class FakeSource:
    name: str = "kubernetes"
    up: bool = False
    calls: list[str] = field(default_factory=list)

    def start(self) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")

    def healthy(self) -> bool:
        return self.up


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: nowhere, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: nobody, user: {token: none}}]
contexts: [{name: nowhere, context: {cluster: nowhere, user: nobody}}]
current-context: nowhere
"""


def test_readyz_waits_for_every_enabled_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = FakeSource()
    monkeypatch.setitem(
        factories.SOURCE_KINDS, "kubernetes", lambda settings, sink, marks: [source]
    )
    # The evidence capture beside the source reads this kubeconfig at start and connects
    # only when an incident opens: nothing listens at its server.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    path = config(
        tmp_path, kube=f"sources: {{kubernetes: {{enabled: true, kubeconfig: {kubeconfig}}}}}\n"
    )
    running = app.build(load(path, {}), chat=RecordingChat(), engine=engine())
    running.start()
    try:
        ready = f"http://127.0.0.1:{running.http.port}/readyz"
        status, body = http(ready)
        assert status == 503
        assert json.loads(body)["checks"]["source:kubernetes"] is False
        source.up = True
        assert http(ready)[0] == 200
        assert http(f"http://127.0.0.1:{running.http.port}/healthz")[0] == 200
    finally:
        running.stop()
    assert source.calls == ["start", "stop"]


# -- real processes: restart safety and clean shutdown -----------------------------------------


def pitcrew(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PITCREW_"))}
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
        check=False,
    )


def ingest(port: int, name: str, *extra: str) -> None:
    url = f"http://127.0.0.1:{port}/ingest"
    result = pitcrew("ingest", str(SEED / name), "--url", url, *extra)
    assert result.returncode == 0, result.stderr


def state(path: Path, read: Callable[[Store], Any]) -> Any:
    with Store(path) as store:
        return read(store)


@pytest.mark.slow
def test_a_daemon_killed_mid_flow_and_restarted_posts_nothing_twice_and_runs_once(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    cfg = config(tmp_path)
    db = tmp_path / "state.db"
    echo = tmp_path / "echo.log"

    first = Daemon(tmp_path, "first", config=cfg)
    daemons.append(first)
    port = first.ready()
    ingest(port, DRIVER_LOG, "--workload", WORKLOAD)
    wait_until(lambda: posts(first) == 1, what="the first card")
    ingest(port, DESCRIBE)
    offered = wait_until(
        lambda: state(db, lambda s: s.proposals_in_state(ProposalState.OFFERED)),
        what="the proposal",
    )
    (proposal,) = offered
    assert first.signal(signal.SIGKILL) == -signal.SIGKILL  # mid-flow: an update may be queued

    second = Daemon(tmp_path, "second", config=cfg)
    daemons.append(second)
    second.ready()
    wait_until(lambda: state(db, lambda s: s.pending_notifications() == 0), what="the outbox")
    time.sleep(0.6)  # a few ticks: anything wrongly re-posted would show by now
    assert posts(second) == 0
    assert posts(first) == 1

    approved = pitcrew("approve", proposal.id, "--as", "tester", "--config", str(cfg))
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.startswith("approved: k8s.bump_memory approved by console:tester")
    entry = wait_until(
        lambda: state(db, lambda s: ledger_entry(s, proposal.id)), what="the ledger entry"
    )
    wait_until(
        lambda: state(db, lambda s: ledger_entry(s, proposal.id).result) is ActionResult.SUCCEEDED,
        what="the action to finish",
    )
    wait_until(lambda: "applied and verified" in second.output(), what="the card's update")
    assert entry.approver == "console:tester"
    assert second.signal(signal.SIGTERM) == 0

    third = Daemon(tmp_path, "third", config=cfg)
    daemons.append(third)
    third.ready()
    time.sleep(0.6)
    assert posts(third) == 0
    assert third.signal(signal.SIGTERM) == 0

    assert [json.loads(line)["proposal"] for line in echo.read_text().splitlines()] == [proposal.id]
    assert state(db, lambda s: [e.proposal_id for e in s.recent_actions(10)]) == [proposal.id]
    again = pitcrew("approve", proposal.id, "--as", "tester", "--config", str(cfg))
    assert again.returncode == 1
    assert again.stdout == "already_decided: already applied\n"
    refs = {ref for p in (first, second, third) for ref, _ in cards(p)}
    assert len(refs) == 1  # one card, updated, across three daemons


@pytest.mark.slow
def test_sigterm_drains_the_queue_flushes_the_outbox_and_exits_0(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    cfg = config(tmp_path)
    daemon = Daemon(tmp_path, "daemon", config=cfg)
    daemons.append(daemon)
    port = daemon.ready()
    ingest(port, DESCRIBE)
    started = time.monotonic()
    assert daemon.signal(signal.SIGTERM) == 0
    assert time.monotonic() - started < 5
    assert posts(daemon) == 1
    assert state(tmp_path / "state.db", lambda s: s.pending_notifications()) == 0
    log = daemon.log()
    assert "received SIGTERM, stopping" in log
    assert log.rstrip().endswith("pitcrew stopped")
    assert all(re.match(r"\d{4}-\d\d-\d\d ", line) for line in log.splitlines())


def test_cli_commands_work_against_the_daemons_store(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    db = tmp_path / "state.db"

    def cli(*args: str) -> Result:
        return CliRunner().invoke(cli_app, [*args, "--config", str(cfg)], env={"USER": "tester"})

    missing = cli("incidents")
    assert missing.exit_code == 2
    assert "no pitcrew state here" in missing.output

    running = app.build(load(cfg, {}), chat=RecordingChat(), engine=engine())
    running.start()
    try:
        status, _ = http(
            f"http://127.0.0.1:{running.http.port}/ingest", (SEED / DESCRIBE).read_bytes()
        )
        assert status == 202
        wait_until(lambda: running.store.proposals_in_state(ProposalState.OFFERED), what="offer")
    finally:
        running.stop()
    (offered,) = state(db, lambda s: s.proposals_in_state(ProposalState.OFFERED))

    listed = cli("incidents", "ml-train")
    assert listed.exit_code == 0, listed.output
    assert "pod_oom_killed" in listed.output
    assert f"{offered.id}  k8s.bump_memory  offered" in listed.output
    assert listed.output.endswith("1 open incident\n")

    silenced = cli("silence", "playbook=pod-oom-killed", "2h", "known issue")
    assert silenced.exit_code == 0, silenced.output
    silence_id = silenced.output.split()[1]
    assert state(db, lambda s: s.silence(silence_id).author) == "console:tester"
    assert cli("unsilence", silence_id).exit_code == 0
    bad = cli("silence", "pod=x", "2h")
    assert bad.exit_code == 2
    assert "silence by category, incident, namespace, playbook, workload, not pod" in bad.output

    assert cli("reject", "p-nope").output == "not_found: no proposal p-nope\n"
    stranger = cli("approve", offered.id, "--as", "mallory")
    assert stranger.exit_code == 1
    assert stranger.output == (
        "refused: console:mallory is not an approver for k8s.bump_memory in ml-train (approvals.approvers)\n"
    )
    rejected = cli("reject", offered.id, "--reason", "not today")
    assert (rejected.exit_code, rejected.output) == (
        0,
        "rejected: k8s.bump_memory rejected by console:tester\n",
    )

    history = cli("history", "5")
    assert history.exit_code == 0
    assert "incidents:" in history.output
    status_out = cli("status").output
    assert "open incidents: 1" in status_out
    assert "executors: k8s.bump_memory" in status_out
