"""The alert tests' real parts: `pitcrew run` in Slack's HTTP mode against the Slack
emulator, its Alertmanager receiver on; Debian's Alertmanager whose webhook receiver
is that daemon (`tests/support/alertmanager.py`, installed by `make alertmanager`);
and, for a rule that really fires, Debian's Prometheus scraping a target whose series
the test sets. Each is stopped by its pid at teardown."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.adapters.prometheus.local import LocalPrometheus
from tests.e2e.slack.conftest import SECRET, emulator  # noqa: F401  (the Slack emulator)
from tests.support.alertmanager import LocalAlertmanager, ScrapeTarget, prometheus_config
from tests.support.daemon_process import Daemon
from tests.support.slack_emulator import BOT_TOKEN, SlackEmulator

TOKEN = "am-e2e-4f1c0a52"
APPROVER = "U0ALICE"

# A rule over kube-state-metrics' last termination reason, as teams write one (kube-prometheus
# ships none for OOM kills, v0.18.0).
RULES = """\
groups:
  - name: pitcrew-e2e
    rules:
      - alert: KubeContainerOOMKilled
        expr: kube_pod_container_status_last_terminated_reason{reason="OOMKilled"} == 1
        labels: {severity: warning}
        annotations:
          summary: 'Container {{ $labels.container }} was OOMKilled.'
          description: 'Pod {{ $labels.namespace }}/{{ $labels.pod }} ({{ $labels.container }}) was OOMKilled.'
"""


def write_config(tmp_path: Path, slack: SlackEmulator) -> Path:
    path = tmp_path / "pitcrew.yaml"
    path.write_text(
        f"""\
store: {{path: {tmp_path / "state.db"}}}
http: {{host: 127.0.0.1, port: 0}}
alertmanager: {{enabled: true}}
chat:
  kind: slack
  slack: {{socket_mode: false, api_url: "{slack.api_url}", channel_interval: 0}}
notify: {{group_wait: 2s, group_interval: 1s, default_channel: pitcrew}}
approvals:
  approvers: [{{users: ["{APPROVER}"]}}]
actions:
  executors: {{k8s.bump_memory: echo, k8s.cordon_node: echo, kuberay.recreate_rayjob: echo}}
  echo: {{record: {tmp_path / "echo.log"}}}
scheduler: {{tick: 200ms, approved: 200ms, outbox: 1s, expiry: 1s}}
"""
    )
    return path


@dataclass
class Receiver:
    pitcrew: Daemon
    alertmanager: LocalAlertmanager
    slack: SlackEmulator


@pytest.fixture
def receiver(
    tmp_path: Path,
    emulator: SlackEmulator,  # noqa: F811
    daemons: list[Daemon],
) -> Iterator[Receiver]:
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "PITCREW_ALERTMANAGER_TOKEN": TOKEN,
    }
    pitcrew = Daemon(tmp_path, "daemon", env=env, config=write_config(tmp_path, emulator))
    daemons.append(pitcrew)
    pitcrew.ready()
    alertmanager = LocalAlertmanager(f"{pitcrew.url}/alertmanager", TOKEN)
    alertmanager.start()
    pid = alertmanager.pid
    try:
        yield Receiver(pitcrew, alertmanager, emulator)
    finally:
        alertmanager.stop()
        assert pitcrew.stop() == 0, pitcrew.log()[-3000:]
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"alertmanager {pid} survived"


@dataclass
class Rules:
    target: ScrapeTarget
    prometheus: LocalPrometheus


@pytest.fixture
def rules(receiver: Receiver) -> Iterator[Rules]:
    """Prometheus evaluating RULES every second over the series the test puts on `target`,
    sending what fires to the receiver's Alertmanager."""
    target = ScrapeTarget().start()
    config = prometheus_config(target.address, f"127.0.0.1:{receiver.alertmanager.port}")
    prometheus = LocalPrometheus(config=config, files={"rules.yml": RULES})
    prometheus.start()
    try:
        yield Rules(target, prometheus)
    finally:
        prometheus.stop()
        target.stop()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
