"""The daemon's configuration, read as a specification: with no file everything has a
working default; every bad key is named as `file:line: field: reason`, all of them at
once; durations read the way people write them; tokens come only from the
environment or files it names, and are never printed."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.app.capture_wiring import bundle_limits
from bot.app.cli_app import app
from bot.app.settings.loading import ConfigError, load, render
from bot.core.durations import format_duration, parse_duration

TOKEN = "xoxb-1234-very-secret"
APP_TOKEN = "xapp-1-also-secret"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pitcrew.yaml"
    path.write_text(text)
    return path


def problems(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> list[str]:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load(path, env or {})
    return [p.replace(str(path), "F") for p in caught.value.problems]


def test_without_a_file_everything_has_a_working_default() -> None:
    loaded = load(None, {})
    assert loaded.chat_kind == "console"
    assert loaded.store.path == Path("pitcrew.db")
    assert (loaded.http.host, loaded.http.port) == ("127.0.0.1", 9464)
    assert loaded.approvals.ttl == timedelta(hours=1)
    assert loaded.correlation.window == timedelta(minutes=10)
    assert loaded.actions.executors == {}
    assert loaded.sources.enabled_kinds() == ()


def test_the_config_file_may_come_from_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, "store: {path: /var/lib/pitcrew/state.db}\n")
    loaded = load(None, {"PITCREW_CONFIG": str(path)})
    assert loaded.store.path == Path("/var/lib/pitcrew/state.db")
    assert loaded.origin == str(path)


def test_a_full_file_reuses_the_core_policy_models(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
store: {path: state.db, retention: 7d}
http: {host: 0.0.0.0, port: 9000}
chat: {kind: console}
correlation: {window: 5m, quiet_period: 1h}
notify:
  group_wait: 10s
  group_interval: 2m
  repeat_interval: 6h
  default_channel: ml-alerts
  routes:
    - {channel: team-a, namespaces: [team-a-*]}
approvals:
  approvers:
    - {users: [U123, "console:alice"], actions: ["k8s.*"]}
    - {groups: [S-SRE], namespaces: [prod-*]}
  two_approvers: [{namespaces: [prod-*]}]
  teams: [T0001]
  ttl: 30m
actions:
  executors: {"k8s.*": echo}
  bump_memory: {factor: 1.25, cap: 256Gi}
  gpu_pool: {label_value: NVIDIA-H100-80GB-HBM3}
  resubmit: {max_retries: 3}
sources:
  ray: [{name: local, address: "http://127.0.0.1:8265", poll_interval: 15s}]
  kubernetes: {enabled: false, namespaces: [ml-train]}
playbooks: {dirs: [./my-playbooks]}
scheduler: {tick: 500ms}
""",
    )
    loaded = load(path, {})
    assert loaded.store.retention == timedelta(days=7)
    assert loaded.notify.routes[0].channel == "team-a"
    assert loaded.approvals.two_approvers[0].namespaces == ("prod-*",)
    assert loaded.approvals.ttl == timedelta(minutes=30)
    assert loaded.actions.executor_for("k8s.delete_pod") == "echo"
    assert loaded.actions.executor_for("ray.stop_job") is None
    assert loaded.sources.ray[0].poll_interval == timedelta(seconds=15)
    assert loaded.scheduler.tick == timedelta(milliseconds=500)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("stor: {}\n", "F:1: stor: unknown key; did you mean 'store'?"),
        (
            "store:\n  retension: 3d\n",
            "F:2: store.retension: unknown key; did you mean 'retention'?",
        ),
        ("http:\n  port: 99999\n", "F:2: http.port: must be at most 65535, not 99999"),
        (
            "correlation:\n  window: 10 minutes\n",
            "F:2: correlation.window: expected a duration like 30s, 10m, 1h or 1h30m",
        ),
        (
            "correlation:\n  window: 1h\n  quiet_period: 5m\n",
            "F:1: correlation: quiet_period cannot be shorter than window",
        ),
        (
            "notify:\n  routes:\n    - channel: a\n    - namespaces: [x]\n",
            "F:4: notify.routes[1].channel: required",
        ),
        (
            "chat:\n  kind: teams\n",
            "F:2: chat.kind: must be 'auto', 'console' or 'slack', not 'teams'",
        ),
        (
            "approvals:\n  approvers:\n    - users: [U1]\n      actoins: [k8s.*]\n",
            "F:4: approvals.approvers[0].actoins: unknown key; did you mean 'actions'?",
        ),
        (
            "actions:\n  executors:\n    k8s.bump_memory: echo\n    k8s.bump-memory: echo\n",
            "F:4: actions.executors.k8s.bump-memory: 'k8s.bump-memory' names no action "
            "(known: k8s.add_shm, k8s.bump_memory, k8s.cordon_node, k8s.delete_pod, "
            "k8s.replace_worker_pods, k8s.reschedule_gpu_pool, k8s.scale_worker_group, "
            "kuberay.recreate_rayjob, "
            "ray.kill_actor, ray.resubmit_job, ray.stop_job)",
        ),
        (
            "actions:\n  bump_memory:\n    cap: lots\n",
            "F:3: actions.bump_memory.cap: not a memory quantity: 'lots'",
        ),
        ("sources:\n  ray:\n    - address: http://x\n", "F:3: sources.ray[0].name: required"),
        (
            "sources:\n  ray:\n    - {name: a}\n    - {name: a}\n",
            "F:2: sources.ray: source names must be unique: a",
        ),
        ("scheduler:\n  tick: 0s\n", "F:2: scheduler.tick: must be more than 0 seconds, not 0s"),
        (
            "store:\n  bundle_max_kib: 64\n  bundle_file_max_kib: 128\n",
            "F:1: store: bundle_file_max_kib (128) is more than bundle_max_kib (64): no file "
            "could be that large",
        ),
        (
            "store:\n  bundle_max_kib: 8\n",
            "F:2: store.bundle_max_kib: must be at least 16, not 8",
        ),
        (
            "store: [a, b]\n",
            "F:1: store: expected a mapping of settings, not a list",
        ),
        (
            "store: {path: x\n",
            "F:2: invalid YAML: while parsing a flow mapping, expected ',' or '}', but got '<stream end>'",
        ),
        ("- a\n- b\n", "F:1: the configuration must be a mapping of sections"),
        (
            "store:\n  path: a.db\nhttp: {port: 1}\nstore:\n  path: b.db\n",
            "F:4: invalid YAML: duplicate key 'store' (lines 1 and 4)",
        ),
        (
            "http:\n  port: 1\n  host: x\n  port: 2\n",
            "F:4: invalid YAML: duplicate key 'port' (lines 2 and 4)",
        ),
        (
            "cluster:\n  name: eu a\n",
            "F:2: cluster.name: 'eu a' is not a cluster name: up to 100 letters, digits and "
            "_ . : @ / -, starting with a letter or digit",
        ),
        (
            "sources:\n  kubernetes:\n    enabled: true\n    cluster: gpu-prod\n",
            "F:4: sources.kubernetes.cluster: moved to cluster.name",
        ),
        (
            "leader_election:\n  enabled: true\n",
            "F:1: (top level): leader_election.enabled needs a store its replicas share: "
            "store.url (PostgreSQL); the SQLite file is one daemon's",
        ),
        (
            "leader_election:\n  renew_deadline: 20s\n",
            "F:1: leader_election: the lease duration (15 s) must be longer than the renew "
            "deadline (20 s)",
        ),
    ],
)
def test_each_bad_key_is_named_with_its_line(tmp_path: Path, text: str, expected: str) -> None:
    assert problems(tmp_path, text) == [expected]


def test_every_problem_is_reported_at_once_in_line_order(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
store:
  retension: 3d
http:
  port: -1
notify:
  group_wait: soon
secrets:
  slack_bot_token: xoxb-in-a-file
""",
    )
    assert found == [
        "F:2: store.retension: unknown key; did you mean 'retention'?",
        "F:4: http.port: must be at least 0, not -1",
        "F:6: notify.group_wait: expected a duration like 30s, 10m, 1h or 1h30m",
        "F:7: secrets: tokens are read only from the environment (SLACK_BOT_TOKEN or "
        "SLACK_BOT_TOKEN_FILE, SLACK_APP_TOKEN or SLACK_APP_TOKEN_FILE, SLACK_SIGNING_SECRET "
        "or SLACK_SIGNING_SECRET_FILE, PITCREW_INGEST_TOKEN or PITCREW_INGEST_TOKEN_FILE, "
        "PITCREW_ALERTMANAGER_TOKEN or PITCREW_ALERTMANAGER_TOKEN_FILE, "
        "PITCREW_STORE_PASSWORD or PITCREW_STORE_PASSWORD_FILE)",
    ]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("10m", 600), ("1h30m", 5400), ("2d", 172800), ("500ms", 0.5), ("90", 90)],
)
def test_durations_read_the_way_people_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)
    assert parse_duration(format_duration(timedelta(seconds=seconds))) == timedelta(seconds=seconds)


def test_tokens_come_from_the_environment_or_files_and_are_never_printed(tmp_path: Path) -> None:
    token_file = tmp_path / "app-token"
    token_file.write_text(APP_TOKEN + "\n")
    env = {"SLACK_BOT_TOKEN": TOKEN, "SLACK_APP_TOKEN_FILE": str(token_file)}
    loaded = load(None, env)
    assert loaded.chat_kind == "slack"
    assert loaded.secrets.slack_bot_token is not None
    assert loaded.secrets.slack_bot_token.get_secret_value() == TOKEN
    assert loaded.secrets.slack_app_token is not None
    assert loaded.secrets.slack_app_token.get_secret_value() == APP_TOKEN
    shown = render(loaded) + repr(loaded) + str(loaded) + loaded.model_dump_json()
    assert TOKEN not in shown
    assert APP_TOKEN not in shown
    assert "SLACK_BOT_TOKEN: '**********'" in render(loaded)


def test_token_problems_name_the_variable_but_not_the_value(tmp_path: Path) -> None:
    env = {
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_BOT_TOKEN_FILE": str(tmp_path / "bot"),
        "SLACK_APP_TOKEN_FILE": str(tmp_path / "missing"),
    }
    with pytest.raises(ConfigError) as caught:
        load(None, env)
    assert caught.value.problems == [
        "environment: SLACK_BOT_TOKEN: set SLACK_BOT_TOKEN or SLACK_BOT_TOKEN_FILE, not both",
        f"environment: SLACK_APP_TOKEN_FILE: cannot read {tmp_path / 'missing'}: "
        "No such file or directory",
    ]
    assert TOKEN not in str(caught.value)


def test_the_slack_chat_needs_its_tokens(tmp_path: Path) -> None:
    assert problems(tmp_path, "chat:\n  kind: slack\n") == [
        "F:2: chat.kind: the Slack chat needs SLACK_BOT_TOKEN (or SLACK_BOT_TOKEN_FILE) and "
        "SLACK_APP_TOKEN (or SLACK_APP_TOKEN_FILE) in the environment"
    ]


def test_config_check_prints_each_problem_and_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path, "store:\n  retension: 3d\nhttp:\n  port: 99999\n")
    result = CliRunner().invoke(app, ["config", "check", str(path)], env={"SLACK_BOT_TOKEN": TOKEN})
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"{path}:2: store.retension: unknown key; did you mean 'retention'?",
        f"{path}:4: http.port: must be at most 65535, not 99999",
    ]
    assert TOKEN not in result.output


def test_config_check_names_an_unknown_executor_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "actions:\n  executors: {k8s.delete_pod: nosuchkind}\n")
    result = CliRunner().invoke(app, ["config", "check", str(path)], env={})
    assert result.exit_code == 2
    assert result.output == (
        f"{path}: actions.executors: unknown executor kind 'nosuchkind'\n"
        f"store: SQLite {tmp_path / 'pitcrew.db'}: no file yet (`pitcrew run` creates it)\n"
    )


def test_config_check_and_show_a_good_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "actions:\n  executors: {k8s.bump_memory: echo}\n")
    env = {"SLACK_BOT_TOKEN": TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}
    checked = CliRunner().invoke(app, ["config", "check", str(path)], env=env)
    assert (checked.exit_code, checked.output) == (
        0,
        f"store: SQLite {tmp_path / 'pitcrew.db'}: no file yet (`pitcrew run` creates it)\n"
        f"{path}: OK\n",
    )
    shown = CliRunner().invoke(app, ["config", "show", str(path)], env=env)
    assert shown.exit_code == 0
    assert "k8s.bump_memory: echo" in shown.output
    assert "window: 10m" in shown.output
    assert TOKEN not in shown.output
    assert APP_TOKEN not in shown.output
    assert "SLACK_APP_TOKEN: '**********'" in shown.output


def test_the_evidence_bundles_caps_are_settings(tmp_path: Path) -> None:
    default = load(None, {})
    assert bundle_limits(default) == (256 * 1024, 1024 * 1024)
    path = write(tmp_path, "store:\n  bundle_max_kib: 64\n  bundle_file_max_kib: 16\n")
    assert bundle_limits(load(path, {})) == (16 * 1024, 64 * 1024)
