"""`/pitcrew ... --cluster NAME`: where several clusters' pitcrews answer in one channel, a
command names the one it is for; the option may stand anywhere, and without it the
pitcrew that gets the command answers."""

from __future__ import annotations

import pytest

from bot.adapters.slack.commands import (
    Command,
    Diagnose,
    DiagnoseTarget,
    Incidents,
    StatusCommand,
    Usage,
    parse_addressed,
)


@pytest.mark.parametrize(
    ("text", "cluster", "command"),
    [
        ("status", "", StatusCommand()),
        ("status --cluster eu-a", "eu-a", StatusCommand()),
        ("--cluster eu-a status", "eu-a", StatusCommand()),
        ("incidents --cluster=eu-b ml-train", "eu-b", Incidents("ml-train")),
        (
            "diagnose --cluster eu-a ml-train/rayjob/verl-ppo",
            "eu-a",
            Diagnose(DiagnoseTarget("rayjob", "verl-ppo", "ml-train")),
        ),
        (
            "diagnose verl/raysubmit_Qk8v --cluster gke_ml_europe-west4_train",
            "gke_ml_europe-west4_train",
            Diagnose(DiagnoseTarget("ray_job", "raysubmit_Qk8v", cluster="verl")),
        ),
    ],
)
def test_a_command_may_name_its_cluster(text: str, cluster: str, command: Command) -> None:
    assert parse_addressed(text) == (cluster, command)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("status --cluster", "`--cluster` needs a cluster's name."),
        ("status --cluster=", "`--cluster` needs a cluster's name."),
        ("status --cluster=-x", "`--cluster` needs a cluster's name, not `-x`."),
    ],
)
def test_a_cluster_option_without_a_name_is_a_usage_error(text: str, problem: str) -> None:
    cluster, command = parse_addressed(text)
    assert cluster == ""
    assert isinstance(command, Usage)
    assert command.problem == problem
