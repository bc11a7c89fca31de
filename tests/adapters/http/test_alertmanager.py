"""`POST /alertmanager` takes Alertmanager's webhook the ways its `http_config` can send
it, each alert once, and refuses anything else with a 4xx naming the problem, counted
in `pitcrew_ingest_rejected_total{path, reason}`.

Real uvicorn on a loopback port, the store's real replay records (a SQLite file);
the intake behind the route is a recorder (it is specified in
tests/daemon/test_intake.py). The bodies are ones Debian's Alertmanager 0.25 sent
(tests/data/alertmanager/)."""

from __future__ import annotations

import base64
import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.adapters.http.alertmanager import PATH, Receiver
from bot.adapters.http.alertmanager import route as alertmanager_route
from bot.adapters.http.server import Credentials, HealthServer, Limits, Probes
from bot.adapters.store.store import Store
from bot.core.model import Signal
from bot.daemon.feed import Observation
from bot.daemon.metrics import Metrics

DATA = Path(__file__).resolve().parents[2] / "data" / "alertmanager"
CRASHLOOP = (DATA / "kube-pod-crashlooping.json").read_bytes()
RESOLVED = (DATA / "kube-pod-crashlooping-resolved.json").read_bytes()
XID = (DATA / "dcgm-xid.json").read_bytes()
BEARER = {"Authorization": "Bearer s3cret"}
QUEUE_FULL = "the pipeline's queue is full; retry later"


@dataclass
class Intake:
    """What the route queued; `full` refuses as a full queue does."""

    items: list[Observation] = field(default_factory=list)
    full: bool = False

    def accept(self, observation: Observation) -> str | None:
        if self.full:
            return QUEUE_FULL
        self.items.append(observation)
        return None

    def names(self) -> list[str]:
        return [p.reason for o in self.items for p in o.parts if isinstance(p, Signal)]


@dataclass
class Edge:
    server: HealthServer
    intake: Intake
    metrics: Metrics

    def post(
        self, body: bytes, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, object]]:
        url = f"http://127.0.0.1:{self.server.port}{PATH}"
        request = urllib.request.Request(url, data=body, headers=headers or {}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def rejected(self) -> dict[str, float]:
        text = self.metrics.exposition().decode()
        found = re.findall(
            r'pitcrew_ingest_rejected_total\{path="([^"]+)",reason="([^"]+)"\} (\S+)', text
        )
        return {f"{path} {reason}": float(n) for path, reason, n in found}


def start(
    tmp_path: Path, credentials: Credentials | None, open_to: tuple[str, ...] = ("127.0.0.0/8",)
) -> Edge:
    metrics, intake = Metrics(), Intake()
    server = HealthServer(
        "127.0.0.1", 0, metrics, Probes(), limits=Limits(body_timeout=2.0), open_to=open_to
    )
    store = Store(tmp_path / "state.db")
    route = alertmanager_route(intake, store, lambda: 1_800_000_000.0, Receiver())
    server.mount(PATH, route, private=True, credentials=credentials)
    server.start()
    return Edge(server, intake, metrics)


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[Edge]:
    running = start(tmp_path, Credentials("s3cret", "alertmanager"))
    yield running
    running.server.stop()


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_a_notification_with_the_bearer_token_is_taken_alert_by_alert(edge: Edge) -> None:
    assert edge.post(CRASHLOOP, BEARER) == (202, {"accepted": 1})
    assert edge.post(XID, basic("alertmanager", "s3cret")) == (202, {"accepted": 1})
    assert edge.intake.names() == ["KubePodCrashLooping", "GPUXidError"]
    assert edge.rejected() == {}


@pytest.mark.parametrize(
    ("headers", "status", "error", "reason"),
    [
        ({}, 403, "/alertmanager needs the credentials this daemon was given", "unauthenticated"),
        ({"Authorization": "Bearer wrong"}, 401,
         "/alertmanager: the credentials are not the ones this daemon was given", "bad_credentials"),
        (basic("alertmanager", "wrong"), 401,
         "/alertmanager: the credentials are not the ones this daemon was given", "bad_credentials"),
        (basic("someone", "s3cret"), 401,
         "/alertmanager: the credentials are not the ones this daemon was given", "bad_credentials"),
        ({"Authorization": "Basic !!!"}, 401,
         "/alertmanager: the credentials are not the ones this daemon was given", "bad_credentials"),
    ],
)  # fmt: skip
def test_without_its_credentials_nothing_is_taken_even_from_loopback(
    edge: Edge, headers: dict[str, str], status: int, error: str, reason: str
) -> None:
    assert edge.post(CRASHLOOP, headers) == (status, {"error": error})
    assert edge.intake.items == []
    assert edge.rejected() == {f"/alertmanager {reason}": 1.0}


def test_basic_auth_is_refused_when_no_user_is_configured(tmp_path: Path) -> None:
    running = start(tmp_path, Credentials("s3cret"))
    try:
        assert running.post(CRASHLOOP, basic("", "s3cret"))[0] == 401
        assert running.post(CRASHLOOP, BEARER) == (202, {"accepted": 1})
    finally:
        running.server.stop()


@pytest.mark.parametrize(
    ("open_to", "answer"),
    [
        (("127.0.0.0/8",), (202, {"accepted": 1})),
        ((), (403, {"error": "/alertmanager is for loopback clients or a bearer token"})),
    ],
    ids=["loopback", "beyond-loopback"],
)
def test_without_a_token_only_loopback_clients_are_answered(
    tmp_path: Path, open_to: tuple[str, ...], answer: tuple[int, dict[str, object]]
) -> None:
    running = start(tmp_path, None, open_to=open_to)
    try:
        assert running.post(CRASHLOOP) == answer
    finally:
        running.server.stop()


def test_a_body_over_the_cap_is_refused_before_it_is_read(edge: Edge) -> None:
    """Its head declares 2 MiB; the answer comes before any of the body is sent."""
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret\r\n"
        f"Content-Length: {2 << 20}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", edge.server.port), timeout=10) as sock:
        sock.sendall(head.encode())
        reply = b""
        while not reply.rstrip().endswith(b"}") and (chunk := sock.recv(65536)):
            reply += chunk
    status, _, rest = reply.partition(b"\r\n")
    assert (int(status.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])) == (
        413,
        {"error": f"the body is over {1 << 20} bytes"},
    )
    assert edge.intake.items == []
    assert edge.rejected() == {"/alertmanager too_large": 1.0}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", "the body is not JSON: Expecting value: line 1 column 1 (char 0)"),
        (CRASHLOOP.replace(b'"version":"4"', b'"version":"5"'),
         "version '5': this receiver reads Alertmanager's webhook version 4"),
        (CRASHLOOP.replace(b'"status":"firing","labels"', b'"status":"pending","labels"'),
         "alerts[0].status: expected firing or resolved, not 'pending'"),
    ],
)  # fmt: skip
def test_a_body_that_is_not_alertmanagers_is_refused_naming_the_problem(
    edge: Edge, body: bytes, error: str
) -> None:
    assert edge.post(body, BEARER) == (400, {"error": error})
    assert edge.intake.items == []
    assert edge.rejected() == {"/alertmanager malformed": 1.0}


def test_a_replayed_notification_is_refused_and_nothing_is_queued_twice(edge: Edge) -> None:
    assert edge.post(CRASHLOOP, BEARER)[0] == 202
    assert edge.post(CRASHLOOP, BEARER) == (
        409,
        {
            "error": "replayed: every alert of this notification was taken before (same "
            "fingerprint, startsAt and status): KubePodCrashLooping firing since "
            "2026-12-06T06:00:03.725592+00:00 (fingerprint a5c4f5dd964db575)"
        },
    )
    assert edge.post(RESOLVED, BEARER) == (202, {"accepted": 1})  # its resolution is news
    assert edge.intake.names() == ["KubePodCrashLooping", "KubePodCrashLooping"]
    assert edge.rejected() == {"/alertmanager replayed": 1.0}


def test_a_notification_with_some_new_alerts_takes_those(edge: Edge) -> None:
    assert edge.post(CRASHLOOP, BEARER)[0] == 202
    both = json.loads(CRASHLOOP)
    both["alerts"] += json.loads(XID)["alerts"]
    assert edge.post(json.dumps(both).encode(), BEARER) == (
        202,
        {"accepted": 1, "notes": ["1 alerts were taken before and were left out"]},
    )
    assert edge.intake.names() == ["KubePodCrashLooping", "GPUXidError"]


def test_an_alert_the_full_queue_refused_is_taken_when_alertmanager_retries(edge: Edge) -> None:
    edge.intake.full = True
    assert edge.post(CRASHLOOP, BEARER) == (503, {"accepted": 0, "error": QUEUE_FULL})
    edge.intake.full = False
    assert edge.post(CRASHLOOP, BEARER) == (202, {"accepted": 1})
    assert edge.intake.names() == ["KubePodCrashLooping"]
    assert edge.rejected() == {"/alertmanager unavailable": 1.0}
