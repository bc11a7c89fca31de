"""The unknown answer names the inventory entry of each line it knows
(bot.core.diagnosis.engine with bot.core.diagnosis.known_messages)."""

from __future__ import annotations

from bot.adapters.files.playbooks import load_builtin
from bot.core.diagnosis.engine import Engine, to_json
from bot.core.diagnosis.known_messages import KnownMessage, KnownMessages, known_messages

SECRET = KnownMessage(
    "kubernetes#kubelet-couldn-t-find-key-in-secret",
    "kubelet",
    "pod_config_error",
    (("couldn't find key", "in Secret", "/"),),
)


def test_the_inventory_is_read_only_for_a_line_no_playbook_knows() -> None:
    asked: list[int] = []

    def known() -> KnownMessages:
        asked.append(1)
        return known_messages([SECRET])

    engine = Engine(load_builtin(), None, known)
    assert engine.diagnose_text("INFO all is well\n").unknown == ()
    assert asked == []
    diagnosis = engine.diagnose_text("ERROR: couldn't find key password in Secret ml/db-creds\n")
    assert to_json(diagnosis)["unknown"] == [
        "<text>:1  ERROR: couldn't find key password in Secret ml/db-creds  (known as "
        "kubernetes#kubelet-couldn-t-find-key-in-secret (kubelet))"
    ]
    engine.diagnose_text("ERROR: couldn't find key token in Secret ml/api\n")
    assert asked == [1]
