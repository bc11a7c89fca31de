"""HTTP mode end to end: correctly signed slash commands and button clicks over real
HTTP to `/slack/events` on the daemon's HTTP server, the real Bolt app, the real
service and store behind it, and the emulator recording what Slack was told.

Covered: every slash command answered (unknown or malformed input gets the
usage), acks well inside three seconds; an approver's click approves and
executes once however often it is clicked; a non-approver, a click from another
workspace, an expired proposal: an ephemeral explanation, a counted refusal,
nothing executed; forged, stale and replayed requests refused before Bolt runs
a listener."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.adapters.http.server import HealthServer
from bot.adapters.slack import blocks
from bot.adapters.slack.chat import SlackChat
from bot.adapters.slack.commands import DiagnoseTarget
from bot.core.diagnosis.unmatched import FailureLine
from bot.core.model import ProposalState
from bot.daemon.metrics import Metrics
from tests.e2e.slack.conftest import (
    APPROVER,
    GROUP_MEMBER,
    STRANGER,
    FakeTime,
    Reply,
    SeededService,
    click_payload,
    command_body,
    form,
    payload_form,
    post,
    sign,
)
from tests.support.faults import Measured
from tests.support.slack_emulator import SlackEmulator

pytestmark = pytest.mark.slack


@dataclass
class Http:
    url: str
    chat: SlackChat
    emulator: SlackEmulator
    seeded: SeededService
    metrics: Metrics
    ts: str
    diagnosed: list[tuple[DiagnoseTarget, str]]

    def send(self, body: str, **signing: Any) -> Reply:
        started = time.monotonic()
        reply = post(self.url, body, sign(body, **signing))
        assert time.monotonic() - started < 3.0, "not acked within Slack's 3 seconds"
        return reply

    def command(self, text: str, **kwargs: Any) -> Reply:
        return self.send(form(command_body(self.emulator, text, **kwargs)))

    def click(self, action_id: str, value: str | None = None, **kwargs: Any) -> Reply:
        value = self.seeded.proposal.id if value is None else value
        payload = click_payload(self.emulator, action_id, value, ts=self.ts, **kwargs)
        return self.send(payload_form(payload))

    def ephemerals(self, n: int) -> list[dict[str, Any]]:
        return [c.params for c in self.emulator.wait_calls("chat.postEphemeral", n)]

    def response(self, name: str) -> dict[str, Any]:
        path = f"/response/{name}"
        found = self.emulator.wait_for(
            lambda: [body for at, body in self.emulator.responses if at == path],
            what=f"a response at {path}",
        )
        body: dict[str, Any] = found[-1]
        return body

    def refused(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "pitcrew_refused_approvals_total", {"reason": reason}
        )
        return value or 0.0


@pytest.fixture
def http(
    make_chat: Any,
    emulator: SlackEmulator,
    seeded: SeededService,
    http_server: HealthServer,
    metrics: Metrics,
    seed_report: Any,
) -> Http:
    diagnosed: list[tuple[DiagnoseTarget, str]] = []

    def diagnoser(target: DiagnoseTarget, user: str) -> str:
        diagnosed.append((target, user))
        return "Root cause: pod_oom_killed <!channel>"

    chat: SlackChat = make_chat(socket_mode=False)
    chat.bind(seeded.service, http=http_server, diagnoser=diagnoser)
    chat.start()
    ref = chat.post("pitcrew", seed_report)
    url = f"http://127.0.0.1:{http_server.port}/slack/events"
    return Http(url, chat, emulator, seeded, metrics, ref.split(":")[1], diagnosed)


def text_of(message: dict[str, Any]) -> str:
    return "\n".join(b["text"]["text"] for b in message["blocks"] if b["type"] == "section")


# -- slash commands -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", ""),
        ("help", ""),
        ("frobnicate now", "Unknown command `frobnicate`"),
        ("<!channel>", "Unknown command `&lt;!channel&gt;`"),
        ("incidents not/a/namespace", "at most one namespace"),
        ("diagnose", "`diagnose` takes one"),
        ("diagnose ml-train/deployment/x", "`diagnose` takes one"),
        ("silence pod-oom-killed", "needs a playbook or incident id and a duration"),
        ("silence pod-oom-killed forever", "is not a duration"),
        ("silence pod-oom-killed 90d", "is not a duration"),
        ("unsilence", "takes one silence id"),
        ("history 0", "a number from 1 to 50"),
        ("status please", "takes no arguments"),
    ],
)
def test_help_unknown_and_malformed_commands_get_the_usage(
    http: Http, text: str, problem: str
) -> None:
    reply = http.command(text)
    assert reply.status == 200
    answer = reply.json()
    assert answer["response_type"] == "ephemeral"
    shown = text_of(answer)
    assert "/pitcrew incidents [namespace]" in shown
    assert problem in shown
    assert http.emulator.responses == []  # nothing else was done


def test_each_command_is_answered(http: Http) -> None:
    store = http.seeded.store

    assert http.command("status", response="status").status == 200
    assert "*Open incidents:* 1" in text_of(http.response("status"))

    http.command("incidents", response="incidents")
    listed = text_of(http.response("incidents"))
    assert "inc-seed000001" in listed
    assert "1 awaiting approval" in listed  # the plan: k8s.bump_memory, then the rerun
    http.command("incidents other-ns", response="none")
    assert "No open incidents in other-ns" in text_of(http.response("none"))

    http.command("history 5", response="history")
    assert "*Recent incidents:*" in text_of(http.response("history"))

    http.command("silence pod-oom-killed 2h flaky node", response="unscoped")
    assert text_of(http.response("unscoped")) == (
        f"Nothing changed: {APPROVER} may silence only in namespaces ml-*; this silence is "
        "not limited to a namespace."
    )
    http.command("silence inc-seed000001 2h flaky node", response="silence")
    said = text_of(http.response("silence"))
    (active,) = store.active_silences(http.chat.app.clock())
    assert active.matchers == {"incident": "inc-seed000001"}
    assert active.author == APPROVER
    assert f"/pitcrew unsilence {active.id}" in said
    assert "flaky node" in said

    http.command(f"unsilence {active.id}", response="stranger", user=STRANGER)
    assert text_of(http.response("stranger")) == (
        f"Nothing changed: {STRANGER} may not end silence {active.id}: only its creator "
        f"{APPROVER} may, or a silencer or an approver whose scope covers namespace ml-train; "
        "workload ml-train/rayjob/verl-ppo-qwen; actions k8s.bump_memory, "
        "kuberay.recreate_rayjob."
    )
    http.command(f"unsilence {active.id}", response="unsilence")
    assert "ended" in text_of(http.response("unsilence"))
    assert store.active_silences(http.chat.app.clock()) == ()

    reply = http.command("diagnose ml-train/rayjob/verl-ppo-qwen", response="diagnose")
    assert "Diagnosing" in text_of(reply.json())  # acked at once
    answer = text_of(http.response("diagnose"))
    assert "pod_oom_killed &lt;!channel&gt;" in answer
    assert http.diagnosed == [(DiagnoseTarget("rayjob", "verl-ppo-qwen", "ml-train"), APPROVER)]


def test_unmatched_lists_the_failures_no_playbook_knows_by_shape(http: Http) -> None:
    http.command("unmatched", response="none")
    assert text_of(http.response("none")) == (
        "No unmatched failures: every failure seen matched a playbook."
    )
    seen = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
    lines = [
        FailureLine("FooBarError: shard 17 of job 4411 could not be opened", 3, "driver.log"),
        FailureLine("FooBarError: shard 3 of job 982 could not be opened", 9, "driver.log"),
        FailureLine("ERROR <!channel> quota sync failed after 5 retries", 1, "worker.log"),
    ]
    http.seeded.store.record_unmatched(lines[:2], seen)
    http.seeded.store.record_unmatched(lines, seen + timedelta(minutes=5))

    http.command("unmatched 5", response="shapes")
    assert text_of(http.response("shapes")) == (
        "*Failures no playbook knows (by shape):*\n"
        "• ×4 (2026-11-03 10:00 to 2026-11-03 10:05) "
        "`FooBarError: shard &lt;n&gt; of job &lt;n&gt; could not be opened`\n"
        "• ×1 (2026-11-03 10:05 to 2026-11-03 10:05) "
        "`ERROR &lt;!channel&gt; quota sync failed after &lt;n&gt; retries`"  # never a mention
    )


def test_commands_from_another_workspace_are_refused(http: Http) -> None:
    reply = http.command("status", team="T0OTHER", response="foreign")
    assert "not accepted" in text_of(reply.json())
    time.sleep(0.2)
    assert http.emulator.responses == []


# -- approvals ----------------------------------------------------------------------------


def test_an_approvers_click_approves_and_executes_once(http: Http, measured: Measured) -> None:
    assert http.click(blocks.APPROVE_ACTION).status == 200
    (told,) = http.ephemerals(1)
    assert told["user"] == APPROVER
    assert told["channel"] == "C0PITCREW"
    assert "approved by U0ALICE" in told["text"]
    assert http.seeded.executed == [http.seeded.proposal.id]

    http.click(blocks.APPROVE_ACTION)  # the double click
    second = http.ephemerals(2)[1]
    assert "Nothing changed" in second["text"]
    assert "already approved by U0ALICE" in second["text"]
    measured.double_runs(executions=len(http.seeded.executed), approved=1)
    assert http.seeded.executed == [http.seeded.proposal.id]
    stored = http.seeded.store.get_proposal(http.seeded.proposal.id)
    assert stored is not None
    assert stored.state is ProposalState.APPROVED
    assert http.emulator.parents()[0].updates == 0  # the card is the pipeline's to update


def test_racing_clicks_execute_once(http: Http, measured: Measured) -> None:
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        replies = list(pool.map(lambda _: http.click(blocks.APPROVE_ACTION), range(6)))
    assert {r.status for r in replies} == {200}
    told = http.ephemerals(6)
    measured.double_runs(executions=len(http.seeded.executed), approved=1)
    assert sum("approved by U0ALICE; it runs now" in t["text"] for t in told) == 1
    assert http.seeded.executed == [http.seeded.proposal.id]


def test_a_group_member_may_approve_and_groups_are_cached(http: Http) -> None:
    http.click(blocks.REJECT_ACTION, user=GROUP_MEMBER, value="p-unknown01")
    http.click(blocks.APPROVE_ACTION, user=GROUP_MEMBER)
    told = [t["text"] for t in http.ephemerals(2)]  # handled concurrently, in any order
    assert sum("approved by U0CAROL; it runs now" in t for t in told) == 1
    assert sum("Nothing changed: no proposal p-unknown01" in t for t in told) == 1
    assert http.seeded.executed == [http.seeded.proposal.id]
    (lookup,) = http.emulator.calls_to("usergroups.users.list")
    assert lookup.params["usergroup"] == "S0SRE"


def test_a_non_approver_is_refused_and_counted(http: Http, measured: Measured) -> None:
    http.click(blocks.APPROVE_ACTION, user=STRANGER)
    (told,) = http.ephemerals(1)
    assert told["user"] == STRANGER
    assert (
        "U0MALLORY is not an approver for k8s.bump_memory in ml-train (approvals.approvers)"
        in told["text"]
    )
    assert http.refused("refused") == 1
    assert http.seeded.executed == []
    http.click(blocks.REJECT_ACTION, user=STRANGER)
    assert "not allowed to reject" in http.ephemerals(2)[1]["text"]
    stored = http.seeded.store.get_proposal(http.seeded.proposal.id)
    assert stored is not None
    moved = stored.state is not ProposalState.OFFERED
    measured.bad_clicks_accepted(len(http.seeded.executed) + moved)
    assert stored.state is ProposalState.OFFERED


@pytest.mark.parametrize(
    ("team", "user_team"), [("T0OTHER", "T0OTHER"), ("T0PITCREW", "T0EXTERNAL")]
)
def test_clicks_from_another_workspace_are_refused_and_counted(
    http: Http, team: str, user_team: str, measured: Measured
) -> None:
    http.click(blocks.APPROVE_ACTION, team=team, user_team=user_team)
    (told,) = http.ephemerals(1)
    measured.bad_clicks_accepted(len(http.seeded.executed))
    assert "are not accepted" in told["text"]
    assert http.refused("workspace") == 1
    assert http.seeded.executed == []
    assert http.emulator.calls_to("usergroups.users.list") == []


def test_an_expired_proposal_is_explained_and_nothing_runs(
    http: Http, clock: FakeTime, measured: Measured
) -> None:
    clock.advance(2 * 3600)
    http.click(blocks.APPROVE_ACTION)
    (told,) = http.ephemerals(1)
    measured.bad_clicks_accepted(len(http.seeded.executed))
    assert "Nothing changed: expired at" in told["text"]
    assert http.seeded.executed == []
    stored = http.seeded.store.get_proposal(http.seeded.proposal.id)
    assert stored is not None
    assert stored.state is ProposalState.EXPIRED
    assert http.refused("expired") == 1


def test_a_rejected_proposal_cannot_be_approved(http: Http, measured: Measured) -> None:
    http.click(blocks.REJECT_ACTION)
    http.ephemerals(1)
    http.click(blocks.APPROVE_ACTION)
    rejected, approved = http.ephemerals(2)
    measured.bad_clicks_accepted(len(http.seeded.executed))
    assert ":no_entry_sign:" in rejected["text"]
    assert "Nothing changed: rejected by U0ALICE" in approved["text"]
    assert http.seeded.executed == []


def test_the_silence_button_mutes_the_cards_workload(http: Http) -> None:
    http.click(blocks.SILENCE_ACTION, value="workload:ml-train/rayjob/verl-ppo-qwen")
    (told,) = http.ephemerals(1)
    (active,) = http.seeded.store.active_silences(http.chat.app.clock())
    assert active.matchers == {"workload": "ml-train/rayjob/verl-ppo-qwen"}
    assert active.ends_at - active.starts_at == http.chat.config.silence_for
    assert f"unsilence {active.id}" in told["text"]
    http.click(blocks.SILENCE_ACTION, value="workload:*")  # not a value pitcrew makes
    assert "Nothing changed" in http.ephemerals(2)[1]["text"]
    assert http.refused("malformed") == 1


# -- forged, stale, replayed --------------------------------------------------------------


def test_forged_stale_and_replayed_requests_are_refused(http: Http, measured: Measured) -> None:
    body = payload_form(
        click_payload(http.emulator, blocks.APPROVE_ACTION, http.seeded.proposal.id, ts=http.ts)
    )
    forged = [
        http.send(body, secret="not-the-secret").status,
        http.send(body, timestamp=int(time.time()) - 600).status,
        post(http.url, body, {"Content-Type": "application/x-www-form-urlencoded"}).status,
    ]
    time.sleep(0.2)
    measured.bad_clicks_accepted(len(http.seeded.executed) + forged.count(200))
    assert forged == [401, 401, 401]
    assert http.emulator.calls_to("chat.postEphemeral") == []
    assert http.seeded.executed == []

    headers = sign(body)
    assert post(http.url, body, headers).status == 200
    replayed = post(http.url, body, headers).status  # the same signed request again
    http.ephemerals(1)
    time.sleep(0.2)
    measured.bad_clicks_accepted(int(replayed == 200))
    measured.double_runs(executions=len(http.seeded.executed), approved=1)
    assert replayed == 401
    assert len(http.emulator.calls_to("chat.postEphemeral")) == 1
    assert http.seeded.executed == [http.seeded.proposal.id]


def test_fifty_simultaneous_clicks_are_all_answered_and_run_once(
    http: Http, measured: Measured
) -> None:
    barrier = threading.Barrier(50)

    def click(n: int) -> int:
        payload = click_payload(
            http.emulator, blocks.APPROVE_ACTION, http.seeded.proposal.id, ts=http.ts
        )
        payload["trigger_id"] = f"1337.42.{n}"  # fifty distinct clicks, not one replayed
        body = payload_form(payload)
        headers = sign(body)
        barrier.wait(timeout=10)
        return post(http.url, body, headers).status

    with concurrent.futures.ThreadPoolExecutor(50) as pool:
        statuses = list(pool.map(click, range(50)))
    assert statuses == [200] * 50
    told = http.ephemerals(50)
    measured.double_runs(executions=len(http.seeded.executed), approved=1)
    assert sum("approved by U0ALICE; it runs now" in t["text"] for t in told) == 1
    assert http.seeded.executed == [http.seeded.proposal.id]


# -- malformed requests: each its own 4xx, before Bolt, the body never logged ------------

TRUNCATED = '{"type": "block_actions", "user": {"id": "U0ALICE"'


def _json_headers(body: str, **signing: Any) -> dict[str, str]:
    return {**sign(body, **signing), "Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("body", "headers", "status", "error"),
    [
        (TRUNCATED, lambda: _json_headers(TRUNCATED), 400, "the body is not valid JSON"),
        ("[1, 2]", lambda: _json_headers("[1, 2]"), 400, "the body is not a JSON object"),
        ('"text"', lambda: _json_headers('"text"'), 400, "the body is not a JSON object"),
        (
            "payload=" + TRUNCATED,
            lambda: sign("payload=" + TRUNCATED),
            400,
            "the payload field is not valid JSON",
        ),
        (
            "payload=%5B%5D",
            lambda: sign("payload=%5B%5D"),
            400,
            "the payload field is not a JSON object",
        ),
        (TRUNCATED, lambda: {"Content-Type": "application/json"}, 401, "unsigned request"),
        (
            "payload=%7B%7D",
            lambda: {**sign("payload=%7B%7D"), "X-Slack-Request-Timestamp": "soon"},
            400,
            "X-Slack-Request-Timestamp is not a number",
        ),
        (
            "payload=%7B%7D",
            lambda: {**sign("payload=%7B%7D"), "X-Slack-Request-Timestamp": f"+{int(time.time())}"},
            400,
            "X-Slack-Request-Timestamp is not a number",
        ),
        (
            "payload=%7B%7D",
            lambda: sign("payload=%7B%7D", timestamp=int(time.time()) - 600),
            401,
            "stale request: the timestamp is over five minutes old",
        ),
        (
            "payload=%7B%7D",
            lambda: sign("payload=%7B%7D", secret="forged"),
            401,
            "invalid request signature",
        ),
    ],
    ids=[
        "truncated-json",
        "json-array",
        "json-string",
        "truncated-payload",
        "payload-array",
        "unsigned",
        "timestamp-word",
        "timestamp-plus-sign",
        "stale",
        "forged",
    ],
)
def test_each_malformed_slack_request_gets_its_own_4xx(
    http: Http,
    caplog: pytest.LogCaptureFixture,
    body: str,
    headers: Callable[[], dict[str, str]],
    status: int,
    error: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="pitcrew")
    reply = post(http.url, body, headers())  # signed now, not when the tests were collected
    assert (reply.status, reply.json()) == (status, {"error": error})
    told = [r for r in caplog.records if r.name.startswith("pitcrew")]
    assert [r.getMessage().endswith(f"{status} {error}") for r in told] == [True]
    assert all("U0ALICE" not in r.getMessage() for r in caplog.records)
    assert http.emulator.calls_to("chat.postEphemeral") == []


def test_a_click_the_store_cannot_record_is_answered_not_recorded(http: Http) -> None:
    http.seeded.store._database._conn.execute("PRAGMA query_only = ON")  # the disk refuses writes
    try:
        http.click(blocks.APPROVE_ACTION)
        (told,) = http.ephemerals(1)
    finally:
        http.seeded.store._database._conn.execute("PRAGMA query_only = OFF")
    assert told["text"] == (
        ":warning: Not recorded, try again: pitcrew cannot write its state right now."
    )
    assert http.seeded.executed == []
    http.click(blocks.APPROVE_ACTION)  # once the store writes again, the click counts
    assert "approved by U0ALICE; it runs now" in http.ephemerals(2)[1]["text"]
    assert http.seeded.executed == [http.seeded.proposal.id]


def test_a_signed_silence_replayed_after_a_restart_is_refused(
    make_chat: Any,
    emulator: SlackEmulator,
    seeded: SeededService,
    http_server: HealthServer,
    measured: Measured,
) -> None:
    url = f"http://127.0.0.1:{http_server.port}/slack/events"
    body = form(command_body(emulator, "silence inc-seed000001 2h known issue"))
    headers = sign(body)

    before = make_chat(socket_mode=False)
    before.bind(seeded.service, http=http_server, replays=seeded.store)
    assert post(url, body, headers).status == 200
    emulator.wait_for(lambda: emulator.responses, what="the silence's answer")
    (silence,) = seeded.store.active_silences(before.app.clock())
    before.stop()

    after = make_chat(socket_mode=False)  # the daemon restarted: a new app, the same store
    after.bind(seeded.service, http=http_server, replays=seeded.store)
    replayed = post(url, body, headers)
    made = len(seeded.store.active_silences(after.app.clock())) - 1
    measured.bad_clicks_accepted(made)
    assert (replayed.status, replayed.json()) == (401, {"error": "replayed request"})
    assert seeded.store.active_silences(after.app.clock()) == (silence,)


def test_only_those_who_may_silence_can_and_not_for_longer_than_allowed(
    http: Http, measured: Measured
) -> None:
    http.click(blocks.SILENCE_ACTION, value="workload:ml-train/rayjob/verl-ppo-qwen", user=STRANGER)
    (told,) = http.ephemerals(1)
    measured.bad_clicks_accepted(len(http.seeded.store.active_silences(http.chat.app.clock())))
    assert told["text"] == (
        "Nothing changed: U0MALLORY may not silence (approvals.silencers, or else the "
        "approvers, may)."
    )
    assert http.seeded.store.active_silences(http.chat.app.clock()) == ()
    assert http.refused("silence") == 1

    reply = http.command("silence inc-seed000001 8d too long", response="long")
    assert reply.status == 200
    assert "a silence lasts at most 7d" in http.response("long")["text"]
    assert http.seeded.store.active_silences(http.chat.app.clock()) == ()
