"""A standby takes over, and nothing is done twice: two real `pitcrew run` replicas of
cluster eu-a on one PostgreSQL store, elected on a Lease in kmock's API, posting to the
Slack emulator (tests/support/failover.py).

The leader is killed (SIGKILL) after a click's approval is recorded, after its runner
claimed the action in the ledger, and after it patched the RayCluster: each time the
standby takes the Lease, the RayCluster's memory limit changes once (16Gi → 24Gi) and
the card ends "applied and verified", one card. A leader stopped (SIGSTOP) past its lease
and resumed finds a newer leader's term and exits; one cut off the API for 20 s stops
within its renew deadline, and the standby takes over.
"""

from __future__ import annotations

import signal
import time

import pytest

from bot.core.model import ActionResult, ProposalState
from tests.support.daemon_process import wait_until
from tests.support.failover import (
    EXIT_DEPOSED,
    LEASE_DURATION,
    RENEW_DEADLINE,
    Pair,
    Slowed,
    applied,
    readyz,
    since,
)
from tests.support.faults import Measured

pytestmark = [pytest.mark.kube, pytest.mark.slack, pytest.mark.postgres, pytest.mark.slow]

S = ProposalState
BUMPED = ["16Gi", "24Gi"]  # the RayCluster's limit, changed once
TAKEOVER = LEASE_DURATION + 5  # the goal: the standby acts within a lease and 5 s


def test_the_leader_killed_after_the_approval_is_recorded(pair: Pair, measured: Measured) -> None:
    a = pair.start("a")
    assert pair.wait_leader(a) is a
    b = pair.start("b")
    ready = readyz(b)  # a standby is alive and ready: its pipeline's parts are the leader's
    assert ready["ok"] is True
    assert sorted(ready["checks"]) == ["chat", "lease", "store"]
    assert ready["notes"]["leader"].startswith("standing by: ")
    assert "holds the Lease pitcrew/pitcrew (term 1)" in ready["notes"]["leader"]
    pair.ingest(b)  # a standby keeps the evidence for the leader
    card = pair.card()
    a.proc.send_signal(signal.SIGSTOP)  # the leader cannot claim it
    pair.click(b, card)  # the standby records the approval, and runs nothing
    wait_until(lambda: pair.proposal()[0] is S.APPROVED, 30, "the approval recorded")
    killed = time.monotonic()
    a.kill()
    assert pair.wait_leader(b, timeout=TAKEOVER + 30) is b
    wait_until(lambda: pair.limits() == BUMPED, 60, "the RayCluster patched")
    acted = since(killed)
    wait_until(lambda: applied(card), 60, "the card applied")
    assert pair.proposal() == (S.SUCCEEDED, ActionResult.SUCCEEDED)
    assert pair.limits() == BUMPED
    report(measured, pair, acted)


def test_the_leader_killed_after_its_ledger_claim(
    pair: Pair, slowed: Slowed, measured: Measured
) -> None:
    a = pair.start("a")
    pair.wait_leader(a)
    b = pair.start("b")
    pair.ingest(a)
    card = pair.card()
    slowed.seconds["quotas"] = 10.0  # the plan after the claim reads the quota this late
    pair.click(a, card)
    wait_until(lambda: pair.proposal() == (S.RUNNING, ActionResult.STARTED), 40, "the claim")
    assert pair.limits() == ["16Gi"]
    killed = time.monotonic()
    a.kill()
    a.exit_code(timeout=10)
    slowed.seconds["quotas"] = 0.0  # the standby's own plan is not slowed (not before: a's is)
    assert pair.wait_leader(b, timeout=TAKEOVER + 30) is b
    wait_until(lambda: pair.limits() == BUMPED, 60, "the RayCluster patched")
    acted = since(killed)
    wait_until(lambda: applied(card), 60, "the card applied")
    assert pair.proposal() == (S.SUCCEEDED, ActionResult.SUCCEEDED)
    assert "was running when the leader changed; finishing it" in b.log()
    report(measured, pair, acted)


def test_the_leader_killed_after_its_patch(pair: Pair, slowed: Slowed, measured: Measured) -> None:
    a = pair.start("a")
    pair.wait_leader(a)
    b = pair.start("b")
    pair.ingest(a)
    card = pair.card()
    slowed.seconds["events"] = 10.0  # the Event after the patch is answered this late
    pair.click(a, card)
    wait_until(lambda: pair.limits() == BUMPED, 30, "the leader's patch")
    assert pair.proposal() == (S.RUNNING, ActionResult.STARTED)
    killed = time.monotonic()
    a.kill()
    a.exit_code(timeout=10)
    slowed.seconds["events"] = 0.0  # the standby's own Event is not slowed (not before: a's is)
    assert pair.wait_leader(b, timeout=TAKEOVER + 30) is b
    wait_until(lambda: applied(card), 60, "the card applied")
    acted = since(killed)
    assert pair.proposal() == (S.SUCCEEDED, ActionResult.SUCCEEDED)
    assert pair.limits() == BUMPED  # recognised as done: not patched again
    report(measured, pair, acted)


def test_a_leader_stopped_past_its_lease_finds_a_newer_term_and_exits(pair: Pair) -> None:
    a = pair.start("a")
    pair.wait_leader(a)
    b = pair.start("b")
    old = pair.term()
    a.proc.send_signal(signal.SIGSTOP)
    assert pair.wait_leader(b, timeout=TAKEOVER + 30) is b
    assert pair.term() == old + 1
    pair.ingest(b)
    card = pair.card()  # the new leader posts
    a.proc.send_signal(signal.SIGCONT)
    assert a.exit_code(timeout=10) == EXIT_DEPOSED
    assert "this replica no longer leads: " in a.log()
    pair.click(b, card)
    wait_until(lambda: applied(card), 60, "the card applied by the new leader")
    assert pair.limits() == BUMPED
    assert pair.cards() == (1, 1)


def test_a_leader_cut_off_the_api_stops_within_its_renew_deadline(pair: Pair) -> None:
    a = pair.start("a", through_proxy=True)
    pair.wait_leader(a)
    b = pair.start("b")
    time.sleep(3)  # b has seen a renew
    cut = time.monotonic()
    pair.proxies["a"].stop()  # the API is unreachable from a for 20 s
    assert a.exit_code(timeout=RENEW_DEADLINE + 5) == EXIT_DEPOSED
    stopped = since(cut)
    assert stopped <= RENEW_DEADLINE + 1, f"a acted {stopped:.1f} s after the cut"
    assert "the Lease was not renewed for " in a.log()
    assert pair.wait_leader(b, timeout=TAKEOVER + 30) is b
    took = since(cut)
    time.sleep(max(0.0, 20 - since(cut)))
    pair.proxies["a"].start()  # the API is back for a; restarted, it stands by
    again = pair.start("a2", through_proxy=False)
    time.sleep(5)
    assert not pair.leading(again)
    assert pair.leading(b)
    assert took <= TAKEOVER + RENEW_DEADLINE


def report(measured: Measured, pair: Pair, acted: float) -> None:
    """What bench/failover.py adds up: the seconds from the kill to the standby's first
    action (the card applied, or the target changed), cards beyond one per incident, and
    changes of the target beyond one."""
    cards, incidents = pair.cards()
    measured.duplicated(cards=cards, incidents=incidents)
    measured.double_runs(executions=len(pair.limits()) - 1, approved=1)
    measured.seconds("failover.seconds", acted)
    assert (cards, incidents) == (1, 1)
