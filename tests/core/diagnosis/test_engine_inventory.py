"""The unknown answer names the inventory entry of each line it knows
(bot.core.diagnosis.engine with bot.core.diagnosis.known_messages)."""

from __future__ import annotations

from bot.adapters.files.playbooks import load_builtin
from bot.core.diagnosis.engine import Engine, to_json
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

    engine = Engine(load_builtin(), None, known)
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
