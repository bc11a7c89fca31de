"""`pitcrew demo`: the whole loop on the embedded default, with real failures.

Why this exists: the README's first command must show what pitcrew is for on a
laptop with nothing configured: failures happen, pitcrew explains them on a card,
offers only the actions that are safe, a person approves, the action runs and is
verified, and the work succeeds. Real parts wherever a laptop has them:

- a local Ray head on loopback (`LocalRayHead`: free ports, its own temporary
  directory and process group, stopped by that group — never `ray stop`);
- the daemon itself, in process (`bot.app.wiring.build`): the Ray source polling that
  head, the console chat, a throwaway SQLite store, the `ray` and `kubernetes`
  executors, and an approval policy whose one approver is `console:demo`;
- real Ray jobs that fail the real way (`bot.app.demo.jobs`);
- for the seed case, which needs Kubernetes, kmock's Kubernetes API emulator on
  loopback (`bot.app.demo.emulator`), watched by the Kubernetes source and patched by
  the Kubernetes executor over HTTP — labelled EMULATED on screen.

Three scenarios (`Demo.stale_actor`, `Demo.missing_dependency`, `Demo.seed`) each end
in an expected state, checked on the cluster; the summary lists them. Approvals go
through `bot.daemon.service` as `console:demo`, exactly as `pitcrew approve` does: asked
y/n with the card in view on a terminal, or all approved with `--yes`. Exit status:
0 when every scenario reached its end, 1 naming those that did not, 130 on Ctrl-C.
Whatever happens, everything started is stopped (daemon, emulator, Ray head).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.adapters.kuberay.rerun import RECREATED_FROM
from bot.adapters.kubernetes.api import RAY_CLUSTERS, RAY_JOBS
from bot.app import wiring as app
from bot.app.demo import memory_step
from bot.app.demo import seed as seed_case
from bot.app.demo.controller import RayJobController
from bot.app.demo.emulator import KubeEmulator
from bot.app.demo.jobs import MISSING_MODULE, NAMESPACE, REGISTER_CENTER, Jobs, until
from bot.app.demo.screen import Card, DemoChat, ScenarioRow, Screen
from bot.app.settings.sections import Settings
from bot.app.settings.sources import SourceSettings
from bot.core.model import Incident, ObjectRef, Proposal, ProposalState
from bot.daemon.ports import Outcome, utcnow
from bot.daemon.service import console_user

log = logging.getLogger("pitcrew.demo")

APPROVER = "demo"
S = ProposalState
FINAL = frozenset({S.SUCCEEDED, S.FAILED, S.REJECTED, S.EXPIRED})
SEED_RAYJOB = ObjectRef("RayJob", "verl-ppo-qwen", seed_case.NS)
CARD_TIMEOUT = 60.0
ACTION_TIMEOUT = 300.0


class ScenarioFailedError(Exception):
    """The scenario did not reach its expected end; the message says where it stopped."""


class ScenarioDeclinedError(Exception):
    """The person at the prompt declined an approval: the scenario ends there, by choice."""


def settings_for(
    directory: Path, ray_url: str, kubeconfig: Path, prometheus_url: str = ""
) -> Settings:
    """The daemon's configuration: everything local, short timings, one approver; memory
    evidence from the throwaway Prometheus when one runs."""
    sources: dict[str, Any] = {
        "ray": [{"name": "local", "address": ray_url, "poll_interval": 1}],
        "kubernetes": {
            "enabled": True,
            "kubeconfig": str(kubeconfig),
            "context": "kmock",
            "namespaces": [seed_case.NS],
        },
    }
    if prometheus_url:
        sources["prometheus"] = {"url": prometheus_url, "timeout": 5}
    if "ray_discovery" in SourceSettings.model_fields:
        # The emulated seed RayCluster has no Ray dashboard to discover and poll.
        sources["ray_discovery"] = {"enabled": False}
    return Settings.model_validate(
        {
            "store": {"path": str(directory / "pitcrew.db")},
            "http": {"port": 0},
            "chat": {"kind": "console"},
            "notify": {"group_wait": 1, "group_interval": 1},
            "approvals": {"approvers": [{"users": [console_user(APPROVER).id]}]},
            "actions": {
                "executors": {"ray.*": "ray", "k8s.*": "kubernetes", "kuberay.*": "kuberay"}
            },
            "sources": sources,
            "scheduler": {"tick": 0.2, "approved": 0.5, "outbox": 0.5, "expiry": 5},
            "pipeline": {"drain_timeout": 5, "flush_timeout": 5},
        }
    )


class Demo:
    """The three scenarios, over a running daemon, a Ray head and the emulator."""

    def __init__(
        self,
        screen: Screen,
        chat: DemoChat,
        daemon: app.Daemon,
        jobs: Jobs,
        emulator: KubeEmulator,
        *,
        yes: bool,
        measured: bool = False,
    ) -> None:
        self.screen = screen
        self.measured = measured  # Prometheus runs: the bump is sized from the evidence
        self.limit = "20Gi" if measured else "24Gi"
        self.chat = chat
        self.daemon = daemon
        self.jobs = jobs
        self.emulator = emulator
        self.yes = yes

    # -- 1 ------------------------------------------------------------------------------

    def stale_actor(self, out: ScenarioRow) -> None:
        jobs, screen = self.jobs, self.screen
        screen.heading(
            "1/3  A stale named actor — real jobs on the local Ray head",
            f"An earlier run left its register center behind: a detached actor "
            f"{REGISTER_CENTER!r} in namespace {NAMESPACE!r}. The next run wants that name.",
        )
        with screen.step("launch_register_center.py: an earlier run starts its register center"):
            first = jobs.submit("launch_register_center.py")
            job = jobs.wait(first)
        if job.get("status") != "SUCCEEDED":
            raise ScenarioFailedError(f"{first} ended {job.get('status')}: {job.get('message')}")
        jobs.wait_actor(REGISTER_CENTER, NAMESPACE, "ALIVE")
        screen.done(
            f"{first} SUCCEEDED; actor {REGISTER_CENTER} stays ALIVE (detached) in {NAMESPACE}"
        )
        submission, failed = self._failing("train.py")
        out.to_card, card = self._card_for_job(submission, failed)
        incident = self._incident(lambda i: i.ray_job_id == submission, "the incident")
        out.cause = _cause(incident)
        if out.cause != "named_actor_conflict":
            raise ScenarioFailedError(f"the card's root cause is {out.cause}")
        plan = self._proposal(_of(incident), "ray.kill_actor", {S.OFFERED}, CARD_TIMEOUT)
        steps = [plan.action, *(step.action for step in plan.then)]
        if steps != ["ray.kill_actor", "ray.resubmit_job"]:
            raise ScenarioFailedError(f"the card offers {' → '.join(steps)}, not the kill's plan")
        self._primary_is(card, plan)
        screen.say("one plan, one Approve: ray.kill_actor → ray.resubmit_job")
        stale = {a.actor_id for a in jobs.actors(REGISTER_CENTER, NAMESPACE) if a.state == "ALIVE"}
        self._approve_and_run(plan, card)
        out.action = "ray.kill_actor, ray.resubmit_job"
        # the rerun may already be creating its own register center under the name
        states = [a.state for a in jobs.actors(REGISTER_CENTER, NAMESPACE) if a.actor_id in stale]
        if not states or any(state != "DEAD" for state in states):
            raise ScenarioFailedError(
                f"the stale actor {REGISTER_CENTER} is {states} after the kill"
            )
        screen.done(f"the State API shows actor {REGISTER_CENTER} DEAD (the stale one)")
        rerun = until(lambda: jobs.resubmission_of(submission), 30, "the resubmitted job")
        rerun_id = str(rerun.get("submission_id"))
        with screen.step(f"{rerun_id}: the rerun of train.py"):
            done = jobs.wait(rerun_id)
        if done.get("status") != "SUCCEEDED":
            raise ScenarioFailedError(f"the rerun {rerun_id} ended {done.get('status')}")
        screen.done(f"the rerun {rerun_id} SUCCEEDED")
        self._show_when(card, "applied and verified: plan ray.kill_actor → ray.resubmit_job")
        out.result = "actor DEAD; the rerun SUCCEEDED"
        out.ok = True

    # -- 2 ------------------------------------------------------------------------------

    def missing_dependency(self, out: ScenarioRow) -> None:
        self.screen.heading(
            "2/3  A missing dependency — a real job on the local Ray head",
            f"The code imports {MISSING_MODULE}, which the cluster's environment does not have. "
            "No action can fix that from here, so none is offered.",
        )
        submission, failed = self._failing("train_flash.py")
        out.to_card, card = self._card_for_job(submission, failed)
        incident = self._incident(lambda i: i.ray_job_id == submission, "the incident")
        out.cause = _cause(incident)
        if out.cause != "dependency_runtime_env":
            raise ScenarioFailedError(f"the card's root cause is {out.cause}")
        out.action = "none offered"
        offered = [p.action for p in self.daemon.store.proposals_for_incident(incident.id)]
        if offered or card.report.actions:
            raise ScenarioFailedError(f"actions were offered: {', '.join(offered)}")
        self.screen.done("explained on the card; no action offered")
        out.result = "explained; nothing offered"
        out.ok = True

    # -- 3 ------------------------------------------------------------------------------

    def seed(self, out: ScenarioRow) -> None:
        screen, emulator = self.screen, self.emulator
        screen.heading(
            "3/3  The seed case — on an EMULATED Kubernetes API (kmock), not a real cluster",
            f"kmock's Kubernetes API emulator at {emulator.url} stands in for a cluster: "
            "pitcrew's Kubernetes source watches it and its executor patches it over HTTP, as "
            "on a real one. The objects replay examples/seed: a verl RayJob whose worker pod "
            "was OOMKilled at 16Gi, and a driver log ending in "
            "`qwAKMv_register_center (namespace=None) is already taken`.",
        )
        card, incident, cluster_name = self._seed_card(out)
        ours = _of(incident)
        plan = self._proposal(ours, "k8s.bump_memory", {S.OFFERED}, CARD_TIMEOUT)
        steps = " → ".join([plan.action, *(step.action for step in plan.then)])
        if self.measured:  # the evidence first, then the offer sized from it
            memory_step.show(screen, self.chat, card, incident, plan.preview)
        screen.say(f"one plan, one Approve: {steps}")
        screen.say(
            "EMULATED: kmock runs no KubeRay controller; the demo sets the recreated "
            "RayJob Running, as KubeRay would"
        )
        with RayJobController(self.emulator.api, seed_case.NS):
            self._approve_and_run(plan, card)
        out.action = "k8s.bump_memory"
        stored = emulator.api.get(RAY_CLUSTERS, seed_case.NS, cluster_name) or {}
        limit = _worker_limit(stored, "gpu-group")
        if limit != self.limit:
            raise ScenarioFailedError(f"the RayCluster's worker limit reads back as {limit!r}")
        screen.done(
            f"read back from the emulator: RayCluster {cluster_name} group gpu-group "
            f"memory limit {limit}"
        )
        self._seed_checks(incident, card, cluster_name)
        self._seed_rerun()
        out.action = "k8s.bump_memory, kuberay.recreate_rayjob"
        out.result = (
            f"one card; {self.limit} read back; RayJob recreated with {self.limit}; "
            "the kill not offered"
        )
        out.ok = True

    def _seed_card(self, out: ScenarioRow) -> tuple[Card, Incident, str]:
        """The seed's objects created; its one card, and the incident with the clash."""
        started = time.time()
        with self.screen.step(
            "EMULATED: creating the seed's RayJob, RayCluster, pods, nodes, quota"
        ):
            objects = seed_case.install(self.emulator)
        self.screen.done("EMULATED: the seed's objects exist; the worker pod shows OOMKilled")
        card = self.chat.wait_for(
            lambda c: c.report.where.get("workload") == f"RayJob {SEED_RAYJOB.name}",
            CARD_TIMEOUT,
            f"pitcrew's card for {SEED_RAYJOB}",
        )
        out.to_card = card.posted_at - started
        self.screen.say(f"card {card.ref} posted {out.to_card:.1f} s after the failure appeared")
        incident = self._incident(
            lambda i: i.workload == SEED_RAYJOB and _clash_in_driver_log(i),
            "the clash in the driver log to join the incident",
        )
        out.cause = f"{_cause(incident)} (+ named_actor_conflict)"
        if _cause(incident) != "pod_oom_killed":
            raise ScenarioFailedError(f"the card's root cause is {_cause(incident)}")
        return card, incident, str(objects["cluster"]["metadata"]["name"])

    def _seed_checks(self, incident: Incident, card: Card, cluster_name: str) -> None:
        """The kill is not offered for the live register center; one card for the RayJob."""
        kill = next((a for a in incident.diagnosis.actions if a.action == "ray.kill_actor"), None)
        proposals = self.daemon.store.proposals_for_incident(incident.id)
        if kill is None or kill.offered or any(p.action == "ray.kill_actor" for p in proposals):
            raise ScenarioFailedError("ray.kill_actor was offered for the live register center")
        self.screen.done(f"ray.kill_actor not offered: {kill.reason}")
        try:  # captured while the RayCluster exists, kept after KubeRay deletes it
            path, text = self.chat.wait_for_file(card.ref, "Evidence bundle", CARD_TIMEOUT)
        except TimeoutError as error:
            raise ScenarioFailedError(f"no evidence bundle in the card's thread: {error}") from None
        self.screen.done(f"{text} ({path})")
        self.screen.say(
            "  (the demo's store and bundles are deleted when it ends: that command is for "
            "a daemon of your own, `pitcrew run`)"
        )
        posts = [
            c
            for c in self.chat.cards()
            if c.report.where.get("workload") == f"RayJob {SEED_RAYJOB.name}"
        ]
        if len(posts) != 1:
            raise ScenarioFailedError(f"{len(posts)} cards for {SEED_RAYJOB}, not one")
        self._show_when(
            card, "applied and verified: plan k8s.bump_memory → kuberay.recreate_rayjob"
        )

    def _seed_rerun(self) -> None:
        """The plan's second step: the RayJob run again as a RayJob, with the bumped
        memory in its spec."""
        again = self.emulator.api.get(RAY_JOBS, seed_case.NS, SEED_RAYJOB.name) or {}
        limit = _worker_limit(
            {"spec": again.get("spec", {}).get("rayClusterSpec", {})}, "gpu-group"
        )
        recreated = (again.get("metadata", {}).get("annotations") or {}).get(RECREATED_FROM)
        if not recreated or limit != self.limit:
            raise ScenarioFailedError(
                f"the recreated RayJob reads back with {limit or 'no'} memory limit"
            )
        self.screen.done(
            f"read back from the emulator: RayJob {SEED_RAYJOB.name} recreated (from uid "
            f"{recreated}), group gpu-group memory limit {limit}, "
            f"{again.get('status', {}).get('jobDeploymentStatus')}"
        )

    # -- steps ------------------------------------------------------------------------------

    def _failing(self, script: str) -> tuple[str, dict[str, Any]]:
        with self.screen.step(f"{script}: submitted to the local Ray head"):
            submission = self.jobs.submit(script)
            job = self.jobs.wait(submission)
        if job.get("status") != "FAILED":
            raise ScenarioFailedError(f"{submission} ended {job.get('status')}, not FAILED")
        self.screen.done(f"{submission} FAILED: {_telling_line(str(job.get('message') or ''))}")
        return submission, job

    def _card_for_job(self, submission: str, job: dict[str, Any]) -> tuple[float, Card]:
        with self.screen.step("pitcrew polls the cluster, diagnoses, and posts its card"):
            card = self.chat.wait_for(
                lambda c: c.report.where.get("ray_job_id") == submission,
                CARD_TIMEOUT,
                f"pitcrew's card for {submission}",
            )
        ended = float(job.get("end_time") or 0) / 1000 or card.posted_at
        delay = max(card.posted_at - ended, 0.0)
        self.screen.say(f"card {card.ref} posted {delay:.1f} s after the job failed")
        return delay, card

    def _incident(self, match: Callable[[Incident], bool], what: str) -> Incident:
        def find() -> Incident | None:
            return next(
                (v.incident for v in self.daemon.service.incidents() if match(v.incident)), None
            )

        found: Incident = until(find, CARD_TIMEOUT, what)
        return found

    def _proposal(
        self, ours: Callable[[Proposal], bool], action: str, states: set[S], timeout: float
    ) -> Proposal:
        def find() -> Proposal | None:
            for view in self.daemon.service.incidents():
                for proposal in view.proposals:
                    if ours(proposal) and proposal.action == action and proposal.state in states:
                        return proposal
            return None

        found: Proposal = until(find, timeout, f"{action} to be {'/'.join(sorted(states))}")
        return found

    def _primary_is(self, card: Card, proposal: Proposal) -> None:
        """The card's primary (first offered) button is `proposal`'s."""
        shown = self.chat.card(card.ref) or card
        first = next((a for a in shown.report.actions if a.state is S.OFFERED), None)
        if first is None or first.proposal_id != proposal.id:
            found = first.proposal_id if first else "none"
            raise ScenarioFailedError(f"the card's primary button is {found}, not {proposal.id}")

    def _approve_and_run(self, proposal: Proposal, card: Card) -> None:
        service, user = self.daemon.service, console_user(APPROVER)
        what = " → ".join([proposal.action, *(step.action for step in proposal.then)])
        self.screen.say(f"offered: {what} ({proposal.id})", "bold")
        self.screen.say(f"  {proposal.preview}")
        if self.yes:
            self.screen.say(f"→ approving {proposal.id} as {user.id} (--yes)")
        else:
            current = self.chat.card(card.ref)
            if current is not None and current.updates:  # in view as it stands now
                self.chat.show(card.ref)
            if not self.screen.ask(f"Approve {what} ({proposal.id}) as {user.id}?"):
                answer = service.reject(proposal.id, user, utcnow(), "declined in the demo")
                self.screen.say(f"{answer.outcome}: {answer.text}")
                raise ScenarioDeclinedError(f"{what} declined at the prompt: nothing was run")
        answer = service.approve(proposal.id, user, utcnow())
        if answer.outcome is not Outcome.APPROVED:
            raise ScenarioFailedError(f"approving {proposal.action}: {answer.text}")
        self.screen.say(f"  {answer.text}")
        with self.screen.step(f"{what} running"):
            final: Proposal = until(
                lambda: _settled(self.daemon.store.get_proposal(proposal.id)),
                ACTION_TIMEOUT,
                f"{what} to finish",
            )
        reason = final.history[-1].reason if final.history else ""
        if final.state is not S.SUCCEEDED:
            raise ScenarioFailedError(f"{what} {final.state}: {reason}")
        self.screen.done(f"{what}: applied and verified")

    def _show_when(self, card: Card, status: str) -> None:
        """The card in full once it says `status` (or as it stands after a few seconds)."""
        with contextlib.suppress(TimeoutError):
            self.chat.wait_for(lambda c: c.ref == card.ref and c.report.status == status, 15, "")
        self.chat.show(card.ref)


def _settled(proposal: Proposal | None) -> Proposal | None:
    return proposal if proposal is not None and proposal.state in FINAL else None


def _of(incident: Incident) -> Callable[[Proposal], bool]:
    return lambda proposal: proposal.incident_id == incident.id


def _clash_in_driver_log(incident: Incident) -> bool:
    """The name clash is among the incident's findings as its driver log (the submitter
    pod's) shows it, not only as the RayJob's status message says it: what the card's
    "Also seen" line counts (`RayJob and 1 pod`)."""
    return any(
        str(finding.category) == "named_actor_conflict"
        and "Pod" in incident.object_kinds.get(finding.playbook, {})
        for finding in incident.diagnosis.secondary
    )


def _cause(incident: Incident) -> str:
    primary = incident.diagnosis.primary
    return str(primary.category) if primary else "none"


def _telling_line(message: str) -> str:
    """The line of a job's message that says what went wrong, to its first full stop."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for needle in ("already taken", "Error"):
        found = [line for line in lines if needle in line]
        if found:
            first, dot, _ = found[-1].partition(". ")
            return (first + dot.strip())[:200]
    return lines[-1][:200] if lines else "(no message)"


def _worker_limit(cluster: dict[str, Any], group: str) -> str:
    for spec in cluster.get("spec", {}).get("workerGroupSpecs", []):
        if spec.get("groupName") == group:
            containers = spec["template"]["spec"]["containers"]
            return str(containers[0].get("resources", {}).get("limits", {}).get("memory", ""))
    return ""
