"""`/pitcrew bundle INCIDENT` writes the incident's evidence out in Slack: a signed
command to the daemon's HTTP server (the real Bolt app), the incident's bundles merged
into one tar.gz and uploaded with `files.uploadV2` (the real `slack_sdk` client, the
Slack Web API emulator) into the card's thread, or the channel the command came from when
the incident has no card, and the person told where it went."""

from __future__ import annotations

import dataclasses
import io
import tarfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.http.server import HealthServer
from bot.adapters.kuberay.capture import Bundle
from bot.adapters.slack.chat import SlackChat
from bot.adapters.store.store import Store
from bot.app.bundles import bundle_writer
from bot.core.actions.policy import ApprovalPolicy, ApproverRule
from bot.core.incidents.assessment import assessor
from bot.core.incidents.correlator import Correlator
from bot.core.incidents.notify import NotifyConfig
from bot.core.inputs.kuberay import rayjob_parts
from bot.daemon.budget import BudgetedClassifier
from bot.daemon.executor import Registry
from bot.daemon.feed import Context, observe
from bot.daemon.outbox import Backoff, Outbox
from bot.daemon.pipeline import Pipeline, PipelineConfig
from bot.daemon.service import Service
from tests.e2e.slack.conftest import CHANNEL, POLICY, TEAM_ID, command_body, form, post, sign
from tests.e2e.slack.test_bundle_upload import RAYJOB
from tests.support.daemon import NS, Clock, engine
from tests.support.faults import Measured
from tests.support.slack_emulator import SlackEmulator, Uploaded

pytestmark = pytest.mark.slack

AT = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)


def bundle_of(attempt: str) -> bytes:
    bundle = Bundle()
    bundle.add("driver.log", f"{attempt}: RayActorError: The actor died\n".encode(), 4096)
    return bundle.packed(1 << 20, f"pitcrew evidence bundle of RayJob {NS}/train ({attempt})")


def ask(emulator: SlackEmulator, url: str, text: str, name: str) -> str:
    body = form(command_body(emulator, text, response=name))
    assert post(url, body, sign(body)).status == 200
    path = f"/response/{name}"
    found = emulator.wait_for(
        lambda: [b for at, b in emulator.responses if at == path], timeout=10, what=path
    )
    answer: dict[str, Any] = found[-1]
    assert answer["response_type"] == "ephemeral"
    return "\n".join(b["text"]["text"] for b in answer["blocks"] if b["type"] == "section")


def names_in(shared: Uploaded) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(shared.data), mode="r:gz") as tar:
        return sorted(tar.getnames())


def test_the_bundle_command_uploads_the_incidents_bundles_where_it_is_asked_about(
    tmp_path: Path,
    emulator: SlackEmulator,
    make_chat: Callable[..., SlackChat],
    http_server: HealthServer,
) -> None:
    store = Store(tmp_path / "pitcrew.db")
    clock = Clock()
    chat = make_chat(socket_mode=False)
    pipeline = Pipeline(
        BudgetedClassifier(engine()),
        Correlator(assessor(engine().library)),
        store,
        clock,
        config=PipelineConfig(notify=NotifyConfig(default_channel=CHANNEL, group_wait=0)),
    )
    outbox = Outbox(store, chat, clock=clock, backoff=Backoff(jitter=0.0))
    pipeline.process(observe(rayjob_parts(RAYJOB), Context(namespace=NS)))
    outbox.deliver_due()
    (card,) = emulator.parents()
    (incident,) = store.open_incidents()
    for attempt in ("train-raycluster-try1", "train-raycluster-try2"):
        store.save_bundle(incident.id, f"{attempt}.tar.gz", bundle_of(attempt), AT)
    lone = dataclasses.replace(incident, id="inc-without-card", key=f"{NS}/rayjob/lone")
    store.upsert_incident(lone)  # an incident whose card was never posted
    store.save_bundle(lone.id, "lone.tar.gz", bundle_of("lone"), AT)
    service = Service(store, POLICY, Registry({}))
    chat.bind(service, http=http_server, bundle_writer=bundle_writer(store, tmp_path / "out"))
    chat.start()
    url = f"http://127.0.0.1:{http_server.port}/slack/events"
    try:
        answer = ask(emulator, url, f"bundle {incident.id}", "b1")
        (shared,) = emulator.shared_files()
        assert (shared.channel, shared.thread_ts) == (card.channel, card.ts)
        assert shared.filename == f"{incident.id}.tar.gz"
        size = f"{len(shared.data) / 1024:.1f} KiB"
        assert answer == (
            f":package: Uploaded `{incident.id}.tar.gz` (2 bundle(s), {size}) to the card's "
            f"thread in <#{card.channel}>."
        )
        assert shared.comment == (
            f"Evidence bundles of `{incident.id}` (2 bundle(s), {size}), asked for by <@U0ALICE>"
        )
        assert names_in(shared) == [
            "train-raycluster-try1/README.txt",
            "train-raycluster-try1/driver.log",
            "train-raycluster-try2/README.txt",
            "train-raycluster-try2/driver.log",
        ]

        answer = ask(emulator, url, "bundle inc-without-card", "b2")
        lone = emulator.shared_files()[-1]
        assert (lone.channel, lone.thread_ts) == (CHANNEL, None)
        size = f"{len(lone.data) / 1024:.1f} KiB"
        assert answer == (
            f":package: Uploaded `inc-without-card.tar.gz` (1 bundle(s), {size}) to <#{CHANNEL}>."
        )
        assert names_in(lone) == ["lone/README.txt", "lone/driver.log"]

        assert ask(emulator, url, "bundle inc-none", "b3") == (
            "Nothing uploaded: no incident inc-none."
        )
        assert len(emulator.shared_files()) == 2

        emulator.fail("files.getUploadURLExternal", status=200, error="missing_scope")
        refused = ask(emulator, url, "bundle inc-without-card", "b4").splitlines()
        assert (
            refused[0]
            == "*Evidence bundles of `inc-without-card`* (kept after the cluster is gone):"
        )
        assert refused[-1] == (
            "Could not upload `inc-without-card.tar.gz`: Slack refused files.uploadV2: "
            "missing_scope."
        )
        assert len(emulator.shared_files()) == 2
    finally:
        chat.stop()
        store.close()


OTHERS = ApprovalPolicy(
    approvers=(
        ApproverRule(users=("U0ALICE",), namespaces=("ml-*",)),
        ApproverRule(users=("U0BOB",), namespaces=("shop-*",)),
    ),
    silencers=(ApproverRule(users=("U0CAROL",), workloads=("ml-train/rayjob/other-*",)),),
    teams=(TEAM_ID,),
)


def test_only_who_the_evidence_policy_names_gets_the_bundle_and_every_ask_is_audited(
    tmp_path: Path,
    emulator: SlackEmulator,
    make_chat: Callable[..., SlackChat],
    http_server: HealthServer,
    measured: Measured,
) -> None:
    """Signed `/pitcrew bundle` commands: a user in no rule, an approver of other
    namespaces and a silencer of other workloads are refused, each refusal naming the
    rules it read; the approver in scope gets the upload; all four are in the audit."""
    store = Store(tmp_path / "pitcrew.db")
    chat = make_chat(socket_mode=False)
    pipeline = Pipeline(
        BudgetedClassifier(engine()),
        Correlator(assessor(engine().library)),
        store,
        Clock(),
        config=PipelineConfig(notify=NotifyConfig(default_channel=CHANNEL, group_wait=0)),
    )
    pipeline.process(observe(rayjob_parts(RAYJOB), Context(namespace=NS)))
    (incident,) = store.open_incidents()
    store.save_bundle(incident.id, "first.tar.gz", bundle_of("first"), AT)
    chat.bind(
        Service(store, OTHERS, Registry({})),
        http=http_server,
        bundle_writer=bundle_writer(store, tmp_path / "out"),
    )
    chat.start()
    url = f"http://127.0.0.1:{http_server.port}/slack/events"
    asks = {
        "U0MALLORY": (
            "Nothing uploaded: U0MALLORY may not fetch evidence: no rule of "
            "approvals.approvers or approvals.silencers names them."
        ),
        "U0BOB": (
            "Nothing uploaded: U0BOB may fetch evidence only in namespaces shop-* "
            f"(approvals.approvers[1]); {incident.id} is in namespace ml-train, workload "
            "ml-train/rayjob/train."
        ),
        "U0CAROL": (
            "Nothing uploaded: U0CAROL may fetch evidence only in workloads "
            f"ml-train/rayjob/other-* (approvals.silencers[0]); {incident.id} is in namespace "
            "ml-train, workload ml-train/rayjob/train."
        ),
    }
    try:
        for n, (user, refusal) in enumerate(asks.items()):
            body = form(
                command_body(emulator, f"bundle {incident.id}", user=user, response=f"r{n}")
            )
            assert post(url, body, sign(body)).status == 200
            path = f"/response/r{n}"
            found = emulator.wait_for(
                lambda path=path: [b for at, b in emulator.responses if at == path], 10, path
            )
            said = "\n".join(
                b["text"]["text"] for b in found[-1]["blocks"] if b["type"] == "section"
            )
            assert said == refusal
        uploads_refused = len(emulator.shared_files())
        answer = ask(emulator, url, f"bundle {incident.id}", "alice")
        assert answer.startswith(f":package: Uploaded `{incident.id}.tar.gz` (1 bundle(s), ")
        assert len(emulator.shared_files()) == 1
    finally:
        chat.stop()
    measured.bad_clicks_accepted(uploads_refused)
    audit = [(f.user, f.via, f.outcome, f.detail) for f in reversed(store.recent_fetches())]
    assert audit == [
        ("U0MALLORY", f"slack {CHANNEL}", "refused", asks["U0MALLORY"][18:-1]),
        ("U0BOB", f"slack {CHANNEL}", "refused", asks["U0BOB"][18:-1]),
        ("U0CAROL", f"slack {CHANNEL}", "refused", asks["U0CAROL"][18:-1]),
        ("U0ALICE", f"slack {CHANNEL}", "allowed", ""),
    ]
    store.close()
