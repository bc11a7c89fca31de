"""The message catalogue's files: what an entry must say, the errors a bad file gets,
how an entry is filled, and what each carrier makes of a message."""

from __future__ import annotations

import json

import pytest

from bot.core.errors import PlaybookError
from bot.core.quality.carriers import CARRIERS, carriers_for
from bot.core.quality.catalogue import Entry, fill, parse_catalogue

GOOD = """\
project: ray
entries:
  - id: raylet-store-full
    class: object_store_full
    signature: object-store-full/object-store-full-error
    emitter: raylet
    kind: log
    source: src/ray/object_manager/plasma/store.cc
    versions: "2.9.0-2.52.0"
    message: "Failed to put object {object_id} in store: {{size}} is {size} bytes."
    values: {object_id: "00ff01"}
"""


def _entry(**changes: object) -> Entry:
    data: dict[str, object] = {
        "id": "an-entry",
        "class": "pod_eviction",
        "signature": "pod-eviction/low-on-resource",
        "emitter": "kubelet",
        "kind": "log",
        "source": "pkg/kubelet/eviction/helpers.go",
        "versions": "1.28",
        "message": "The node was low on resource: memory.",
    }
    data.update(changes)
    return Entry.model_validate(data)


def test_a_good_file_gives_its_entries_with_their_lines() -> None:
    (item,) = parse_catalogue(GOOD, "ray-raylet.yaml")
    assert item.key == "ray-raylet.yaml#raylet-store-full"
    assert item.line == 3
    assert item.project == "ray"
    assert str(item.entry.category) == "object_store_full"


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (
            ("class: object_store_full", "class: object_store_fll"),
            "cat.yaml:4: entry 'raylet-store-full': class: Input should be",
        ),
        (
            ("    kind: log\n", ""),
            "cat.yaml:3: entry 'raylet-store-full': kind: required key is missing",
        ),
        (
            ("signature: object-store-full/object-store-full-error", "signature: nope"),
            "cat.yaml:5: entry 'raylet-store-full': signature: String should match pattern",
        ),
        (
            ('values: {object_id: "00ff01"}', 'values: {object: "00ff01"}'),
            "cat.yaml:3: entry 'raylet-store-full': values name no placeholder of the message: object",
        ),
        (
            ("in store:", "in {store:"),
            "cat.yaml:3: entry 'raylet-store-full': lone '{' at offset",
        ),
        (("project: ray", "project: rayy"), "cat.yaml:1: project: Input should be"),
        (
            ("    emitter: raylet\n", "    emitter: raylet\n    colour: red\n"),
            "cat.yaml:7: entry 'raylet-store-full': colour: unknown key",
        ),
    ],
)
def test_a_bad_file_names_the_file_line_entry_and_problem(
    edit: tuple[str, str], error: str
) -> None:
    text = GOOD.replace(*edit)
    assert text != GOOD
    with pytest.raises(PlaybookError) as raised:
        parse_catalogue(text, "cat.yaml")
    assert str(raised.value).startswith(error), str(raised.value)


def test_an_id_used_twice_is_refused_with_both_places() -> None:
    entry = GOOD.split("entries:\n", 1)[1]
    with pytest.raises(
        PlaybookError, match=r"cat.yaml:12: entry 'raylet-store-full': id already used"
    ):
        parse_catalogue(GOOD + entry, "cat.yaml")


def test_an_event_needs_its_reason() -> None:
    with pytest.raises(ValueError, match="an event entry needs the `reason`"):
        _entry(kind="event")


def test_fill_uses_the_values_then_a_default_by_name_and_keeps_doubled_braces() -> None:
    (item,) = parse_catalogue(GOOD, "cat.yaml")
    assert fill(item.entry) == "Failed to put object 00ff01 in store: {size} is 2 bytes."
    entry = _entry(message="node {node_ip} pod {pod} id {worker_id} {mystery_thing}")
    assert fill(entry) == (
        "node 10.4.3.21 pod train-grpo-worker-gpu-7xk2p "
        "id c8f0a3e2d6b1f4a97e5d0c3b2a1f9e8d7c6b5a40 mystery-thing"
    )


MESSAGE = "Failed to put object 00ff in object store.\nThe local object store is full."


@pytest.mark.parametrize(
    ("carrier", "expected"),
    [
        ("bare", MESSAGE),
        (
            "glog",
            "[2025-01-01 12:00:00,123 E 4721 4790] store.cc:123: Failed to put object 00ff in"
            " object store.\nThe local object store is full.",
        ),
        (
            "python-logging",
            "2025-01-01 12:00:00,123\tERROR store.py:123 -- Failed to put object 00ff in object"
            " store.\nThe local object store is full.",
        ),
        (
            "actor-prefix",
            "(TrainWorker pid=4721, ip=10.4.3.21) Failed to put object 00ff in object store.\n"
            "(TrainWorker pid=4721, ip=10.4.3.21) The local object store is full.",
        ),
        (
            "raylet-prefix",
            "(raylet, ip=10.4.3.21) Failed to put object 00ff in object store.\n"
            "(raylet, ip=10.4.3.21) The local object store is full.",
        ),
        (
            "repeated",
            "(TrainWorker pid=4721, ip=10.4.3.21) Failed to put object 00ff in object store."
            " [repeated 3x across cluster]\n"
            "(TrainWorker pid=4721, ip=10.4.3.21) The local object store is full."
            " [repeated 3x across cluster]",
        ),
        (
            "colour",
            "\x1b[36m(TrainWorker pid=4721, ip=10.4.3.21)\x1b[0m \x1b[1m\x1b[31mFailed to put"
            " object 00ff in object store.\x1b[0m\n\x1b[36m(TrainWorker pid=4721,"
            " ip=10.4.3.21)\x1b[0m \x1b[1m\x1b[31mThe local object store is full.\x1b[0m",
        ),
        ("first-line", "Failed to put object 00ff in object store."),
        ("wrap-80", None),
        (
            "markdown-fence",
            "The job fails with this error:\n\n```text\nFailed to put object 00ff in object"
            " store.\nThe local object store is full.\n```\n",
        ),
        (
            "quoted",
            "> Failed to put object 00ff in object store.\n> The local object store is full.",
        ),
        (
            "pipe-prefix",
            "  | Failed to put object 00ff in object store.\n  | The local object store is full.",
        ),
        ("table-cell", None),
        (
            "indented",
            "I see this in the logs:\n\n    Failed to put object 00ff in object store.\n"
            "    The local object store is full.",
        ),
        (
            "backticks",
            "The pod logs show\n`Failed to put object 00ff in object store.\nThe local object"
            " store is full.`\nevery few minutes.",
        ),
        (
            "journal",
            "Nov 03 10:14:20 gke-ml-a100-pool-8f2c-vq4n kubelet[1234]: Failed to put object 00ff in"
            " object store.\nNov 03 10:14:20 gke-ml-a100-pool-8f2c-vq4n kubelet[1234]: The local"
            " object store is full.",
        ),
        (
            "cri-log",
            "2025-11-03T10:14:20.123456789Z stderr F Failed to put object 00ff in object store.\n"
            "2025-11-03T10:14:20.123456789Z stderr F The local object store is full.",
        ),
        (
            "operator-json",
            '{"level": "error", "ts": "2025-11-03T10:14:20.123Z", "logger":'
            ' "controllers.RayCluster", "msg": "Reconciler error", "error": "Failed to put object'
            ' 00ff in object store.\\nThe local object store is full."}',
        ),
        (
            "windows-crlf",
            "[2025-01-01 12:00:00,123 E 4721 4790] store.cc:123: Failed to put object 00ff in"
            " object store.\r\nThe local object store is full.\r\n",
        ),
    ],
)
def test_each_log_carrier_wraps_the_message_as_a_user_meets_it(
    carrier: str, expected: str | None
) -> None:
    entry = _entry(source="src/ray/object_manager/plasma/store.cc")
    (found,) = [c for c in carriers_for("log") if c.name == carrier]
    assert found.carry(entry, MESSAGE) == expected


def test_a_terminal_cuts_every_line_at_its_width_mid_token() -> None:
    (wrap,) = [c for c in CARRIERS if c.name == "wrap-80"]
    message = "x" * 100 + "\nshort"
    assert wrap.carry(_entry(), message) == "x" * 80 + "\n" + "x" * 20 + "\nshort"


def test_json_carriers_escape_the_message_into_the_status_users_read() -> None:
    (status,) = [c for c in carriers_for("log") if c.name == "rayjob-status"]
    data = json.loads(status.carry(_entry(), MESSAGE) or "")
    assert data["status"]["message"] == (
        "Job entrypoint command failed with exit code 1, last available logs "
        f"(truncated to 20,000 chars):\n{MESSAGE}\n"
    )
    (record,) = [c for c in carriers_for("log") if c.name == "job-record"]
    assert json.loads(record.carry(_entry(), MESSAGE) or "")["status"] == "FAILED"


def test_event_carriers_print_the_reason_beside_the_message() -> None:
    entry = _entry(kind="event", reason="Evicted", emitter="eviction_manager")
    by_name = {
        c.name: c.carry(entry, "The node was low on resource: memory.")
        for c in CARRIERS
        if c.kind == "event"
    }
    assert by_name["get-events"] == (
        "LAST SEEN   TYPE      REASON   OBJECT   MESSAGE\n"
        "3m12s       Warning   Evicted   pod/train-grpo-worker-gpu-7xk2p"
        "   The node was low on resource: memory."
    )
    assert (
        "  Warning  Evicted  3m12s (x4 over 9m)  kubelet  The node was low on resource: memory."
        in (by_name["describe-events"] or "")
    )
    event = json.loads(by_name["event-json"] or "")
    assert (event["reason"], event["involvedObject"]["kind"]) == ("Evicted", "Pod")


def test_status_carriers_give_the_object_kind_its_status_fields() -> None:
    entry = _entry(kind="status", object="RayJob", reason="DeadlineExceeded")
    (as_yaml,) = [c for c in CARRIERS if c.name == "status-yaml"]
    assert as_yaml.carry(entry, "The RayJob has passed") == (
        "apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: train-grpo\n  namespace: ml\n"
        'status:\n  jobDeploymentStatus: "Failed"\n  jobStatus: "FAILED"\n'
        '  reason: "DeadlineExceeded"\n  message: "The RayJob has passed"'
    )


WORDINGS = """\
project: ray
entries:
  - id: gcs-check-alive
    class: node_lost_preemption
    signature: node-lost-preemption/raylet-health-check
    emitter: gcs
    kind: log
    source: src/ray/gcs/gcs_server/gcs_health_check_manager.cc
    versions: "ray-2.9.0 - ray-2.52.0"
    message: &current "Node {node_id} is dead and address: {ip}"
    wordings:
      - template: "Node {node_id} is dead and ip: {ip}"
        versions: "ray-2.0.0 - ray-2.8.1"
        source: src/ray/gcs/gcs_server/gcs_node_manager.cc
        values: {ip: "10.0.0.1"}
      - template: *current
        versions: "ray-2.9.0 - ray-2.52.0"
"""


def test_an_entry_keeps_every_wording_with_its_file_and_tags() -> None:
    (item,) = parse_catalogue(WORDINGS, "cat.yaml")
    old, new = item.entry.every_wording
    assert (old.source, old.versions) == (
        "src/ray/gcs/gcs_server/gcs_node_manager.cc",
        "ray-2.0.0 - ray-2.8.1",
    )
    assert new.template == item.entry.message
    assert fill(item.entry, old) == (
        "Node c8f0a3e2d6b1f4a97e5d0c3b2a1f9e8d7c6b5a40 is dead and ip: 10.0.0.1"
    )
    assert fill(item.entry, new).endswith("and address: 10.4.3.21")


def test_an_entry_without_wordings_has_its_message_as_its_one_wording() -> None:
    (item,) = parse_catalogue(GOOD, "cat.yaml")
    (only,) = item.entry.every_wording
    assert (only.template, only.versions) == (item.entry.message, "2.9.0-2.52.0")


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (
            ("- template: *current", "- template: Node {node_id} is gone"),
            "cat.yaml:11: entry 'gcs-check-alive': wordings: the message is none of the"
            " wordings: list it as one (`message: &current ...`, then `- template: *current`)",
        ),
        (
            ("- template: *current", '- template: "Node {node_id} is dead and ip: {ip}"'),
            "cat.yaml:11: entry 'gcs-check-alive': wordings: wordings 0 and 1 are the same text",
        ),
        (
            ('values: {ip: "10.0.0.1"}', 'values: {port: "1"}'),
            "cat.yaml:12: entry 'gcs-check-alive': wordings.0: values name no placeholder of"
            " the template: port",
        ),
        (
            ('        versions: "ray-2.0.0 - ray-2.8.1"\n', ""),
            "cat.yaml:12: entry 'gcs-check-alive': wordings.0.versions: required key is missing",
        ),
        (
            ("is dead and ip: {ip}", "is dead and ip: {ip"),
            "cat.yaml:12: entry 'gcs-check-alive': wordings.0.template: lone '{' at offset",
        ),
    ],
)
def test_a_bad_wording_names_the_file_line_entry_and_problem(
    edit: tuple[str, str], error: str
) -> None:
    text = WORDINGS.replace(*edit)
    assert text != WORDINGS
    with pytest.raises(PlaybookError) as raised:
        parse_catalogue(text, "cat.yaml")
    assert str(raised.value).startswith(error), str(raised.value)
