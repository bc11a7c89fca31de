"""Regexes that run in time linear in their input: playbook patterns compiled by RE2.

Why this exists: a playbook's regex runs over every log line that reaches the
daemon, and Python's `re` backtracks: `(a+)+$` took 4 s on 26 characters and
16 s on 28, holding the interpreter lock the whole time, so /healthz, /metrics
and /ingest froze with it. RE2 (google-re2) never backtracks. A pattern RE2
cannot run (a lookaround, a backreference) is refused when the playbook loads,
with its file and line, rather than run slowly later. Hyperscan still picks the
lines worth a look (`bot.core.diagnosis.prefilter`); RE2 confirms them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import re2

AnyStr_ = TypeVar("AnyStr_", str, bytes)

# RE2 logs every pattern it refuses to stderr itself; the refusal is reported once, by us.
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
# Over bytes, each byte is one character (as with `re` over bytes): a log's invalid
# UTF-8 still matches `\S` and `.`.
_BYTE_OPTIONS = re2.Options()
_BYTE_OPTIONS.log_errors = False
_BYTE_OPTIONS.encoding = re2.Options.Encoding.LATIN1
logging.getLogger("re2").setLevel(logging.ERROR)


class LinearError(ValueError):
    """The pattern is not one RE2 can run."""


class Linear(Generic[AnyStr_]):
    """One compiled pattern over `str` or `bytes` (as its pattern was given)."""

    def __init__(self, pattern: AnyStr_, *, ignore_case: bool = False) -> None:
        self.pattern: AnyStr_ = pattern
        flags = "(?mi)" if ignore_case else "(?m)"
        source: Any = (flags.encode() + pattern) if isinstance(pattern, bytes) else flags + pattern
        try:
            options = _BYTE_OPTIONS if isinstance(pattern, bytes) else _OPTIONS
            self._compiled = re2.compile(source, options)
        except re2.error as error:
            raise LinearError(_reason(error)) from None

    @property
    def groupindex(self) -> dict[str, int]:
        return dict(self._compiled.groupindex)

    @property
    def program_size(self) -> int:
        """RE2's program for it, in instructions: what one byte of input can cost when
        RE2 has to leave its DFA for its NFA (a 500-fold repeat is a 500-instruction
        program, and a 1 MB line then takes seconds)."""
        return int(self._compiled.programsize)

    def search(
        self, text: AnyStr_, pos: int = 0, endpos: int | None = None
    ) -> Found[AnyStr_] | None:
        end = len(text) if endpos is None else endpos
        found: Found[AnyStr_] | None = _found(self._compiled.search(text, pos, end))
        return found

    def fullmatch(self, text: AnyStr_) -> Found[AnyStr_] | None:
        found: Found[AnyStr_] | None = _found(self._compiled.fullmatch(text))
        return found

    def finditer(
        self, text: AnyStr_, pos: int = 0, endpos: int | None = None
    ) -> Iterator[Found[AnyStr_]]:
        end = len(text) if endpos is None else endpos
        for match in self._compiled.finditer(text, pos, end):
            yield Found(match.start(), match.end(), _named(match.groupdict()))


@dataclass(frozen=True)
class Found(Generic[AnyStr_]):
    """One match: where it is and its named groups (names always `str`)."""

    begin: int
    finish: int
    groups: dict[str, AnyStr_ | None]

    def start(self) -> int:
        return self.begin

    def end(self) -> int:
        return self.finish

    def groupdict(self) -> dict[str, AnyStr_ | None]:
        return dict(self.groups)


def _found(match: Any) -> Any:
    if match is None:
        return None
    return Found(match.start(), match.end(), _named(match.groupdict()))


def _named(groups: dict[Any, Any]) -> dict[str, Any]:
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in groups.items()}


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Linear[str]:
    """`pattern` compiled once by RE2 (a guard's or a noise rule's regex runs on every
    finding or line); raises LinearError when RE2 cannot run it."""
    return Linear(pattern)


def check(pattern: str) -> None:
    """Raises LinearError when RE2 cannot run `pattern`."""
    Linear(pattern)


def _reason(error: Exception) -> str:
    said = error.args[0] if error.args else error
    text = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
    if "invalid perl operator" in text or "invalid escape" in text or "backreference" in text:
        return (
            f"RE2 cannot run it ({text}): lookarounds and backreferences need a "
            "backtracking engine, which a log line can stall; rewrite it, for example "
            "with `unless` for what must not match"
        )
    return f"RE2 cannot run it ({text})"
