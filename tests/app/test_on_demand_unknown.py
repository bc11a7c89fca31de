"""`/pitcrew diagnose`'s answer for evidence no playbook knows but that looks like a
failure: it says pitcrew does not know it and quotes the lines, instead of "No known
failure in the evidence"."""

from __future__ import annotations

from bot.app.on_demand import Found, summary
from bot.core.model import Diagnosis
from bot.daemon.feed import Context


def _found(unknown: tuple[str, ...]) -> Found:
    diagnosis = Diagnosis((), (), "text", unknown=unknown)
    return Found("Ray job raysubmit_x on cluster c: FAILED", diagnosis, (), Context("c", "ml"))


def test_the_answer_quotes_the_lines_of_a_failure_pitcrew_does_not_know() -> None:
    found = _found(("job:2  Traceback (most recent call last):", "job:4  QuuxError: gone"))
    assert summary(found, None) == (
        "Ray job raysubmit_x on cluster c: FAILED\n"
        "pitcrew does not know this failure; the lines that look like one:\n"
        "  job:2  Traceback (most recent call last):\n"
        "  job:4  QuuxError: gone"
    )


def test_the_answer_for_healthy_evidence_is_no_known_failure() -> None:
    assert summary(_found(()), None) == (
        "Ray job raysubmit_x on cluster c: FAILED\nNo known failure in the evidence."
    )
