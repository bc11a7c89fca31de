"""Inputs of one `pitcrew diagnose` are one workload when their names meet: the same
object or submission, or a KubeRay name grown from another (`<rayjob>-raycluster-<hash>`,
`<cluster>-<group>-…`); an input that names nothing goes with the others when they are
one, and stands alone when they are not."""

from __future__ import annotations

import pytest

from bot.core.diagnosis.apart import together

RAYJOB = frozenset({"verl-ppo"})
CLUSTER = frozenset({"verl-ppo-raycluster-x7k2p"})
POD = frozenset({"verl-ppo-raycluster-x7k2p-gpu-group-worker-9zq4f"})
OTHER = frozenset({"llama-sft-raycluster-p8d2m-head-xk2lq"})
SUBMISSION = frozenset({"raysubmit_Qk8vXw2mT3nLp9Rb"})
NOTHING: frozenset[str] = frozenset()


@pytest.mark.parametrize(
    ("inputs", "groups"),
    [
        ({"rayjob.yaml": RAYJOB, "pod.txt": POD}, [["rayjob.yaml", "pod.txt"]]),
        (
            {"rayjob.yaml": RAYJOB, "other.txt": OTHER, "cluster.json": CLUSTER},
            [["rayjob.yaml", "cluster.json"], ["other.txt"]],
        ),
        ({"a.log": SUBMISSION, "b.log": SUBMISSION | POD}, [["a.log", "b.log"]]),
        ({"pod.txt": POD, "driver.log": NOTHING}, [["pod.txt", "driver.log"]]),
        (
            {"pod.txt": POD, "other.txt": OTHER, "driver.log": NOTHING},
            [["pod.txt"], ["other.txt"], ["driver.log"]],
        ),
        ({"a.log": NOTHING, "b.log": NOTHING}, [["a.log", "b.log"]]),
        ({"ab": frozenset({"ab"}), "ab-c": frozenset({"ab-c"})}, [["ab", "ab-c"]]),
        ({"verl": frozenset({"verl"}), "verl2": frozenset({"verl2"})}, [["verl"], ["verl2"]]),
    ],
)
def test_inputs_are_grouped_by_the_workload_their_names_say(
    inputs: dict[str, frozenset[str]], groups: list[list[str]]
) -> None:
    assert together(inputs) == groups
