"""The one Jinja2 environment for playbook text: sandboxed, strict about missing names,
and every render within a budget of time and size.

Why the budget: a playbook's template runs on the pipeline's thread for every
finding. The sandbox stops escapes but not work: two nested `range(100000)`
loops ran 10^10 times and froze the pipeline while memory grew past 3 GB. So a
render may take at most `TIME_BUDGET` seconds (checked at each step of a
`range` and at each piece of output) and produce at most `SIZE_BUDGET`
characters, and a string or list multiplied past that size is refused;
beyond either the render raises `RenderBudgetError`. Callers turn any failed
render into the finding's plain text, so one bad template never costs the other
findings, and say so in the value they return (`Diagnosis.unrendered`): the
daemon counts them, the CLI shows them. Nothing here is counted or kept.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, Template
from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment

TIME_BUDGET = 0.5  # seconds per render
SIZE_BUDGET = 20_000  # characters of output, and of any string or list built on the way


class RenderBudgetError(RuntimeError):
    """A render took longer, or grew larger, than its budget."""


class _BudgetedEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "**":
            if isinstance(right, int) and abs(right) > 64:
                raise RenderBudgetError("an exponent over 64")
            return operator.pow(left, right)
        for sequence, times in ((left, right), (right, left)):
            sized = isinstance(sequence, str | list | tuple) and isinstance(times, int)
            if sized and len(sequence) * times > SIZE_BUDGET:
                raise RenderBudgetError(f"a value over {SIZE_BUDGET} characters")
        return operator.mul(left, right)


class _Deadline:
    """One render's time budget; its `range` is the one the template sees."""

    def __init__(self) -> None:
        self.at = time.monotonic() + TIME_BUDGET

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise RenderBudgetError(f"rendering took over {TIME_BUDGET:g}s")

    def range(self, *args: int) -> Iterator[int]:
        numbers = range(*args)
        if len(numbers) > MAX_RANGE:
            raise RenderBudgetError(f"a range over {MAX_RANGE} items")
        for number in numbers:
            self.check()
            yield number


@lru_cache(maxsize=1)
def environment() -> ImmutableSandboxedEnvironment:
    env = _BudgetedEnvironment(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False
    )
    env.filters["plural"] = lambda n, word: word if n == 1 else word + "s"
    return env


def compile_template(source: str) -> Template:
    """Raises jinja2.TemplateSyntaxError with a line number on bad syntax."""
    return environment().from_string(source)


def render(template: Template, context: dict[str, Any]) -> str:
    """The rendered text; raises RenderBudgetError past the budget, or what the template
    itself raised (jinja2.UndefinedError for a missing name, and so on)."""
    deadline = _Deadline()
    pieces: list[str] = []
    size = 0
    for piece in template.generate(**context, range=deadline.range):
        size += len(piece)
        if size > SIZE_BUDGET:
            raise RenderBudgetError(f"the text grew over {SIZE_BUDGET} characters")
        deadline.check()
        pieces.append(piece)
    return "".join(pieces).strip()
