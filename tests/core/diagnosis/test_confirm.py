"""A candidate is confirmed by RE2 at a bounded cost whatever the line: measured as work
done (bytes handed to RE2 times its program's size, by a spy around the signature's own
compiled regex) on 1 MB lines: a capture over a 500-fold repeat (10 s a call before),
and a line of 170,000 matches (over ten minutes before). `bench/captures.py` prints the
time `pitcrew diagnose` takes on them."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.files.playbooks import load_library
from bot.core.diagnosis.classifier import Classifier
from bot.core.diagnosis.confirm import CONFIRM_WORK, MIN_WINDOW, confirm_window
from bot.core.linear import Linear
from bot.core.model import Signal, SourceKind
from tests.support.faults import Measured
from tests.support.playbooks import playbook, write_library

REPEAT = r"a(?P<tail>[ab]{500})c"  # RE2 leaves its DFA for its NFA on random a/b
MEGABYTE = 1_000_000


class Counted:
    """The signature's own RE2 regex, counting the work each search is handed."""

    def __init__(self, regex: Linear[bytes]) -> None:
        self.regex = regex
        self.work = 0
        self.calls = 0

    @property
    def program_size(self) -> int:
        return self.regex.program_size

    def finditer(self, text: bytes, pos: int = 0, endpos: int | None = None) -> Iterator[Any]:
        self.calls += 1
        end = len(text) if endpos is None else endpos
        self.work += (end - pos) * self.regex.program_size
        return self.regex.finditer(text, pos, endpos)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.regex, name)


def classifier(tmp_path: Path, regex: str) -> tuple[Classifier, Counted]:
    directory = write_library(
        tmp_path / "pb", playbook("long", "application_error", [{"name": "x", "regex": regex}])
    )
    found = Classifier(load_library([directory]))
    (sig,) = [s for s in found.signatures if s.signature.regex == regex]
    assert sig.bytes_regex is not None
    counted = Counted(sig.bytes_regex)
    sig.__dict__["bytes_regex"] = counted  # the cached property's value, spied on
    return found, counted


def random_ab(size: int, seed: int = 3) -> bytes:
    """Random a and b ending in a match of REPEAT: the 501st byte from the end is an a."""
    table = bytes(b"ab"[n & 1] for n in range(256))
    text = bytearray(random.Random(seed).randbytes(size).translate(table))
    text[-501] = ord("a")
    return bytes(text) + b"c"


def test_a_capture_over_a_500_fold_repeat_on_a_1_mb_line_costs_one_window(
    tmp_path: Path, measured: Measured
) -> None:
    found, counted = classifier(tmp_path, REPEAT)
    line = random_ab(MEGABYTE)
    (hit,) = found.scan_log([b"start\n", line, b"\nend\n"])
    measured.lost(1, 1)
    assert hit.captures == {"tail": line[-501:-1].decode()}
    assert hit.evidence[0][1] == 2
    assert counted.work <= CONFIRM_WORK  # the whole line was 1 MB x 508 = 508 M
    assert counted.calls == 1


def test_a_line_of_170000_matches_is_read_once(tmp_path: Path, measured: Measured) -> None:
    found, counted = classifier(tmp_path, r"boom(?P<n>\d)")
    (hit,) = found.scan_log([b"boom1 " * 170_000 + b"\n"])
    measured.lost(1, 1)
    assert (hit.count, hit.captures) == (1, {"n": "1"})
    assert counted.calls == 1
    assert counted.work <= CONFIRM_WORK


def test_short_lines_are_confirmed_whole_as_before(tmp_path: Path) -> None:
    found, counted = classifier(tmp_path, r"boom(?P<n>\d)")
    (hit,) = found.scan_log([b"boom1 boom2 boom3\nboom4\n"])
    assert (hit.count, hit.captures, hit.evidence[0]) == (4, {"n": "1"}, ("boom1 boom2 boom3", 1))
    assert counted.calls == 2  # each line whole, every match on it counted


def test_a_match_longer_than_the_window_keeps_its_line_without_captures(tmp_path: Path) -> None:
    """Hyperscan's match is the regex's own: the line is evidence; its capture, which only
    a read of the whole line could give, is not taken."""
    found, counted = classifier(tmp_path, r"begin (?P<body>x+) end")
    (hit,) = found.scan_log([b"begin " + b"x" * MEGABYTE + b" end\n"])
    assert hit.captures == {}
    assert hit.evidence[0][0].startswith("x" * 100)
    assert counted.work <= CONFIRM_WORK


def test_a_long_structured_signal_is_confirmed_around_its_match(tmp_path: Path) -> None:
    found, counted = classifier(tmp_path, REPEAT)
    text = random_ab(MEGABYTE).decode()
    (hit,) = found.classify(Signal(SourceKind.RAY_JOB, text, reason="FAILED"))
    assert hit.captures == {"tail": text[-501:-1]}
    assert counted.work <= CONFIRM_WORK


@pytest.mark.parametrize(
    ("regex", "window"),
    [("boom", CONFIRM_WORK // Linear(b"boom").program_size), (REPEAT, 16_513)],
)
def test_the_window_shrinks_as_the_program_grows(tmp_path: Path, regex: str, window: int) -> None:
    found, _ = classifier(tmp_path, regex)
    (sig,) = [s for s in found.signatures if s.signature.regex == regex]
    assert confirm_window(sig) == max(window, MIN_WINDOW)
