"""A card names the cluster whose pitcrew posted it: on its header and fallback text, and
in the value of every button, so a click says whose card it was on."""

from __future__ import annotations

from typing import Any

import pytest

from bot.adapters.slack.blocks import CardOptions, address_of, card, minimal_card
from bot.core.model import ProposalState, Report, ReportAction, Severity

REPORT = Report(
    title="CUDA out of memory: RayJob ml-train/verl-ppo",
    severity=Severity.ERROR,
    status="open",
    where={"cluster": "eu-a", "namespace": "ml-train", "workload": "RayJob verl-ppo"},
    primary="cuda_oom",
    secondary=(),
    evidence=("torch.OutOfMemoryError: CUDA out of memory",),
    diagnosis="",
    actions=(
        ReportAction("p-6156150019", "k8s.bump_memory", "limit 16Gi → 24Gi", ProposalState.OFFERED),
    ),
)


def values(message_blocks: list[dict[str, Any]]) -> list[str]:
    return [
        element["value"]
        for block in message_blocks
        if block["type"] == "actions"
        for element in block["elements"]
    ]


def header(message_blocks: list[dict[str, Any]]) -> str:
    return next(b["text"]["text"] for b in message_blocks if b["type"] == "header")


def status_line(message_blocks: list[dict[str, Any]]) -> str:
    return next(e["text"] for b in message_blocks if b["type"] == "context" for e in b["elements"])


def test_a_card_names_its_cluster_on_the_header_and_in_every_button() -> None:
    message = card(REPORT, CardOptions(cluster="eu-a"))
    assert header(message.blocks) == (
        ":red_circle: [eu-a] CUDA out of memory: RayJob ml-train/verl-ppo"
    )
    assert message.text == "[ERROR] [eu-a] CUDA out of memory: RayJob ml-train/verl-ppo (open)"
    assert values(message.blocks) == [
        "p-6156150019@eu-a",
        "p-6156150019@eu-a",
        "workload:ml-train/rayjob/verl-ppo@eu-a",
    ]
    assert "Cluster" not in status_line(message.blocks)  # the header says it already


def test_a_card_of_an_incident_on_another_ray_cluster_keeps_that_cluster_in_its_status() -> None:
    message = card(REPORT, CardOptions(cluster="eu-b"))
    assert "Cluster eu-a" in status_line(message.blocks)
    assert header(message.blocks).startswith(":red_circle: [eu-b] ")


def test_without_a_cluster_name_a_card_is_as_it_always_was() -> None:
    message = card(REPORT)
    assert header(message.blocks) == ":red_circle: CUDA out of memory: RayJob ml-train/verl-ppo"
    assert values(message.blocks) == [
        "p-6156150019",
        "p-6156150019",
        "workload:ml-train/rayjob/verl-ppo",
    ]


def test_the_minimal_card_names_its_cluster_too() -> None:
    message = minimal_card(REPORT, "eu-a")
    assert header(message.blocks).startswith(":red_circle: [eu-a] CUDA out of memory")
    assert message.text.startswith("[ERROR] [eu-a] ")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("p-6156150019@eu-a", ("p-6156150019", "eu-a")),
        ("p-6156150019", ("p-6156150019", "")),  # a card posted before clusters were named
        (
            "workload:ml-train/rayjob/x@arn:aws:eks:us-west-2:123:cluster/prod",
            ("workload:ml-train/rayjob/x", "arn:aws:eks:us-west-2:123:cluster/prod"),
        ),
        ("p-1@alice@kind-kind", ("p-1", "alice@kind-kind")),  # a context named user@cluster
    ],
)
def test_a_button_value_says_which_cluster_it_is_for(value: str, expected: tuple[str, str]) -> None:
    assert address_of(value) == expected
