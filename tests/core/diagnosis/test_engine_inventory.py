"""The unknown answer names the inventory entry of each line it knows
(bot.core.diagnosis.engine with bot.core.diagnosis.known_messages)."""

from __future__ import annotations

import pytest

from bot.adapters.files.playbooks import engine_of, load_builtin
from bot.core.diagnosis.engine import to_json
from bot.core.diagnosis.known_messages import KnownMessage, KnownMessages, known_messages

NETWORK = KnownMessage(
    "kubernetes#kubelet-runtime-network-not-ready",
    "kubelet",
    "unclassified",
    (("network is not ready: container runtime network not ready: NetworkReady=",),),
)


def test_the_inventory_is_read_only_for_a_line_no_playbook_knows() -> None:
    asked: list[int] = []

    def known() -> KnownMessages:
        asked.append(1)
        return known_messages([NETWORK])

    engine = engine_of(load_builtin(), known)
    assert engine.diagnose_text("INFO all is well\n").unknown == ()
    assert asked == []
    text = "ERROR network is not ready: container runtime network not ready: NetworkReady=false\n"
    diagnosis = engine.diagnose_text(text)
    assert to_json(diagnosis)["unknown"] == [
        "<text>:1  ERROR network is not ready: container runtime network not ready: "
        "NetworkReady=false  (known as kubernetes#kubelet-runtime-network-not-ready (kubelet))"
    ]
    engine.diagnose_text(
        "ERROR: network is not ready: container runtime network not ready: NetworkReady=false\n"
    )
    assert asked == [1]


EMPTY_PROMPT = KnownMessage(
    "vllm#vllm-engine-prompt-cannot-be-empty", "vllm-engine", "unclassified",
    (("The prompt cannot be empty",),),
)  # fmt: skip
LOOKUP = KnownMessage(
    "ray-python#ray-core-python-key", "ray-core-python", "unclassified", (("Key",),)
)
_VLLM_FRAME = (
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/llm_engine.py", line 9, in add\n'
)
_WRAPPED = (
    "Job entrypoint command failed with exit code 1, last available logs (truncated to "
    "20,000 chars):\n"
)


@pytest.mark.parametrize(
    ("text", "primary", "unknown"),
    [
        # vLLM's own raise no class explains, quoted alone or ending its traceback, or
        # wrapped by the Jobs API: pitcrew does not know it, and names it
        (
            "ValueError: The prompt cannot be empty\n",
            None,
            [
                "<text>:1  ValueError: The prompt cannot be empty  (known as "
                "vllm#vllm-engine-prompt-cannot-be-empty (vllm-engine))"
            ],
        ),
        (
            f"{_VLLM_FRAME}ValueError: The prompt cannot be empty\n",
            None,
            [
                "<text>:1  Traceback (most recent call last):",
                "<text>:3  ValueError: The prompt cannot be empty  (known as "
                "vllm#vllm-engine-prompt-cannot-be-empty (vllm-engine))",
            ],
        ),
        (
            f"{_WRAPPED}ValueError: The prompt cannot be empty\n",
            None,
            [
                "<text>:1  Job entrypoint command failed with exit code 1, last available "
                "logs (truncated to 20,000 chars):",
                "<text>:2  ValueError: The prompt cannot be empty  (known as "
                "vllm#vllm-engine-prompt-cannot-be-empty (vllm-engine))",
            ],
        ),
        # the job's own exception stays the catch-all's, and so does one Ray says the
        # job's own task raised
        ("KeyError: 'reward_model'\n", "application_error", []),
        (
            "ray.exceptions.RayTaskError(ValueError): ray::Gen.run() (pid=1, ip=10.0.0.1)\n"
            "ValueError: The prompt cannot be empty\n",
            "application_error",
            [],
        ),
        # an inventory message that is a small part of the exception's text is no raise
        # of the emitting system (a user's KeyError that says `Key`)
        ("KeyError: Key 'reward_model' is missing from the batch\n", "application_error", []),
    ],
)
def test_the_catch_all_gives_way_to_an_emitting_systems_own_raise(
    text: str, primary: str | None, unknown: list[str]
) -> None:
    engine = engine_of(load_builtin(), lambda: known_messages([EMPTY_PROMPT, LOOKUP]))
    answer = to_json(engine.diagnose_text(text))
    assert (answer["primary"], answer["unknown"]) == (primary, unknown)
