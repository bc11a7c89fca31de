"""A playbook's regex runs on RE2, in time linear in its input: what RE2 cannot run is
refused with why and what to do instead; what it runs matches as `re` would."""

from __future__ import annotations

import pytest

from bot.core import linear


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        (
            r"(?=a)a",
            "RE2 cannot run it (invalid perl operator: (?=): lookarounds and backreferences "
            "need a backtracking engine, which a log line can stall; rewrite it, for example "
            "with `unless` for what must not match",
        ),
        (
            r"(a)\1",
            "RE2 cannot run it (invalid escape sequence: \\1): lookarounds and backreferences "
            "need a backtracking engine, which a log line can stall; rewrite it, for example "
            "with `unless` for what must not match",
        ),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_saying_why(pattern: str, said: str) -> None:
    with pytest.raises(linear.LinearError) as refused:
        linear.check(pattern)
    assert str(refused.value) == said


@pytest.mark.parametrize(
    ("pattern", "text", "groups"),
    [
        (
            r"name (?P<name>\S+) \(namespace=(?P<ns>[^)]*)\)",
            "name rc (namespace=None)",
            {"name": "rc", "ns": "None"},
        ),
        (r"^(a+)+$", "a" * 26 + "!", None),  # exponential for `re`, linear here
        (r"OOMKilled", "Reason: OOMKilled", {}),
    ],
)
def test_search_finds_what_re_would_with_named_groups(
    pattern: str, text: str, groups: dict[str, str] | None
) -> None:
    found = linear.compiled(pattern).search(text)
    assert (found.groupdict() if found else None) == groups


def test_ignore_case_and_bytes_and_the_same_compiled_pattern_twice() -> None:
    assert linear.Linear("oom", ignore_case=True).search("OOMKilled") is not None
    found = linear.Linear(rb"exit code (?P<code>\d+)").search(b"exit code 137")
    assert found is not None
    assert found.groupdict() == {"code": b"137"}
    assert linear.compiled("x") is linear.compiled("x")
