"""The message inventory's file format (bot.core.quality.inventory)."""

from __future__ import annotations

import pytest

from bot.core.errors import PlaybookError
from bot.core.quality.inventory import literal_parts, parse_inventory

GOOD = """\
project: kuberay
read: "ray-project/kuberay at v1.7.0"
releases: [v1.6.2, v1.7.0]
entries:
  - id: rayjob-controller-failed-to-create-k8s-job
    emitter: rayjob-controller
    level: event-warning
    kind: event
    reason: FailedToCreateK8sJob
    source: ray-operator/controllers/ray/rayjob_controller.go
    versions: v1.6.2-v1.7.0
    wordings:
      - template: "Failed to create new Kubernetes Job {namespace}/{name}: {error}"
        versions: v1.6.2-v1.7.0
    verdict: rayjob_cr_failure
  - id: kuberay-operator-no-providers-registered
    emitter: kuberay-operator
    level: raise
    exception: ValueError
    kind: log
    source: ray-operator/pkg/x.go
    versions: v1.7.0
    wordings:
      - template: "no {name} providers registered"
        versions: v1.7.0
    verdict: unclassified
"""


def test_a_file_reads_into_entries_keyed_by_file_and_id() -> None:
    entries = parse_inventory(GOOD, "playbooks/inventory/kuberay.yaml")
    assert [(e.key, e.verdict, e.line) for e in entries] == [
        ("kuberay.yaml#rayjob-controller-failed-to-create-k8s-job", "rayjob_cr_failure", 5),
        ("kuberay.yaml#kuberay-operator-no-providers-registered", "unclassified", 16),
    ]
    assert entries[1].printed("no volcano providers registered") == (
        "ValueError: no volcano providers registered"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("verdict: rayjob_cr_failure", "verdict: rayjob_failure"),
            "k.yaml:5: entry 'rayjob-controller-failed-to-create-k8s-job': verdict "
            "'rayjob_failure' is no TAXONOMY class, none or unclassified",
        ),
        (
            ("    reason: FailedToCreateK8sJob\n", ""),
            "k.yaml:5: entry 'rayjob-controller-failed-to-create-k8s-job': an event entry "
            "needs the `reason` printed beside its message",
        ),
        (
            ("    exception: ValueError\n", ""),
            "k.yaml:16: entry 'kuberay-operator-no-providers-registered': `exception` is given "
            "for a raise, and only for a raise",
        ),
        (
            ('providers registered"', 'providers {registered"'),
            "k.yaml:24: entry 'kuberay-operator-no-providers-registered': wordings.0: "
            "lone '{' at offset 20: write {{",
        ),
        (
            (
                "kuberay-operator-no-providers-registered",
                "rayjob-controller-failed-to-create-k8s-job",
            ),
            "k.yaml:16: entry 'rayjob-controller-failed-to-create-k8s-job': id already used "
            "(entry 0)",
        ),
        (
            ("    kind: log\n", "    kind: log\n    colour: red\n"),
            "k.yaml:21: entry 'kuberay-operator-no-providers-registered': colour: unknown key",
        ),
    ],
)
def test_a_bad_file_names_its_line_entry_and_problem(change: tuple[str, str], message: str) -> None:
    with pytest.raises(PlaybookError) as error:
        parse_inventory(GOOD.replace(*change), "k.yaml")
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
