"""Plain data from YAML a paste holds, with PyYAML imported at the first YAML read.

Most pastes are log lines with no YAML in them: `pitcrew diagnose` of one then does
not pay PyYAML's import (about a twentieth of its start-up). Every parser of pasted
YAML reads through `load`, with the safe loader only (the libyaml one when present).
"""

from __future__ import annotations

from typing import Any


class YamlTextError(ValueError):
    """The text is not YAML, or nests too deeply to read. `problem_line` is the line
    (0-based, in the text read) the parser stopped at and `context_line` where the
    construct it was reading began, when it says."""

    def __init__(self, reason: str, problem_line: int | None, context_line: int | None) -> None:
        super().__init__(reason)
        self.problem_line = problem_line
        self.context_line = context_line


def load(text: str) -> Any:
    """The data of one YAML document. Raises YamlTextError."""
    import yaml  # here, not at the top: see the module's docstring

    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # a SafeLoader: plain data only
    except RecursionError:
        raise YamlTextError("YAML nested too deeply", None, None) from None
    except yaml.YAMLError as error:
        problem = _mark_line(getattr(error, "problem_mark", None))
        context = _mark_line(getattr(error, "context_mark", None))
        raise YamlTextError(str(error), problem, context) from None


def _mark_line(mark: object) -> int | None:
    line = getattr(mark, "line", None)
    return line if isinstance(line, int) else None
