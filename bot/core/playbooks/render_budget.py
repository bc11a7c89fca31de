"""What one render of a playbook's text may do: how long it may run and how large
anything it builds may grow, checked while it runs (`bot.core.playbooks.templating` calls these).

Why this exists: the sandbox stops escapes, not work. Loops nested over a
20,000-character string ran 4 * 10^8 times with nothing to stop them (only
`range` looked at the clock), and one call of a string method or filter with a
large width (`'x'|center(10**9)`, `s|replace('a', s)`, `'%999999999d' % 1`)
builds a gigabyte before anything can look at its size; a value doubled at each
step (a macro calling itself with `s ~ s`) outgrows memory in forty. So in a render:

- every `for` loop, and every `range`, looks at the deadline on each step, and so
  does every call (a macro calling itself twice ran 2^40 times without a loop);
- no string method or sizing filter takes a number over `SIZE_BUDGET` (a
  width, a count, a fill), and `replace`, `join`, `translate`, `indent`,
  `wordwrap` and format strings are refused when what they would build is over it;
- a string, list or mapping that a filter, `~` or `+` builds over `SIZE_BUDGET`
  is refused, and so is an integer over `INT_BITS` bits.

A render gets its own `Budget` (`start`), reached through the render's context;
a template rendered without one (the Slack card's own template) is not checked.
"""

from __future__ import annotations

import functools
import re
import string
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sized
from typing import Any, cast

from jinja2 import nodes
from jinja2.runtime import Context
from jinja2.sandbox import MAX_RANGE
from jinja2.utils import pass_context
from jinja2.visitor import NodeTransformer

TIME_BUDGET = 0.5  # seconds per render
SIZE_BUDGET = 20_000  # characters of output, and of any string or list built on the way
INT_BITS = 65_536  # bits of any integer computed on the way
KEY = "__render_budget__"
EACH = "_budget_each"  # the filter every `for` loop's iterable goes through
SIZED = "_budget_sized"  # the filter every `~` goes through


class RenderBudgetError(RuntimeError):
    """A render took longer, or grew larger, than its budget."""


class Budget:
    """One render's deadline; `range` and `each` look at it on every step."""

    def __init__(self) -> None:
        self.deadline = time.monotonic() + TIME_BUDGET

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise RenderBudgetError(f"rendering took over {TIME_BUDGET:g}s")

    def range(self, *args: int) -> Iterator[int]:
        numbers = range(*args)
        if len(numbers) > MAX_RANGE:
            raise RenderBudgetError(f"a range over {MAX_RANGE} items")
        for number in numbers:
            self.check_time()
            yield number

    def each(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            self.check_time()
            yield item


def start() -> dict[str, Any]:
    """The context entries one render adds: its budget, and the `range` it sees."""
    budget = Budget()
    return {KEY: budget, "range": budget.range}


def of(context: Context) -> Budget | None:
    """The render's budget (from the values it was started with, which the template
    cannot reassign), or None outside a budgeted render."""
    found = context.parent.get(KEY)
    return found if isinstance(found, Budget) else None


def sized(value: Any) -> Any:
    """`value`, unless it is a string, list or mapping over `SIZE_BUDGET`."""
    if isinstance(value, str | bytes | list | tuple | dict) and len(value) > SIZE_BUDGET:
        raise RenderBudgetError(f"a value over {SIZE_BUDGET} characters")
    return value


def _within(size: int) -> None:
    if size > SIZE_BUDGET:
        raise RenderBudgetError(f"a value over {SIZE_BUDGET} characters")


# -- operators ------------------------------------------------------------------------


def check_binop(operator_: str, left: Any, right: Any, budget: Budget | None) -> None:
    """Refuse `left operator_ right` when its result would be over budget."""
    if operator_ == "**":
        if isinstance(right, int) and abs(right) > 64:
            raise RenderBudgetError("an exponent over 64")
        if (
            isinstance(left, int)
            and isinstance(right, int)
            and left.bit_length() * right > INT_BITS
        ):
            raise RenderBudgetError(f"an integer over {INT_BITS} bits")
    elif operator_ == "*":
        for sequence, times in ((left, right), (right, left)):
            if isinstance(sequence, str | list | tuple) and isinstance(times, int):
                _within(len(sequence) * times)
        both_ints = isinstance(left, int) and isinstance(right, int)
        if both_ints and left.bit_length() + right.bit_length() > INT_BITS:
            raise RenderBudgetError(f"an integer over {INT_BITS} bits")
    elif budget is not None and operator_ == "+":
        if isinstance(left, Sized) and isinstance(right, Sized):
            _within(len(left) + len(right))
    elif budget is not None and operator_ == "%" and isinstance(left, str | bytes):
        _check_percent(left, right if isinstance(right, tuple) else (right,))


_PERCENT = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?")


def _check_percent(text: str | bytes, values: tuple[Any, ...]) -> None:
    """`text % values`: no width or precision over budget, written or passed (`%*d`)."""
    source = text.decode("latin-1") if isinstance(text, bytes) else text
    specs = [match.group(0) for match in _PERCENT.finditer(source)]
    _check_spec_numbers(specs)
    if any("*" in spec for spec in specs):
        _check_numbers(values, {})


def _format_specs(text: str) -> Iterator[str]:
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return  # the format call itself will say what is wrong
    for _, _, spec, _ in parsed:
        if spec:
            yield spec
            yield from _format_specs(spec)


def _check_spec_numbers(specs: Iterable[str]) -> None:
    for spec in specs:
        for number in re.findall(r"\d+", spec):
            if int(number) > SIZE_BUDGET:
                raise RenderBudgetError(f"a width over {SIZE_BUDGET} characters")


def _check_numbers(args: Iterable[Any], kwargs: Mapping[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > SIZE_BUDGET:
            raise RenderBudgetError(f"a width or count over {SIZE_BUDGET}")


# -- calls: methods, globals and filters ------------------------------------------------


def check_call(obj: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Refuse a call of a string's method that would build something over budget
    (a width, a fill, a replacement), before it runs."""
    target = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format
    owner = getattr(target, "__self__", None)
    if not isinstance(owner, str | bytes):
        return
    name = getattr(target, "__name__", "")
    if name in ("format", "format_map") and isinstance(owner, str):
        specs = list(_format_specs(owner))
        _check_spec_numbers(specs)
        if any("{" in spec for spec in specs):  # a width passed as a value
            _check_numbers(args, kwargs)
        return
    _check_numbers(args, kwargs)
    if name == "replace" and len(args) >= 2:
        _within(_replaced_size(owner, args[0], args[1]))
    elif name == "join" and args and isinstance(args[0], Collection):
        _within(len(owner) * len(args[0]) + _total_length(args[0]))
    elif name == "translate" and args and isinstance(args[0], Mapping):
        longest = max((len(v) for v in args[0].values() if isinstance(v, Sized)), default=1)
        _within(len(owner) * longest)


def _replaced_size(text: Any, old: Any, new: Any) -> int:
    if not isinstance(text, str | bytes) or not isinstance(old, Sized):
        return 0
    if not isinstance(new, Sized):
        return len(text)
    found = len(text) + 1 if not old else text.count(old)  # type: ignore[arg-type]
    return len(text) + found * max(len(new) - len(old), 0)


def _total_length(items: Iterable[Any]) -> int:
    return sum(len(item) if isinstance(item, Sized) else 1 for item in items)


_SIZING_FILTERS = frozenset({"batch", "center", "indent", "slice", "truncate", "wordwrap"})
"""Filters whose numbers are widths, counts or fills."""


def _check_filter(name: str, value: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    if name in _SIZING_FILTERS:
        _check_numbers(args, kwargs)
    if name == "replace" and len(args) >= 2:
        _within(_replaced_size(str(value), str(args[0]), str(args[1])))
    elif name == "join" and isinstance(value, Collection):
        separator = args[0] if args else kwargs.get("d", "")
        _within(len(str(separator)) * len(value) + _total_length(value))
    elif name == "format" and isinstance(value, str):
        _check_percent(value, args)
    elif name == "indent" and isinstance(value, str):
        width = args[0] if args else kwargs.get("width", 4)
        pad = len(width) if isinstance(width, str) else int(width)
        _within(len(value) + (value.count("\n") + 1) * pad)
    elif name == "wordwrap" and isinstance(value, str):
        width = max(int(args[0] if args else kwargs.get("width", 79)), 1)
        wrap = args[2] if len(args) > 2 else kwargs.get("wrapstring") or "\n"
        _within(len(value) + (len(value) // width + 1) * len(str(wrap)))


def budgeted_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` (a Jinja filter), checked within a budgeted render: its arguments before
    it runs, the size of what it returns after."""
    passes = getattr(func, "jinja_pass_arg", None)
    given = {"context": 0, "eval_context": 1, "environment": 2}.get(getattr(passes, "name", ""))

    @pass_context
    @functools.wraps(func)
    def checked(context: Context, value: Any, *args: Any, **kwargs: Any) -> Any:
        budget = of(context)
        if budget is not None:
            _check_filter(name, value, args, kwargs)
        if given is None:
            result = func(value, *args, **kwargs)
        else:
            passed = (context, context.eval_ctx, context.environment)[given]
            result = func(passed, value, *args, **kwargs)
        return sized(result) if budget is not None else result

    return checked


@pass_context
def each(context: Context, iterable: Any) -> Any:
    """A `for` loop's iterable, looking at the deadline on every step."""
    budget = of(context)
    return iterable if budget is None else budget.each(iterable)


@pass_context
def sized_in(context: Context, value: Any) -> Any:
    """What `~` built, refused when over `SIZE_BUDGET` within a budgeted render."""
    return value if of(context) is None else sized(value)


class Checkpoints(NodeTransformer):
    """Puts every `for` loop's iterable through `EACH` and every `~` through `SIZED`."""

    def visit_For(self, node: nodes.For) -> nodes.Node:  # noqa: N802 (Jinja's visitor names)
        self.generic_visit(node)
        node.iter = _filtered(cast(nodes.Expr, node.iter), EACH)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:  # noqa: N802
        self.generic_visit(node)
        return _filtered(node, SIZED)


def _filtered(node: nodes.Expr, name: str) -> nodes.Filter:
    return nodes.Filter(node, name, [], [], None, None, lineno=node.lineno)
