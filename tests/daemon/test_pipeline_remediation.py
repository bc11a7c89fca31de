"""The remediation loop through the pipeline, as operators configure it: an offer is
stored only once its live check answered (one proposal per decision, kept through a
re-check that changes nothing); only what this pitcrew can finish is offered; a plan
that stopped part way keeps its incident open, so the old pod's next OOM kill joins it
and no second bump of a limit already raised is offered; a failed RayJob whose cause no
playbook knows gets a card naming the lines that look like it."""

from __future__ import annotations

import dataclasses
import io
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bot.core.actions import approvals
from bot.core.actions.facts import FactAnswer, offer_key
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser
from bot.core.actions.reach import Reach
from bot.core.inputs.kuberay import raycluster_parts, rayjob_parts
from bot.core.inputs.reader import read_stream
from bot.core.model import (
    ActionOffer,
    ActionResult,
    ObjectRef,
    Proposal,
    ProposalState,
    Report,
    Signal,
    StepOutcome,
)
from bot.daemon.feed import Context, LiveFacts, Observation, Refresh, observe
from bot.daemon.pipeline import Workers
from tests.support.clash_job import JOB, KILL_FACTS, SUBMISSION
from tests.support.daemon import DESCRIBE, NS, Clock, Rig, rig, seed

RAYJOB = ObjectRef("RayJob", "verl-ppo-qwen", NS)
ANYONE = ApprovalPolicy(approvers=(ApproverRule(users=("U042",)),))
RUNNING = "RayJob ml-train/verl-ppo-qwen is Running, not Failed or Complete"


def asked_checks(asked: list[tuple[str, tuple[ActionOffer, ...]]]) -> Workers:
    """Workers whose live checks answer later (the test hands the answer in)."""

    def check_live(incident_id: str, offers: Sequence[ActionOffer]) -> bool:
        asked.append((incident_id, tuple(offers)))
        return True

    return Workers(check_live=check_live)


def seed_rayjob(r: Rig) -> str:
    """The seed's failed RayJob and its OOM-killed worker, one incident: its id."""
    r.feed(seed("rayjob.yaml", RAYJOB), seed(DESCRIBE, RAYJOB))
    (incident,) = r.store.open_incidents()
    return incident.id


def last_card(r: Rig) -> Report:
    cards = [c.report for c in r.chat.calls if c.report is not None]
    assert cards, "no card was posted"
    return cards[-1]


def answer_all(
    r: Rig, asked: list[tuple[str, tuple[ActionOffer, ...]]], answer: FactAnswer
) -> None:
    """Each live check asked so far answers (one answer per request, as the workers do)."""
    for incident_id, _ in list(asked):
        r.pipeline.process(LiveFacts(incident_id, answer))


def refusing(asked: list[tuple[str, tuple[ActionOffer, ...]]], action: str, why: str) -> FactAnswer:
    offers = [o for _, batch in asked for o in batch if o.action == action]
    return FactAnswer(refused={offer_key(o): why for o in offers})


def test_the_live_check_runs_before_the_proposal_is_stored_one_row_per_decision(
    tmp_path: Path,
) -> None:
    asked: list[tuple[str, tuple[ActionOffer, ...]]] = []
    r = rig(tmp_path / "pitcrew.db", Clock(), workers=lambda store: asked_checks(asked))
    incident_id = seed_rayjob(r)
    assert r.store.proposals_for_incident(incident_id) == ()  # nothing stored unchecked
    actions = {o.action for _, batch in asked for o in batch}
    assert {"k8s.bump_memory", "kuberay.recreate_rayjob", "k8s.replace_worker_pods"} <= actions

    # the RayJob is still running: its recreate is refused, its pods are replaced instead
    answer = refusing(asked, "kuberay.recreate_rayjob", RUNNING)
    answer_all(r, asked, answer)
    (plan,) = r.store.proposals_for_incident(incident_id)
    assert [plan.action, *(s.action for s in plan.then)] == [
        "k8s.bump_memory",
        "k8s.replace_worker_pods",
    ]
    # a re-check that changes nothing keeps the proposal and its buttons
    r.pipeline.process(LiveFacts(incident_id, answer))
    assert r.store.proposals_for_incident(incident_id) == (plan,)


def test_with_only_the_kubernetes_kind_the_bump_is_offered_alone_saying_what_completes_it(
    tmp_path: Path,
) -> None:
    reach = Reach.of({"k8s.bump_memory", "k8s.replace_worker_pods"}, ANYONE)
    asked: list[tuple[str, tuple[ActionOffer, ...]]] = []
    r = rig(tmp_path / "pitcrew.db", Clock(), workers=lambda s: asked_checks(asked), reach=reach)
    incident_id = seed_rayjob(r)
    assert "kuberay.recreate_rayjob" not in {o.action for _, batch in asked for o in batch}
    why = "RayJob ml-train/verl-ppo-qwen is Failed: it is rerun from its template"
    answer_all(r, asked, refusing(asked, "k8s.replace_worker_pods", why))
    (bump,) = r.store.proposals_for_incident(incident_id)
    assert (bump.action, bump.then) == ("k8s.bump_memory", ())
    r.tick(until=40)
    card = last_card(r)
    (offered,) = card.actions
    assert offered.remains.endswith(
        "kuberay.recreate_rayjob would complete it but is not offered: no executor is "
        "configured for kuberay.recreate_rayjob: needs the `kuberay` executor kind in "
        'actions.executors ("kuberay.recreate_rayjob": kuberay).'
    )


@pytest.mark.parametrize(
    ("executors", "policy", "configure"),
    [
        (  # no approvers yet
            {"k8s.bump_memory", "k8s.replace_worker_pods", "kuberay.recreate_rayjob"},
            ApprovalPolicy(),
            (
                "an approver for k8s.bump_memory in ml-train in approvals.approvers",
                "an approver for kuberay.recreate_rayjob in ml-train in approvals.approvers",
                "an approver for k8s.replace_worker_pods in ml-train in approvals.approvers",
            ),
        ),
        (  # no executors yet
            set(),
            ANYONE,
            (
                'the `kubernetes` executor kind in actions.executors ("k8s.bump_memory": '
                "kubernetes)",
                'the `kuberay` executor kind in actions.executors ("kuberay.recreate_rayjob": '
                "kuberay)",
                'the `kubernetes` executor kind in actions.executors ("k8s.replace_worker_pods": '
                "kubernetes)",
            ),
        ),
    ],
)
def test_with_nothing_that_could_act_the_card_says_what_to_configure_and_offers_nothing(
    tmp_path: Path, executors: set[str], policy: ApprovalPolicy, configure: tuple[str, ...]
) -> None:
    r = rig(tmp_path / "pitcrew.db", Clock(), reach=Reach.of(executors, policy))
    incident_id = seed_rayjob(r)
    r.tick(until=40)
    assert r.store.proposals_for_incident(incident_id) == ()
    card = last_card(r)
    assert card.actions == ()  # no Approve button for what nobody can run
    assert card.configure == configure


def finished(proposal: Proposal, at: Any, *steps: StepOutcome) -> Proposal:
    """The proposal approved, run and ended with `steps` (what the runner records)."""
    decision = approvals.approve(
        proposal,
        ChatUser("U042"),
        ANYONE,
        at,
        approvals.LiveCheck(facts=dict.fromkeys(proposal.preconditions, True)),
    )
    assert isinstance(decision, approvals.Approved)
    running = approvals.start(decision.proposal, at)
    ok = all(s.result is ActionResult.SUCCEEDED for s in steps)
    result = ActionResult.SUCCEEDED if ok else ActionResult.REFUSED
    return approvals.finish(running, at, result, "\n".join(s.detail for s in steps), steps)


def oom_again(i: int) -> Observation:
    """The old pod OOM-killed again at its old 16Gi limit (its restart count up)."""
    (pod,) = [p for p in seed(DESCRIBE).parts if isinstance(p, Signal) and p.reason == "OOMKilled"]
    again = dataclasses.replace(pod, fields={**pod.fields, "restart_count": str(i + 1)})
    return observe((again,), Context(workload=RAYJOB))


def test_a_plan_stopped_at_step_two_keeps_one_incident_and_no_second_bump(
    tmp_path: Path,
) -> None:
    clock = Clock()
    r = rig(tmp_path / "pitcrew.db", clock)
    incident_id = seed_rayjob(r)
    (plan,) = r.store.proposals_for_incident(incident_id)
    clock.at(60)
    stopped = finished(
        plan,
        clock.now,
        StepOutcome("k8s.bump_memory", ActionResult.SUCCEEDED, "16Gi → 24Gi; in place"),
        StepOutcome(
            "kuberay.recreate_rayjob",
            ActionResult.REFUSED,
            "no executor is configured for kuberay.recreate_rayjob (actions.executors)",
        ),
    )
    r.store.record_decision(stopped, plan.version)
    r.pipeline.process(Refresh(incident_id, urgent=True))
    (incident,) = r.store.open_incidents()
    assert incident.unfinished == (
        "step 1 (k8s.bump_memory) applied and verified; step 2 (kuberay.recreate_rayjob) "
        "refused: no executor is configured for kuberay.recreate_rayjob (actions.executors)"
    )
    for n, minutes in enumerate((15, 40, 55)):  # beyond the 10 min window each time
        clock.at(minutes * 60)
        r.feed(oom_again(n))
    (still,) = r.store.open_incidents()
    assert still.id == incident_id
    assert [p.id for p in r.store.proposals_for_incident(incident_id)] == [plan.id]


FAILED = {
    "jobDeploymentStatus": "Failed",
    "jobStatus": "FAILED",
    "reason": "AppFailed",
    "message": "Job entrypoint command failed with exit code 1, last available logs "
    "(truncated to 20,000 chars):\nsetup done\n",
    "jobId": "raysubmit_L1c3nse9Xk",
}
LICENSE_LOG = (
    "(TaskRunner pid=1187) step 0: loading the tokenizer\n"
    "(TaskRunner pid=1187) ERROR flexlm: cannot check out feature 'sim' from "
    "27000@license.corp.example: connection refused\n"
    "Job entrypoint command failed with exit code 1, last available logs (truncated to "
    "20,000 chars):\n"
)


def test_a_failed_rayjob_whose_cause_no_playbook_knows_gets_a_card_naming_its_lines(
    tmp_path: Path,
) -> None:
    rayjob: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "sim-train", "namespace": NS, "uid": "uid-sim"},
        "spec": {"entrypoint": "python sim.py"},
        "status": FAILED,
    }
    workload = ObjectRef("RayJob", "sim-train", NS)
    r = rig(tmp_path / "pitcrew.db", Clock())
    log = read_stream(io.BytesIO(LICENSE_LOG.encode()), "driver.log")
    r.feed(observe([*rayjob_parts(rayjob), *log], Context(namespace=NS, workload=workload)))
    r.tick(until=40)
    card = last_card(r)
    assert card.title == "pitcrew does not know why it failed: RayJob ml-train/sim-train"
    assert card.cause == (
        "RayJob ml-train/sim-train failed (its entrypoint exited with code 1) and pitcrew "
        "does not know why: the lines below look like the cause."
    )
    assert card.evidence == (
        "driver.log:2: (TaskRunner pid=1187) ERROR flexlm: cannot check out feature 'sim' "
        "from 27000@license.corp.example: connection refused",
    )
    assert card.actions == ()
    assert not card.sureness.startswith("strong")
    (incident,) = r.store.open_incidents()
    assert r.store.proposals_for_incident(incident.id) == ()
    assert not any("exit code" in line for line in card.evidence)


# -- the stale actor: kill, then resubmit, one plan, the same primary button every run ------

STALE_ACTOR = """\
apiVersion: pitcrew.dev/v1
kind: Signal
source: ray_actor
reason: StaleActor
cluster: local
text: Detached actor trainer_register_center (WorkerGroupRegisterCenter, namespace rl-train) is ALIVE but its owner job 02000000 (raysubmit_a1) finished SUCCEEDED 12m ago
object: {kind: RayActor, name: trainer_register_center}
fields:
  actor_name: trainer_register_center
  ray_namespace: rl-train
  owner_job_id: '02000000'
  owner_submission_id: raysubmit_a1
  owner_status: SUCCEEDED
  is_detached: 'true'
  cluster: local
"""
STALE = FactAnswer(
    facts={
        **dict.fromkeys(KILL_FACTS, True),
        "ray.resubmits_below_cap": True,
        "ray.job_terminal": True,
        "ray.not_rayjob_owned": True,
    }
)


@pytest.mark.parametrize("run", range(20))
def test_the_stale_actor_is_one_plan_kill_then_resubmit_whatever_arrives_first(
    tmp_path: Path, run: int
) -> None:
    """The Ray source hands the failed job and the stale holder of the name it says is
    taken on in one batch, or the holder at the next poll; the parts in either order, the
    live check answering before or after: 20 runs, one plan, the same primary button."""
    order = random.Random(run)
    context = Context("local", "", ObjectRef("RayJobSubmission", SUBMISSION))
    job = list(read_stream(io.BytesIO(JOB.encode()), "job.json"))
    actor = list(read_stream(io.BytesIO(STALE_ACTOR.encode()), "actors.yaml"))
    asked: list[tuple[str, tuple[ActionOffer, ...]]] = []
    r = rig(tmp_path / "pitcrew.db", Clock(), workers=lambda store: asked_checks(asked))
    if run % 2:  # one batch, its parts in any order
        r.feed(observe(order.sample([*job, *actor], len(job) + len(actor)), context))
    else:  # the failure first, the holder at the next poll
        r.feed(observe(job, context))
        if order.random() < 0.5:  # the live check answers before the next poll
            answer_all(r, asked, STALE)
            asked.clear()
        r.feed(observe(actor, context))
    answer_all(r, asked, STALE)
    r.tick(until=40)

    (incident,) = r.store.open_incidents()
    stored = r.store.proposals_for_incident(incident.id)
    assert [(p.action, [s.action for s in p.then], p.state) for p in stored] == [
        ("ray.kill_actor", ["ray.resubmit_job"], ProposalState.OFFERED)
    ]  # never the resubmission alone, not even for a moment
    card = last_card(r)
    assert card.actions[0].steps[0].startswith("ray.kill_actor: ")
    assert card.actions[0].steps[1].startswith("ray.resubmit_job: ")


def test_the_log_says_a_new_cards_wait_for_group_wait(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = rig(tmp_path / "pitcrew.db", Clock())
    with caplog.at_level("INFO", logger="pitcrew.pipeline"):
        incident_id = seed_rayjob(r)
    assert (
        f"incident {incident_id} opened: rayjob_cr_failure on ml-train/rayjob/verl-ppo-qwen; its "
        "card is posted after notify.group_wait (30 s)"
    ) in caplog.messages
    assert r.chat.calls == []  # nothing yet: the card waits


def test_a_failed_raycluster_whose_cause_no_playbook_knows_gets_a_card_too(
    tmp_path: Path,
) -> None:
    raycluster: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc1", "namespace": NS, "uid": "uid-rc1"},
        "spec": {},
        "status": {"state": "failed", "reason": "RayClusterPodsProvisioning failed: 0/3 up"},
    }
    r = rig(tmp_path / "pitcrew.db", Clock())
    r.feed(observe(raycluster_parts(raycluster), Context(namespace=NS)))
    r.tick(until=40)
    card = last_card(r)
    assert card.title == "pitcrew does not know why it failed: RayCluster ml-train/rc1"
    assert card.cause == (
        "RayCluster ml-train/rc1 failed and pitcrew does not know why: no line of its "
        "evidence looks like the cause."
    )
    assert card.evidence == ("RayClusterPodsProvisioning failed: 0/3 up",)  # its status says
    assert card.actions == ()
