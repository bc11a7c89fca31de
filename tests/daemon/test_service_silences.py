"""Silencing and unsilencing through the service, under the silencers' scopes: the
service finds what a silence can mute (its incident's workload and offered actions in
the store, a playbook's actions in the library) and the policy decides; a refusal
changes nothing, is counted, and says why.

The incident is the seed's, diagnosed by the built-in playbooks through the pipeline:
pod-oom-killed on ml-train/raycluster/verl-ppo-qwen-raycluster-x7k2p, offering
k8s.bump_memory."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from bot.adapters.store.store import Store
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser
from bot.core.model import Silence
from bot.daemon.executor import Registry
from bot.daemon.metrics import Metrics
from bot.daemon.service import Service
from tests.support.daemon import DESCRIBE, DRIVER_LOG, RAYCLUSTER, T0, Clock, engine, rig, seed
from tests.support.faults import Measured

WORKLOAD = "ml-train/raycluster/verl-ppo-qwen-raycluster-x7k2p"
POLICY = ApprovalPolicy(
    approvers=(ApproverRule(users=("U_ALICE",)),),
    silencers=(
        ApproverRule(users=("U_ALICE",)),
        ApproverRule(users=("U_TRAIN",), workloads=("ml-train/*",)),
        ApproverRule(users=("U_EVAL",), workloads=("ml-eval/*",)),
        ApproverRule(
            users=("U_MEM",),
            actions=("k8s.bump_memory", "k8s.replace_worker_pods", "kuberay.*"),
        ),
        ApproverRule(users=("U_RAY",), actions=("ray.*",)),
    ),
)
HOUR = timedelta(hours=1)


@dataclass
class Seeded:
    store: Store
    service: Service
    metrics: Metrics
    incident_id: str

    def refused(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "pitcrew_refused_approvals_total", {"reason": reason}
        )
        return value or 0.0


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[Seeded]:
    fed = rig(tmp_path / "pitcrew.db", Clock())
    fed.feed(seed(DRIVER_LOG, RAYCLUSTER), seed(DESCRIBE))
    (incident,) = fed.store.open_incidents()
    metrics = Metrics()
    offers = engine().library.actions_by_playbook
    service = Service(fed.store, POLICY, Registry({}), metrics=metrics, offers=offers)
    yield Seeded(fed.store, service, metrics, incident.id)
    fed.store.close()


def _asked(seeded: Seeded, matchers: dict[str, str]) -> dict[str, str]:
    return {key: value.format(incident=seeded.incident_id) for key, value in matchers.items()}


@pytest.mark.parametrize(
    ("user", "matchers"),
    [
        ("U_TRAIN", {"incident": "{incident}"}),
        ("U_EVAL", {"workload": "ml-eval/RayJob/nightly"}),
        ("U_MEM", {"incident": "{incident}"}),  # its card offers the bump, then new pods
        ("U_MEM", {"playbook": "pod-oom-killed"}),
        ("U_RAY", {"playbook": "gcs-unreachable"}),  # it offers ray.resubmit_job
    ],
)
def test_a_silencer_silences_within_their_scope(
    seeded: Seeded, user: str, matchers: dict[str, str]
) -> None:
    asked = _asked(seeded, matchers)
    made = seeded.service.silence(asked, HOUR, user, T0, "noisy", ChatUser(user))
    assert seeded.store.active_silences(T0) == (made,)
    assert made.matchers == asked


@pytest.mark.parametrize(
    ("user", "matchers", "problem"),
    [
        (
            "U_EVAL",
            {"incident": "{incident}"},
            f"U_EVAL may silence only in workloads ml-eval/*; this silence mutes workload "
            f"{WORKLOAD}",
        ),
        (
            "U_TRAIN",
            {"playbook": "pod-oom-killed"},
            "U_TRAIN may silence only in workloads ml-train/*; this silence is not limited "
            "to a workload",
        ),
        (
            "U_RAY",
            {"playbook": "pod-oom-killed"},
            "U_RAY may silence only for actions ray.*; this silence mutes actions "
            "k8s.bump_memory, k8s.replace_worker_pods, kuberay.recreate_rayjob",
        ),
        (
            "U_RAY",
            {"incident": "{incident}"},
            "U_RAY may silence only for actions ray.*; this silence mutes actions "
            "k8s.bump_memory, k8s.replace_worker_pods",
        ),
        (
            "U_RAY",
            {"category": "oom"},
            "U_RAY may silence only for actions ray.*; this silence is not limited to actions",
        ),
        (
            "U_RAY",
            {"playbook": "crash-loop-backoff"},  # it offers no action
            "U_RAY may silence only for actions ray.*; this silence mutes cards that offer "
            "no action",
        ),
    ],
)
def test_a_silence_outside_the_silencers_scope_is_refused_and_counted(
    seeded: Seeded, measured: Measured, user: str, matchers: dict[str, str], problem: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(problem)}$"):
        seeded.service.silence(_asked(seeded, matchers), HOUR, user, T0, "", ChatUser(user))
    measured.bad_clicks_accepted(len(seeded.store.active_silences(T0)))
    assert seeded.store.active_silences(T0) == ()
    assert seeded.refused("silence") == 1


def _alices(seeded: Seeded, matchers: dict[str, str]) -> Silence:
    alice = ChatUser("U_ALICE")
    return seeded.service.silence(_asked(seeded, matchers), HOUR, alice.id, T0, "noisy", alice)


LATER = T0 + timedelta(minutes=5)


@pytest.mark.parametrize(
    ("matchers", "user"),
    [
        ({"incident": "{incident}"}, "U_TRAIN"),
        ({"incident": "{incident}"}, "U_MEM"),
        ({"playbook": "gcs-unreachable"}, "U_RAY"),
        ({"playbook": "gcs-unreachable"}, "U_ALICE"),  # its creator
    ],
)
def test_a_silence_ends_by_its_creator_or_a_silencer_in_its_scope(
    seeded: Seeded, matchers: dict[str, str], user: str
) -> None:
    made = _alices(seeded, matchers)
    ended = seeded.service.unsilence(made.id, LATER, ChatUser(user))
    assert ended is not None
    assert seeded.store.active_silences(LATER) == ()


@pytest.mark.parametrize(
    ("matchers", "user", "problem"),
    [
        (
            {"incident": "{incident}"},
            "U_EVAL",
            "U_EVAL may not end silence {silence}: only its creator U_ALICE may, or a "
            "silencer or an approver whose scope covers namespace ml-train; workload "
            f"{WORKLOAD}; actions k8s.bump_memory, k8s.replace_worker_pods",
        ),
        (
            {"incident": "{incident}"},
            "U_RAY",
            "U_RAY may not end silence {silence}: only its creator U_ALICE may, or a "
            "silencer or an approver whose scope covers namespace ml-train; workload "
            f"{WORKLOAD}; actions k8s.bump_memory, k8s.replace_worker_pods",
        ),
        (
            {"playbook": "gcs-unreachable"},
            "U_MEM",
            "U_MEM may not end silence {silence}: only its creator U_ALICE may, or a "
            "silencer or an approver whose scope covers every namespace; every workload; "
            "action ray.resubmit_job",
        ),
    ],
)
def test_ending_a_silence_outside_ones_scope_is_refused_and_counted(
    seeded: Seeded, measured: Measured, matchers: dict[str, str], user: str, problem: str
) -> None:
    made = _alices(seeded, matchers)
    with pytest.raises(ValueError, match=f"^{re.escape(problem.format(silence=made.id))}$"):
        seeded.service.unsilence(made.id, LATER, ChatUser(user))
    measured.bad_clicks_accepted(1 - len(seeded.store.active_silences(LATER)))
    assert seeded.store.active_silences(LATER) == (made,)
    assert seeded.refused("unsilence") == 1
