"""`/pitcrew bundle INCIDENT`: parsed, and answered with the incident's kept bundles and
the command that writes them out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.adapters.slack.commands import BundleCommand, Usage, explain_bundles, parse

AT = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("bundle inc-3b2cb30a2b", BundleCommand("inc-3b2cb30a2b")),
        ("bundle", Usage("`bundle` takes one incident id.")),
        ("bundle a b", Usage("`bundle` takes one incident id.")),
    ],
)
def test_parse(text: str, command: object) -> None:
    assert parse(text) == command


def test_the_answer_lists_the_bundles_and_how_to_write_them_out() -> None:
    kept = [("failed.tar.gz", 3234, AT), ("train-try2.tar.gz", 2048, AT)]
    assert explain_bundles("inc-1", kept) == (
        "*Evidence bundles of `inc-1`* (kept after the cluster is gone):\n"
        "• `failed.tar.gz`: 3.2 KiB, captured 2026-11-03 10:00:00 UTC\n"
        "• `train-try2.tar.gz`: 2.0 KiB, captured 2026-11-03 10:00:00 UTC\n"
        "Write them out: `pitcrew bundle inc-1` (one tar.gz)."
    )
    assert explain_bundles("inc-2", []) == "No evidence bundle is kept for `inc-2`."
