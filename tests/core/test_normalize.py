"""What people paste carries decorations no signature spells: colour codes, Ray's dedup
suffix, actor and raylet prefixes. The classifier sees through them, and its evidence
still shows the user's own text with the user's line numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.adapters.files.playbooks import load_library
from bot.core.diagnosis.classifier import Classifier
from bot.core.diagnosis.regexes import can_span_lines
from bot.core.normalize import (
    lenient_anchors,
    unwrap,
    without_colour,
    without_dedup,
    without_prefixes,
)
from tests.support.playbooks import playbook, write_library

TAKEN = r"The name (?P<name>\S+) \(namespace=(?P<ns>[^)]*)\) is already taken"
KUBECTL_OOM = r"^(?P<pod>[a-z0-9][-a-z0-9.]*)\s+\d+/\d+\s+OOMKilled\s+\d+"


def _classifier(tmp_path: Path) -> Classifier:
    directory = write_library(
        tmp_path / "pb",
        playbook("clash", "named_actor_conflict", [{"name": "taken", "regex": TAKEN}]),
        playbook("oom", "pod_oom_killed", [{"name": "table", "regex": KUBECTL_OOM}]),
    )
    (directory / "noise.yaml").write_text(
        "noise:\n"
        "  - regex: '\\[repeated \\d+x across cluster\\]'\n    why: dedup marker\n"
        "  - regex: 'Ray deduplicates logs by default'\n    why: dedup notice\n"
    )
    return Classifier(load_library([directory]))


@pytest.mark.parametrize(
    ("line", "times"),
    [
        (
            "(WorkerDict pid=7) The name a (namespace=x) is already taken [repeated 6x across cluster]",
            6,
        ),
        (
            "(WorkerDict pid=7) The name a (namespace=x) is already taken [repeated 2x across "
            "cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log "
            "deduplication, or see https://docs.ray.io/en/master/ray-observability/user-guides/"
            "configure-logging.html#log-deduplication for more options.)",
            2,
        ),
    ],
)
def test_a_deduplicated_line_counts_as_often_as_it_was_seen_and_is_never_benign(
    tmp_path: Path, line: str, times: int
) -> None:
    (hit,) = _classifier(tmp_path).scan_log([f"start\n{line}\n".encode()])
    assert hit.count == times
    assert hit.evidence == [(line, 2)]


def test_colour_codes_in_either_form_do_not_break_a_signature_and_evidence_keeps_them(
    tmp_path: Path,
) -> None:
    escape = "(raylet) The name \x1b[1ma\x1b[0m (namespace=x) is already taken"
    literal = "#033[36m(raylet)#033[0m The name #033[1mb#033[0m (namespace=x) is already taken"
    (hit,) = _classifier(tmp_path).scan_log([f"one\n{escape}\ntwo\n{literal}\n".encode()])
    assert hit.captures == {"name": "a", "ns": "x"}
    assert hit.count == 2
    assert hit.evidence == [(escape, 2), (literal, 4)]


def test_a_line_anchored_signature_matches_behind_an_actor_or_raylet_prefix(
    tmp_path: Path,
) -> None:
    text = (
        b"NAME READY STATUS\n"
        b"(TaskRunner pid=91, ip=10.0.0.1) ray-head-x 0/1 OOMKilled 3 2m\n"
        b"(raylet) ray-worker-y 0/1 OOMKilled 1 1m\n"
    )
    (hit,) = _classifier(tmp_path).scan_log([text])
    assert hit.captures == {"pod": "ray-head-x"}
    assert [line for _, line in hit.evidence] == [2, 3]
    assert hit.evidence[0][0].startswith("(TaskRunner pid=91, ip=10.0.0.1) ray-head-x")


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        (b"(WorkerDict pid=1, ip=10.0.0.1) x\n(raylet) y\n", b"x\ny\n"),
        (b"(raylet, ip=172.31.66.10) a\n(autoscaler +8m46s) b\n", b"a\nb\n"),
        (
            b"(pid=runtime_env, ip=192.168.1.100) c\n[2025-05-10 00:18:21] (WorkerDict pid=1) d\n",
            b"c\nd\n",
        ),
        (b"(not a prefix) e\n", b"(not a prefix) e\n"),
    ],
)
def test_prefixes_are_removed_line_by_line(text: bytes, plain: bytes) -> None:
    assert without_prefixes(text) == plain


def test_normalizing_keeps_the_line_count() -> None:
    text = b"\x1b[31ma\x1b[0m\n#033[1mb\n(raylet) c\n"
    assert without_colour(text).count(b"\n") == text.count(b"\n") == 3
    assert without_prefixes(text).count(b"\n") == 3
    assert without_dedup("x [repeated 3x across cluster]") == ("x", 3)
    assert without_dedup("x") == ("x", 1)


@pytest.mark.parametrize(
    ("pattern", "lenient"),
    [
        ("^a", r"(?:^|\) )a"),
        (r"x|^\s+b", r"x|(?:^|\) )\s+b"),
        (r"[^a]\^", r"[^a]\^"),
        ("no anchor", "no anchor"),
        (r"[\]^]^x", r"[\]^](?:^|\) )x"),  # an escaped `]` does not end the class
        (r"[^x", r"[^x"),  # an unclosed class runs to the end
        ("a\\", "a\\"),  # a trailing backslash escapes nothing
        (r"(^a|^b)", r"((?:^|\) )a|(?:^|\) )b)"),
    ],
)
def test_only_real_line_anchors_become_lenient(pattern: str, lenient: str) -> None:
    assert lenient_anchors(pattern) == lenient


@pytest.mark.parametrize(
    ("pattern", "spans"),
    [
        (r"foo[^\n]*bar", False),
        (r"name (?P<n>[^\s(]+) is taken", False),
        (r"(?<!\d)(?P<k>[1-9]\d*) Workers", False),
        (r"x.*y", False),
        (r"foo\s+bar", True),
        (r"a[^)]*b", True),
        (r"(?s)x.*y", True),
        (r"Demands:[ \t]*\r?\n", True),
    ],
)
def test_which_regexes_can_match_across_lines(pattern: str, spans: bool) -> None:
    assert can_span_lines(pattern) is spans


MESSAGE = (
    "ValueError: The name qwAKMv_register_center (namespace=None) is already taken. "
    "Please use a different name or get the existing actor using ray.get_actor()"
)


def test_a_message_a_reporter_broke_at_a_space_is_joined_again(tmp_path: Path) -> None:
    first, second = MESSAGE[:71], MESSAGE[72:]
    assert first.endswith("already")
    assert second.startswith("taken.")
    (hit,) = _classifier(tmp_path).scan_log([f"Seen:\n{first}\n{second}\n".encode()])
    assert hit.captures == {"name": "qwAKMv_register_center", "ns": "None"}
    assert hit.evidence == [(f"{first}\n{second}", 2)]


def test_a_message_a_terminal_cut_inside_a_word_is_joined_without_a_space(
    tmp_path: Path,
) -> None:
    width = 70
    filler = "(raylet) " + "x" * (width - 9)
    cut = [MESSAGE[i : i + width] for i in range(0, len(MESSAGE), width)]
    assert not cut[0].endswith(" ")
    assert len(cut[0]) == width
    text = "\n".join([filler, *cut]) + "\n"
    (hit,) = _classifier(tmp_path).scan_log([text.encode()])
    assert hit.captures["name"] == "qwAKMv_register_center"
    assert hit.evidence[0][1] == 2


def test_lines_that_start_records_of_their_own_are_never_joined() -> None:
    long = "x" * 80
    for second in (
        "  indented",
        "(raylet) next",
        "2025-01-01 10:00 next",
        "ERROR next",
        'File "a.py"',
    ):
        assert unwrap(f"{long}\n{second}\n".encode()) is None
    assert unwrap(b"short line\ncontinued\n") is None
