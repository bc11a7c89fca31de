"""The diagnosis's offers as the console prints them: a change that needs new pods and
the rerun that brings them are one plan, as on the card, its steps in order."""

from __future__ import annotations

import dataclasses

from bot.adapters.console.render import plain_lines
from tests.e2e.slack.conftest import diagnose_seed

BUMP = (
    "RayCluster ml-train/verl-ppo-qwen-raycluster-x7k2p workerGroupSpecs[gpu-group]"
    ".containers[ray-worker].resources.limits.memory: 16Gi → 24Gi (× 1.5: no memory metrics)"
)


def _offers(lines: list[str]) -> list[str]:
    return lines[lines.index("", lines.index("What to do:")) + 1 :]


def test_the_seed_offers_one_plan_then_the_withheld_actions() -> None:
    assert _offers(plain_lines(diagnose_seed().diagnosis)) == [
        "offered as one plan, its steps run in order with one Approve:",
        "  1. k8s.bump_memory: Raise the memory limit and request of the owning template"
        " (pod_oom_killed)",
        f"       {BUMP}",
        "  2. kuberay.recreate_rayjob: Run a failed RayJob again: the same spec, a new RayJob"
        " (pod_oom_killed)",
        "       delete RayJob ml-train/verl-ppo-qwen, then create it again with the same spec",
        "withheld: ray.kill_actor: the clash is a symptom of pod_oom_killed; killing the actor"
        " would not help",
        "withheld: ray.resubmit_job: named_actor_conflict is a symptom here; the root cause is"
        " pod_oom_killed",
    ]


def test_a_rerun_alone_is_an_offer_of_its_own() -> None:
    diagnosis = diagnose_seed().diagnosis
    rerun = [a for a in diagnosis.actions if a.action == "kuberay.recreate_rayjob"]
    alone = dataclasses.replace(diagnosis, actions=tuple(rerun))
    assert _offers(plain_lines(alone)) == [
        "offered: kuberay.recreate_rayjob: Run a failed RayJob again: the same spec, a new"
        " RayJob (pod_oom_killed)",
        "    delete RayJob ml-train/verl-ppo-qwen, then create it again with the same spec",
    ]
