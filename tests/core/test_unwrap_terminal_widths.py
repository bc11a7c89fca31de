"""A message a terminal cut at a standard width (80, 120 …) is joined again even when
it is the paste's only long line, and even when the cut fell inside a number or on
a space; a record of its own after such a line is still never joined."""

from __future__ import annotations

import pytest

from bot.core.normalize import unwrap

DEADLINE = (
    "The RayJob has passed the activeDeadlineSeconds. StartTime: 2025-11-03 10:00:02 "
    "+0000 UTC. ActiveDeadlineSeconds: 3600"
)


@pytest.mark.parametrize("width", [80, 120])
def test_a_single_line_cut_at_a_terminal_width_is_joined_without_a_space(width: int) -> None:
    text = "The node with node id: 5ad7fa5d and address: 10.4.3.21 has been marked dead " * 2
    lines = [text[i : i + width] for i in range(0, len(text), width)]
    joined = unwrap("\n".join(lines).encode())
    assert joined is not None
    assert joined[0] == text.encode()


def test_a_cut_before_a_sign_or_on_a_space_keeps_the_message_whole() -> None:
    first, rest = DEADLINE[:80], DEADLINE[80:]
    assert (first[-1], rest[0]) == (" ", "+")
    assert unwrap(f"{first}\n{rest}\n".encode()) == (DEADLINE.encode() + b"\n", [0, 2])


@pytest.mark.parametrize(
    "second",
    ["  indented", "- a list item", "2025-01-01 10:00:00 next", "ERROR next", "(raylet) next"],
)
def test_a_record_of_its_own_after_a_cut_line_is_not_joined(second: str) -> None:
    assert unwrap(f"{'x' * 80}\n{second}\n".encode()) is None
