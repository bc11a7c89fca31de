"""The one Jinja2 environment for playbook text: sandboxed, strict about missing names,
and every render within a budget of time and size (`bot.core.playbooks.render_budget`).

Why the budget: a playbook's template runs on the pipeline's thread for every
finding. The sandbox stops escapes but not work: two nested `range(100000)`
loops ran 10^10 times and froze the pipeline while memory grew past 3 GB. So a
render may take at most `TIME_BUDGET` seconds (checked at each step of a loop,
at each call and at each piece of output) and produce at most `SIZE_BUDGET`
characters, and anything built on the way past that size is refused; beyond
either the render raises `RenderBudgetError`. Callers turn any failed render into the finding's
plain text, so one bad template never costs the other findings, and say so in
the value they return (`Diagnosis.unrendered`): the daemon counts them, the CLI
shows them. Nothing here is counted or kept.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, Template, nodes
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from bot.core.playbooks import render_budget
from bot.core.playbooks.render_budget import SIZE_BUDGET, RenderBudgetError


class _BudgetedEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(["*", "**", "+", "%"])

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        render_budget.check_binop(operator, left, right, render_budget.of(context))
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        budget = render_budget.of(__context)
        if budget is not None:
            budget.check_time()  # a macro that calls itself twice has no loop to look
            render_budget.check_call(__obj, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        render_budget.Checkpoints().visit(tree)
        return tree


@lru_cache(maxsize=1)
def environment() -> ImmutableSandboxedEnvironment:
    env = _BudgetedEnvironment(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False
    )
    env.filters["plural"] = lambda n, word: word if n == 1 else word + "s"
    env.filters = {
        name: render_budget.budgeted_filter(name, func) for name, func in env.filters.items()
    }
    env.filters[render_budget.EACH] = render_budget.each
    env.filters[render_budget.SIZED] = render_budget.sized_in
    del env.globals["lipsum"]  # paragraphs of filler, built in one call
    return env


@lru_cache(maxsize=4096)
def compile_template(source: str, code: str | None = None) -> Template:
    """Raises jinja2.TemplateSyntaxError with a line number on bad syntax. `code`: what
    `template_code` made of `source` before (with this jinja), if known. A template is
    compiled once per process (a diagnosis renders the same few for every finding, and
    compiling took most of a one-line diagnosis's time); a Template renders safely
    from several threads."""
    env = environment()
    if code is None:
        return env.from_string(source)
    compiled = compile(code, "<template>", "exec")
    return env.template_class.from_code(env, compiled, env.make_globals(None))


def template_code(source: str) -> str:
    """The Python jinja makes of `source`. A library kept in the user's cache carries it:
    a short run (`pitcrew diagnose`) then skips jinja's lexer, parser and code generator,
    most of the time a template takes to compile."""
    return str(environment().compile(source, raw=True))


def render(template: Template, context: dict[str, Any]) -> str:
    """The rendered text; raises RenderBudgetError past the budget, or what the template
    itself raised (jinja2.UndefinedError for a missing name, and so on)."""
    budgeted = context | render_budget.start()
    budget = budgeted[render_budget.KEY]
    pieces: list[str] = []
    size = 0
    try:
        for piece in template.generate(**budgeted):
            size += len(piece)
            if size > SIZE_BUDGET:
                raise RenderBudgetError(f"the text grew over {SIZE_BUDGET} characters")
            budget.check_time()
            pieces.append(piece)
    except RecursionError:  # Python words it after wherever the limit was hit
        raise RenderBudgetError("maximum recursion depth exceeded") from None
    return "".join(pieces).strip()
