"""Fixtures for the Slack chat's tests.

The strategy: the real `slack_sdk` WebClient and the real Bolt App talk to a local
Slack Web API emulator (`emulator.py`) over loopback HTTP, clicks and commands
arrive as correctly signed HTTP requests at the daemon's real HTTP server (HTTP
mode) or as envelopes from a local Socket Mode server (`socket_server.py`), and
the service behind the buttons is the daemon's real `bot.daemon.service.Service` on a
real SQLite store (with the `echo` executor, which runs nothing). What is
checked is what Slack would have received: the emulator's recorded payloads.
Time that matters (proposal expiry, rate-limit waits, channel pacing) runs on a
hand-driven clock, so no test sleeps for Slack's sake.
"""

from __future__ import annotations

import functools
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.signature import SignatureVerifier

from bot.adapters.echo.executor import EchoExecutor
from bot.adapters.files.playbooks import builtin_engine
from bot.adapters.http.server import HealthServer, Probes
from bot.adapters.slack.app import SlackConfig
from bot.adapters.slack.chat import SlackChat
from bot.adapters.store.store import Store
from bot.core.actions.approvals import reconcile
from bot.core.actions.policy import ApprovalPolicy, ApproverRule
from bot.core.diagnosis.engine import Engine
from bot.core.incidents.reports import build_report
from bot.core.inputs import InputPart
from bot.core.inputs.reader import read_stream
from bot.core.model import Incident, ObjectRef, Proposal, Report
from bot.daemon.executor import Registry
from bot.daemon.metrics import Metrics
from bot.daemon.service import Service
from tests.e2e.kubernetes.conftest import Emulator as KubeEmulator
from tests.support.slack_emulator import APP_TOKEN, BOT_TOKEN, TEAM_ID, SlackEmulator

SEED = Path(__file__).resolve().parents[3] / "examples" / "seed"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL = "C0PITCREW"
APPROVER, GROUP_MEMBER, STRANGER = "U0ALICE", "U0CAROL", "U0MALLORY"
SRE_GROUP = "S0SRE"
POLICY = ApprovalPolicy(
    approvers=(
        ApproverRule(users=(APPROVER,), namespaces=("ml-*",)),
        ApproverRule(groups=(SRE_GROUP,), actions=("k8s.*", "kuberay.*")),
    ),
    teams=(TEAM_ID,),
)


@dataclass
class FakeTime:
    """One hand-driven clock for the service (`now`), pacing and waits (`monotonic`)."""

    start: datetime = T0
    elapsed: float = 0.0
    slept: list[float] = field(default_factory=list)

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.elapsed)

    def monotonic(self) -> float:
        return 1000.0 + self.elapsed

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.elapsed += seconds

    def advance(self, seconds: float) -> None:
        self.elapsed += seconds


# -- the seed incident, diagnosed for real ---------------------------------------------


@functools.cache
def engine() -> Engine:
    return builtin_engine([])


def diagnose_seed(extra: dict[str, bytes] | None = None) -> Incident:
    """The incident of examples/seed/ (optionally with files replaced), from a real
    diagnosis by the built-in playbooks."""
    parts: list[InputPart] = []
    for path in sorted(SEED.iterdir()):
        data = (extra or {}).get(path.name, path.read_bytes())
        parts.extend(read_stream(BytesIO(data), str(path.relative_to(SEED.parent.parent))))
    diagnosis = engine().diagnose(parts)
    return Incident(
        id="inc-seed000001",
        key="/ml-train/RayJob/verl-ppo-qwen",
        opened_at=T0,
        updated_at=T0,
        diagnosis=diagnosis,
        workload=ObjectRef("RayJob", "verl-ppo-qwen", "ml-train"),
        cluster="gpu-prod",
        namespace="ml-train",
        ray_job_id="raysubmit_Qk8vXw2mT3nLp9Rb",
    )


@pytest.fixture(scope="session")
def seed_incident() -> Incident:
    return diagnose_seed()


@pytest.fixture(scope="session")
def seed_proposals(seed_incident: Incident) -> tuple[Proposal, ...]:
    return reconcile(seed_incident, (), T0)


@pytest.fixture(scope="session")
def seed_report(seed_incident: Incident, seed_proposals: tuple[Proposal, ...]) -> Report:
    return build_report(seed_incident, seed_proposals)


# -- Slack, emulated ----------------------------------------------------------------------


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    server = SlackEmulator().start()
    server.usergroups[SRE_GROUP] = [GROUP_MEMBER]
    yield server
    server.stop()


@pytest.fixture
def clock() -> FakeTime:
    return FakeTime()


def slack_config(emulator: SlackEmulator, **overrides: Any) -> SlackConfig:
    values: dict[str, Any] = {
        "bot_token": BOT_TOKEN,
        "app_token": APP_TOKEN,
        "signing_secret": SECRET,
        "socket_mode": False,
        "api_url": emulator.api_url,
        "policy": POLICY,
        "timeout": 5,
    }
    values.update(overrides)
    return SlackConfig(**values)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def make_chat(emulator: SlackEmulator, clock: FakeTime, metrics: Metrics) -> Iterator[Any]:
    made: list[SlackChat] = []

    def make(**overrides: Any) -> SlackChat:
        chat = SlackChat(
            slack_config(emulator, **overrides),
            metrics=metrics,
            clock=clock.now,
            monotonic=clock.monotonic,
            sleep=clock.sleep,
        )
        made.append(chat)
        return chat

    yield make
    for chat in made:
        chat.stop()


# -- the daemon's side: store, service, HTTP server --------------------------------------


@dataclass
class SeededService:
    """What the daemon would hold for the seed incident, without its threads: the store
    with the incident and its proposals, the real service over them, and the ids of the
    proposals it ran."""

    store: Store
    service: Service
    executed: list[str]
    incident: Incident
    proposal: Proposal


@pytest.fixture
def seeded(
    tmp_path: Path,
    metrics: Metrics,
    seed_incident: Incident,
    seed_proposals: tuple[Proposal, ...],
) -> Iterator[SeededService]:
    store = Store(tmp_path / "pitcrew.db")
    store.upsert_incident(seed_incident)
    for proposal in seed_proposals:
        store.create_proposal(proposal)
    executed: list[str] = []
    registry = Registry({p.action: EchoExecutor() for p in seed_proposals})
    service = Service(store, POLICY, registry, metrics=metrics, execute=executed.append)
    (bump,) = (p for p in seed_proposals if p.action == "k8s.bump_memory")
    yield SeededService(store, service, executed, seed_incident, bump)
    store.close()


@pytest.fixture(scope="session")
def http_server() -> Iterator[HealthServer]:
    """The daemon's HTTP server, shared: each test mounts its own `/slack/events`."""
    server = HealthServer("127.0.0.1", 0, Metrics(), Probes())
    server.start()
    yield server
    server.stop()


# -- signed requests ----------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def sign(body: str, *, secret: str = SECRET, timestamp: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature,
    }


def post(url: str, body: str, headers: dict[str, str]) -> Reply:
    request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return Reply(response.status, response.read())
    except urllib.error.HTTPError as error:
        return Reply(error.code, error.read())


def command_body(
    emulator: SlackEmulator,
    text: str,
    *,
    user: str = APPROVER,
    team: str = TEAM_ID,
    response: str = "cmd",
) -> dict[str, str]:
    return {
        "token": "legacy-unused",
        "team_id": team,
        "team_domain": "pitcrew-test",
        "channel_id": CHANNEL,
        "channel_name": "pitcrew",
        "user_id": user,
        "user_name": user.lower(),
        "command": "/pitcrew",
        "text": text,
        "api_app_id": "A0PITCREW",
        "is_enterprise_install": "false",
        "response_url": emulator.response_url(response),
        "trigger_id": "1337.42.abcd",
    }


def click_payload(
    emulator: SlackEmulator,
    action_id: str,
    value: str,
    *,
    ts: str,
    user: str = APPROVER,
    team: str = TEAM_ID,
    user_team: str | None = None,
) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "team": {"id": team, "domain": "pitcrew-test"},
        "user": {"id": user, "username": user.lower(), "team_id": user_team or team},
        "api_app_id": "A0PITCREW",
        "token": "legacy-unused",
        "container": {
            "type": "message",
            "message_ts": ts,
            "channel_id": CHANNEL,
            "is_ephemeral": False,
        },
        "trigger_id": "1337.42.abcd",
        "channel": {"id": CHANNEL, "name": "pitcrew"},
        "message": {"type": "message", "ts": ts, "text": "card"},
        "response_url": emulator.response_url("click"),
        "actions": [
            {
                "action_id": action_id,
                "block_id": "buttons.1.x",
                "text": {"type": "plain_text", "text": "Approve"},
                "value": value,
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def form(values: dict[str, str]) -> str:
    return urllib.parse.urlencode(values)


def payload_form(payload: dict[str, Any]) -> str:
    return "payload=" + urllib.parse.quote(json.dumps(payload))


@pytest.fixture
def kube() -> Iterator[KubeEmulator]:
    """kmock's Kubernetes emulator with the KubeRay CRDs, for the daemons that act on it."""
    emulator = KubeEmulator()
    emulator.install_kuberay()
    try:
        yield emulator
    finally:
        emulator.stop()
