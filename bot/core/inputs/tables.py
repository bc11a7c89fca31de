"""Column-aligned tables as kubectl prints them (`get events`, describe's Events and Conditions).

kubectl aligns columns with Go's tabwriter: every cell of a column starts at
the offset of its header, columns are at least two spaces apart, and a header
may hold single spaces (`LAST SEEN`). Cells are therefore cut at the header
offsets, which keeps spaces inside cells (`2m (x3 over 10m)`, `kubelet,
node-1`, messages). A row that does not line up with its header (pasted
through something that collapsed spaces) is split on runs of two or more
spaces instead, when that gives the right number of cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER_CELL = re.compile(r"\S+(?: \S+)*")
_GAP = re.compile(r"\s{2,}")
_RULE = re.compile(r"^\s*-+(?:\s+-+)*\s*$")


@dataclass(frozen=True)
class Columns:
    """The names and start offsets of a table's columns, read from its header line."""

    names: tuple[str, ...]
    starts: tuple[int, ...]

    @classmethod
    def from_header(cls, header: str) -> Columns:
        cells = list(_HEADER_CELL.finditer(header.rstrip()))
        return cls(tuple(c.group() for c in cells), tuple(c.start() for c in cells))

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def split(self, line: str) -> dict[str, str] | None:
        """The cells of a row by column name, or None when it does not fit the table."""
        row = line.rstrip()
        if not row.strip():
            return None
        if self._aligned(row):
            return self._cut(row)
        return self._split_on_gaps(row)

    def _aligned(self, row: str) -> bool:
        """Does the first cell start at its column, and a space end every cell before a column?"""
        first = self.starts[0]
        if len(row) <= first or row[:first].strip() or row[first] == " ":
            return False
        return all(row[start - 1] == " " for start in self.starts[1:] if start < len(row))

    def _cut(self, row: str) -> dict[str, str]:
        ends = (*self.starts[1:], len(row))
        return {
            name: row[start:end].strip()
            for name, start, end in zip(self.names, self.starts, ends, strict=True)
        }

    def _split_on_gaps(self, row: str) -> dict[str, str] | None:
        cells = _GAP.split(row.strip(), maxsplit=len(self.names) - 1)
        if len(cells) != len(self.names):
            return None
        return dict(zip(self.names, cells, strict=True))


def is_rule(line: str) -> bool:
    """The `----   ------` line under a describe table's header."""
    return bool(_RULE.match(line))
