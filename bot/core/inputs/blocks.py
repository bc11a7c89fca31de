"""What a shape detector answers when asked "does a block of your shape start here?".

`segment.split_text` finds candidate lines cheaply and asks the detector of
that shape (JSON/YAML objects, `kubectl describe`, an events table, `ray job
status`). A detector answers with a `Block` (the text up to `end` became these
parts) or a `Miss` (nothing here, and no need to ask me again before
`resume`, which keeps a large paste linear). This module also holds the line
reader the detectors share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from bot.core.inputs import InputPart


@dataclass(frozen=True)
class Block:
    """The text from the candidate line up to `end` (a line start or the end) became `parts`."""

    end: int
    parts: tuple[InputPart, ...]


@dataclass(frozen=True)
class Miss:
    """No block here; the same detector need not look again before offset `resume`."""

    resume: int


Detector = Callable[[str, int, str], Block | Miss]
"""(text, offset of a candidate line start, origin) -> Block | Miss."""


class Line(NamedTuple):
    """One line of a text: its offsets and its content without the line break."""

    start: int
    end: int
    text: str

    @property
    def next(self) -> int:
        """The offset of the following line (or the end of the text)."""
        return self.end + 1

    @property
    def blank(self) -> bool:
        return not self.text.strip()

    @property
    def indented(self) -> bool:
        return self.text[:1] in (" ", "\t")


def lines_from(text: str, start: int) -> Iterator[Line]:
    """The lines of `text` from offset `start` (a line start), lazily; `\\r` is dropped."""
    size = len(text)
    pos = start
    while pos < size:
        end = text.find("\n", pos)
        if end == -1:
            end = size
        yield Line(pos, end, text[pos:end].removesuffix("\r"))
        pos = end + 1


def block_end(line: Line, text: str) -> int:
    """The offset just after `line`, clamped to the text."""
    return min(line.next, len(text))
