"""A line that only says a container exited (its pod status's `Error` and exit code) is a
wrapper's line, like the entrypoint's exit code: never the line a card of unknown cause
names; a termination message, an OOM kill or a signal says more."""

from __future__ import annotations

import pytest

from bot.core.incidents.wrappers import says_only_it_failed


@pytest.mark.parametrize(
    ("line", "only_failed"),
    [
        ("container ray-job-submitter terminated: Error (exit code 1)", True),
        ("container ray-worker last terminated: Error (exit code 2)", True),
        ("container main terminated: no reason given", True),
        ("container  main   terminated:  Error (exit code 1)", True),  # spacing is no content
        ("container ray-worker terminated: OOMKilled (exit code 137)", False),
        ("container main terminated: Error (exit code 1, signal 9)", False),
        (
            "container main terminated: Error (exit code 1): flexlm: license server refused",
            False,
        ),
        ("ERROR flexlm: cannot check out feature 'sim' from 27000@license.corp.example", False),
    ],
)
def test_a_bare_container_exit_says_only_that_it_failed(line: str, only_failed: bool) -> None:
    assert says_only_it_failed(line) is only_failed
