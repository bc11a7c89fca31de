"""Which inventory message a failure-looking line is (bot.core.diagnosis.known_messages)."""

from __future__ import annotations

import pytest

from bot.core.diagnosis.known_messages import KnownMessage, found, known_messages, name_lines
from bot.core.diagnosis.unmatched import FailureLine

SECRET = KnownMessage(
    "kubernetes#kubelet-couldn-t-find-key-in-secret",
    "kubelet",
    "pod_config_error",
    (("couldn't find key", "in Secret", "/"),),
)
GCS = KnownMessage(
    "ray-python#ray-core-python-failed-to-connect-to-gcs",
    "ray-core-python",
    "gcs_unreachable",
    (
        ("Failed to connect to GCS at address", "within", "seconds."),
        ("Failed to connect to GCS within", "seconds."),
    ),
)
DEPRECATED = KnownMessage(
    "containerd#containerd-cri-auths-is-deprecated-please-use-configs-instead",
    "containerd-cri",
    "none",
    (("`auths` is deprecated, please use `configs` instead",),),
)
KNOWN = known_messages([SECRET, GCS, DEPRECATED])


@pytest.mark.parametrize(
    ("line", "key"),
    [
        (
            "E1206 12:00:00.000000 4721 kuberuntime_container.go:123] couldn't find key "
            "password in Secret ml/db-creds",
            SECRET.key,
        ),
        (
            "2025-01-01 12:00:00,123\tERROR worker.py:123 -- Failed to connect to GCS at address "
            "10.4.0.9:6379 within 60 seconds.",
            GCS.key,
        ),
        ("(raylet) Failed to connect to GCS within 60 seconds.", GCS.key),
        # cut by an 80-column wrap: the run of parts it holds is long enough
        ("Failed to connect to GCS at address 10.4.0.9:6379 wi", GCS.key),
        ("couldn't find the cluster", None),
        ("Failed to connect to", None),
    ],
)
def test_a_line_is_named_by_the_message_whose_literal_parts_it_holds(
    line: str, key: str | None
) -> None:
    hit = KNOWN.recognize(line)
    assert (hit.message.key if hit else None) == key


@pytest.mark.parametrize(
    ("parts", "text", "score"),
    [
        (("a failure of", "in", "seconds"), "a failure of X in 3 seconds", 21),
        (("a failure of", "in", "seconds"), "seconds in a failure of", 0),
        (
            ("Failed to connect to GCS at address", "within"),
            "Failed to connect to GCS at address",
            35,
        ),
        (("short", "parts"), "short", 0),
    ],
)
def test_found_counts_the_literal_characters_in_order(
    parts: tuple[str, ...], text: str, score: int
) -> None:
    assert found(parts, text) == score


def test_the_unknown_answer_names_the_entry_and_leaves_out_a_benign_one() -> None:
    lines = [
        FailureLine("ERROR couldn't find key password in Secret ml/db-creds", 1, "<stdin>"),
        FailureLine('level=warning msg="`auths` is deprecated, please use `configs` instead"', 2),
        FailureLine("ERROR something nobody printed before", 3),
    ]
    assert [line.text for line in name_lines(KNOWN, lines)] == [
        "ERROR couldn't find key password in Secret ml/db-creds  (known as "
        "kubernetes#kubelet-couldn-t-find-key-in-secret (kubelet))",
        "ERROR something nobody printed before",
    ]


def test_nothing_is_indexed_until_a_line_is_asked_about() -> None:
    known = known_messages([SECRET])
    assert known._index is None
    known.recognize("no such message")
    assert known._index == {"couldn": (0, 0)}  # (message, wording) pairs, flat
