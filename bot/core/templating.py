"""The one Jinja2 environment for playbook text: sandboxed, strict about missing names."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, Template
from jinja2.sandbox import ImmutableSandboxedEnvironment


@lru_cache(maxsize=1)
def environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False
    )
    env.filters["plural"] = lambda n, word: word if n == 1 else word + "s"
    return env


def compile_template(source: str) -> Template:
    """Raises jinja2.TemplateSyntaxError with a line number on bad syntax."""
    return environment().from_string(source)


def render(template: Template, context: dict[str, Any]) -> str:
    return template.render(**context).strip()
