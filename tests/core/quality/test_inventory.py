"""The message inventory's file format (bot.core.quality.inventory)."""

from __future__ import annotations

import json

import pytest

from bot.core.diagnosis.known_messages import literal_parts, read_known
from bot.core.errors import PlaybookError
from bot.core.quality.inventory import parse_inventory

HEADER = {
    "project": "kuberay",
    "read": "ray-project/kuberay at v1.7.0",
    "releases": ["v1.6.2", "v1.7.0"],
}
EVENT = {
    "id": "rayjob-controller-failed-to-create-k8s-job",
    "emitter": "rayjob-controller",
    "level": "event-warning",
    "kind": "event",
    "reason": "FailedToCreateK8sJob",
    "source": "ray-operator/controllers/ray/rayjob_controller.go",
    "versions": "v1.6.2-v1.7.0",
    "wordings": [
        {
            "template": "Failed to create new Kubernetes Job {namespace}/{name}: {error}",
            "versions": "v1.6.2-v1.7.0",
        }
    ],
    "verdict": "rayjob_cr_failure",
}
RAISE = {
    "id": "kuberay-operator-no-providers-registered",
    "emitter": "kuberay-operator",
    "level": "raise",
    "exception": "ValueError",
    "kind": "log",
    "source": "ray-operator/pkg/x.go",
    "versions": "v1.7.0",
    "wordings": [{"template": "no {name} providers registered", "versions": "v1.7.0"}],
    "verdict": "unclassified",
}


def jsonl(*objects: object) -> str:
    return "".join(json.dumps(o) + "\n" for o in objects)


GOOD = jsonl(HEADER, EVENT, RAISE)


def test_a_file_reads_into_entries_keyed_by_file_and_id() -> None:
    entries = parse_inventory(GOOD, "playbooks/inventory/kuberay.jsonl")
    assert [(e.key, e.verdict, e.line) for e in entries] == [
        ("kuberay#rayjob-controller-failed-to-create-k8s-job", "rayjob_cr_failure", 2),
        ("kuberay#kuberay-operator-no-providers-registered", "unclassified", 3),
    ]
    assert entries[1].printed("no volcano providers registered") == (
        "ValueError: no volcano providers registered"
    )


def test_the_matcher_reads_the_same_file_without_checking_it() -> None:
    known = list(read_known(GOOD + "not an entry\n", "playbooks/inventory/kuberay.jsonl"))
    assert [(k.key, k.emitter, k.verdict, k.wordings) for k in known] == [
        (
            "kuberay#rayjob-controller-failed-to-create-k8s-job",
            "rayjob-controller",
            "rayjob_cr_failure",
            (("Failed to create new Kubernetes Job", "/", ":"),),
        ),
        (
            "kuberay#kuberay-operator-no-providers-registered",
            "kuberay-operator",
            "unclassified",
            (("no", "providers registered"),),
        ),
    ]


def _without(entry: dict[str, object], key: str) -> dict[str, object]:
    return {k: v for k, v in entry.items() if k != key}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            jsonl(HEADER, {**EVENT, "verdict": "rayjob_failure"}),
            "k.jsonl:2: entry 'rayjob-controller-failed-to-create-k8s-job': verdict "
            "'rayjob_failure' is no TAXONOMY class, none or unclassified",
        ),
        (
            jsonl(HEADER, _without(EVENT, "reason")),
            "k.jsonl:2: entry 'rayjob-controller-failed-to-create-k8s-job': an event entry "
            "needs the `reason` printed beside its message",
        ),
        (
            jsonl(HEADER, EVENT, _without(RAISE, "exception")),
            "k.jsonl:3: entry 'kuberay-operator-no-providers-registered': `exception` is given "
            "for a raise, and only for a raise",
        ),
        (
            jsonl(HEADER, {**RAISE, "wordings": [{"template": "no {x", "versions": "v1.7.0"}]}),
            "k.jsonl:2: entry 'kuberay-operator-no-providers-registered': wordings.0: "
            "lone '{' at offset 3: write {{",
        ),
        (
            jsonl(HEADER, EVENT, {**RAISE, "id": EVENT["id"]}),
            "k.jsonl:3: entry 'rayjob-controller-failed-to-create-k8s-job': id already used "
            "(line 2)",
        ),
        (
            jsonl(HEADER, {**RAISE, "colour": "red"}),
            "k.jsonl:2: entry 'kuberay-operator-no-providers-registered': colour: unknown key",
        ),
        (
            jsonl(HEADER) + '{"id": "cut-in-the-\n',
            "k.jsonl:2: not JSON: Unterminated string starting at",
        ),
        (
            jsonl({**HEADER, "project": "slack"}, EVENT),
            "k.jsonl:1: header: project: Input should be 'ray', 'kuberay', 'kubernetes', "
            "'vllm', 'pytorch', 'nccl', 'nvidia', 'containerd', 'cri-o', 'runc', 'slurm' or "
            "'linux'",
        ),
        (jsonl(HEADER), "k.jsonl: no entries: a header line and one entry a line"),
    ],
)
def test_a_bad_file_names_its_line_entry_and_problem(text: str, message: str) -> None:
    with pytest.raises(PlaybookError) as error:
        parse_inventory(text, "k.jsonl")
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("template", "parts"),
    [
        ("Failed to create new Kubernetes Job {namespace}/{name}: {error}",
         ("Failed to create new Kubernetes Job", "/", ":")),
        ("Check failed: {{a}} != nullptr", ("Check failed: {a} != nullptr",)),
        ("{a}  spaced   out {b}", ("spaced out",)),
    ],
)  # fmt: skip
def test_literal_parts_are_the_text_between_placeholders(
    template: str, parts: tuple[str, ...]
) -> None:
    assert literal_parts(template) == parts
