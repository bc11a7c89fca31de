"""A pod-log read that found nothing is tried again after each delay, then given up
(bot.adapters.kubernetes.log_retries)."""

from __future__ import annotations

from bot.adapters.kubernetes.log_retries import LogRead, LogRetries
from bot.core.model import ObjectRef, SourceKind

POD = ObjectRef("Pod", "verl-ppo-qwen-x9z2k", "ml-train")
JOB = ObjectRef("RayJob", "verl-ppo-qwen", "ml-train")


def read() -> LogRead:
    return LogRead(POD, "ray-job-submitter", False, JOB, SourceKind.DRIVER_LOG)


def test_a_read_is_due_after_each_delay_in_turn_and_then_given_up() -> None:
    retries = LogRetries((2.0, 5.0))
    assert retries.later(read(), now=100.0)
    assert retries.due(101.9) == []
    (first,) = retries.due(102.0)
    assert (first.attempt, first.due) == (1, 102.0)
    assert retries.later(first, now=102.0)
    assert retries.due(106.9) == []
    (second,) = retries.due(107.0)
    assert second.attempt == 2
    assert not retries.later(second, now=107.0)  # its tries are used up
    assert len(retries) == 0


def test_a_log_read_by_a_later_signal_is_not_tried_again() -> None:
    retries = LogRetries((2.0,))
    retries.later(read(), now=0.0)
    retries.done(read().key)
    assert retries.due(10.0) == []


def test_one_log_waits_once_whatever_how_often_it_was_missed() -> None:
    retries = LogRetries((2.0, 5.0))
    retries.later(read(), now=0.0)
    retries.later(read(), now=1.0)
    assert [r.due for r in retries.due(10.0)] == [3.0]
