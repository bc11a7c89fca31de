"""An approval whose target's live state cannot be checked is refused, and nothing runs:
a daemon with the Kubernetes source and executor on kmock's emulator and Slack's HTTP
mode on the Slack emulator.

The seed's OOM kill is carded with `k8s.bump_memory` offered. The cluster then stops
answering (kmock's API server is stopped: connections to its port are refused) before
the approver clicks. Approval re-reads the target first; that read fails, so the click
is refused with the reason, to the person who clicked and in the card's thread, the
offer stays offered (its button stays, for when the cluster answers again), and no
action was started: no ledger entry, no approval recorded. The daemon runs in this
process and is stopped."""

from __future__ import annotations

import pytest

from bot.adapters.slack import blocks
from bot.app import wiring
from bot.core.model import ProposalState
from tests.e2e.kubernetes.conftest import Emulator, install_seed
from tests.e2e.slack.conftest import (
    APPROVER,
    click_payload,
    payload_form,
    post,
    sign,
)
from tests.e2e.slack.test_kube_supersede import (  # noqa: F401
    BUMP,
    approve_buttons,
    daemon_chat,
    daemon_settings,
    the_card,
    thread_texts,
    wait_until,
    write_config,
)
from tests.support.slack_emulator import SlackEmulator

pytestmark = [pytest.mark.kube, pytest.mark.slack]


@pytest.mark.slow
def test_an_approval_whose_target_cannot_be_read_is_refused_in_the_thread_and_nothing_runs(
    emulator: SlackEmulator, kube: Emulator, daemon: wiring.Daemon
) -> None:
    install_seed(kube)
    card = wait_until(lambda: the_card(emulator), 60, "the seed's card")
    offered = wait_until(
        lambda: approve_buttons(card).get(BUMP),  # alone: no `kuberay` executor kind here
        30,
        "an Approve button for the bump",
    )
    address = kube.api_client.configuration.host.removeprefix("http://")
    kube.stop()  # the cluster stops answering before the approver clicks

    events = f"http://127.0.0.1:{daemon.http.port}/slack/events"
    body = payload_form(click_payload(emulator, blocks.APPROVE_ACTION, offered, ts=card.ts))
    assert post(events, body, sign(body)).status == 200

    (told,) = [c.params for c in emulator.wait_calls("chat.postEphemeral", 1, timeout=60)]
    refusal = wait_until(
        lambda: [t for t in thread_texts(emulator, card) if "was refused" in t],
        30,
        "the refusal in the card's thread",
    )
    why = (
        "cannot check the target's live state: "
        f"the Kubernetes API at {address} did not answer (connection refused)"
    )
    assert told["user"] == APPROVER
    assert told["text"] == f"[kmock] Nothing changed: {why}."  # the kubeconfig context names it
    assert refusal == [f"{APPROVER}'s approval of k8s.bump_memory ({offered}) was refused: {why}"]

    proposal = daemon.store.get_proposal(offered)
    assert proposal is not None
    assert proposal.state is ProposalState.OFFERED  # still offered, for when it answers
    assert proposal.approvals == ()
    assert [step.to_state for step in proposal.history] == [ProposalState.OFFERED]
    assert daemon.store.recent_actions(10) == ()  # nothing started, nothing in the ledger
    assert approve_buttons(card).get(BUMP) == offered
