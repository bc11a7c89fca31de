"""Clicks for another cluster's pitcrew are kept (in the store's bookmarks) and reported
with the fix for an hour after the last one: two pitcrews share one Slack app."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.daemon.strays import KEY, StrayRecorder, problem, read, recorded

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Marks(dict[str, str]):
    def set(self, key: str, value: str) -> None:
        self[key] = value


def test_each_click_for_another_cluster_is_counted_per_cluster() -> None:
    value = recorded(None, "eu-b", T0)
    value = recorded(value, "eu-b", T0 + timedelta(minutes=2))
    value = recorded(value, "us-c", T0 + timedelta(minutes=3))
    assert [(s.cluster, s.count, s.first, s.last) for s in read(value)] == [
        ("eu-b", 2, T0, T0 + timedelta(minutes=2)),
        ("us-c", 1, T0 + timedelta(minutes=3), T0 + timedelta(minutes=3)),
    ]


def test_the_problem_names_the_clusters_and_the_fix_for_an_hour() -> None:
    value = recorded(recorded(None, "eu-b", T0), "eu-b", T0 + timedelta(minutes=2))
    assert problem(value, "eu-a", T0 + timedelta(minutes=5)) == (
        "clicks for other clusters reached this pitcrew (cluster eu-a): 2 for cluster eu-b "
        "(the last at 2026-03-01 12:02:00 UTC). Two pitcrews share one Slack app, and each "
        "misses clicks meant for it. Fix: give each cluster its own Slack app in Socket Mode, "
        "or run HTTP mode with one Request URL per cluster (docs/operations.md, Several "
        "clusters)"
    )
    assert problem(value, "eu-a", T0 + timedelta(minutes=62)) == ""


def test_nothing_recorded_or_a_record_it_cannot_read_is_no_problem() -> None:
    assert problem(None, "eu-a", T0) == ""
    assert problem("{not json", "eu-a", T0) == ""
    assert read('{"eu-b": {"count": "x"}}') == ()


def test_the_recorder_keeps_the_clicks_in_the_bookmarks() -> None:
    marks = Marks()
    record = StrayRecorder(marks, lambda: T0)
    record("eu-b")
    record("eu-b")
    assert [(s.cluster, s.count) for s in read(marks[KEY])] == [("eu-b", 2)]
