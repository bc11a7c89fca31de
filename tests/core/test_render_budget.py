"""A playbook's template renders within a budget of time and size, and one that fails
or runs over becomes that finding's plain text: the other findings keep theirs.

Each bad template sits in a playbook that matches the same log as an ordinary
failure (`ModuleNotFoundError`, whose own playbook renders as usual)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.app.cli_app import app as cli_app
from bot.core.diagnosis.analysis import diagnose
from bot.core.inputs import LogText
from bot.core.model import RenderFailure
from bot.core.playbooks.templating import compile_template, render
from tests.support.playbooks import engine_for, playbook, write_library

LOG = b"BadThing happened here\nModuleNotFoundError: No module named 'vllm'\n"
NESTED = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x"
STRING_LOOPS = "{% set s = 'a' * 20000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}x"
DOUBLING = (  # a macro that calls itself with its text twice over
    "{% macro grow(s, n) %}{% if n %}{{ grow(s ~ s, n - 1) }}{% else %}{{ s | length }}"
    "{% endif %}{% endmacro %}{{ grow('ab', 60) }}"
)
POWERS = (
    "{% macro up(x, n) %}{% if n %}{{ up(x ** 64, n - 1) }}{% else %}{{ x > 1 }}"
    "{% endif %}{% endmacro %}{{ up(10, 10) }}"
)
RECURSION = "{% macro again() %}{{ again() }}{% endmacro %}{{ again() }}"
BRANCHING = (  # a macro that calls itself twice: 2^40 calls, no loop, no output
    "{% macro split(n) %}{% if n %}{{ split(n - 1) }}{{ split(n - 1) }}{% endif %}"
    "{% endmacro %}{{ split(40) }}x"
)


@pytest.mark.parametrize(
    ("template", "why"),
    [
        (NESTED, "rendering took over 0.5s"),
        ("{% for i in range(10**9) %}{{ i }}{% endfor %}", "a range over 100000 items"),
        (
            "{% for i in range(99999) %}{{ 'word ' }}{% endfor %}",
            "the text grew over 20000 characters",
        ),
        ("{{ 'x' * 1000000 }}", "a value over 20000 characters"),
        ("{{ 1 // 0 }}", "integer division or modulo by zero"),
        (
            "{{ ''.__class__.__mro__ }}",
            "access to attribute '__class__' of 'str' object is unsafe.",
        ),
        (STRING_LOOPS, "rendering took over 0.5s"),
        ("{{ 'x' | center(10**9) }}", "a width or count over 20000"),
        ("{{ 'x'.ljust(10**9) }}", "a width or count over 20000"),
        ("{{ ('a' * 20000) | replace('a', 'a' * 20000) }}", "a value over 20000 characters"),
        ("{{ ('a' * 20000) | join('a' * 20000) }}", "a value over 20000 characters"),
        ("{{ '%999999999d' % 1 }}", "a width over 20000 characters"),
        ("{{ '{:>999999999}'.format(1) }}", "a width over 20000 characters"),
        (DOUBLING, "a value over 20000 characters"),
        (POWERS, "an integer over 65536 bits"),
        (RECURSION, "maximum recursion depth exceeded"),
        (BRANCHING, "rendering took over 0.5s"),
    ],
    ids=[
        "nested-loops",
        "huge-range",
        "huge-output",
        "huge-string",
        "raises",
        "escape",
        "loops-over-a-string",
        "huge-width-filter",
        "huge-width-method",
        "huge-replace",
        "huge-join",
        "huge-percent-width",
        "huge-format-width",
        "doubling-in-a-loop",
        "huge-integer",
        "recursion",
        "branching-recursion",
    ],
)
def test_a_bad_template_costs_only_its_own_finding(tmp_path: Path, template: str, why: str) -> None:
    bad = playbook(
        "bad-template",
        "application_error",
        [{"name": "bad", "regex": "BadThing happened"}],
        diagnosis=template,
    )
    missing = playbook(
        "missing-module",
        "dependency_runtime_env",
        [{"name": "mnf", "regex": r"ModuleNotFoundError: No module named '(?P<module>[^']+)'"}],
        diagnosis="the image lacks {{ captures.module }}",
    )
    engine = engine_for(tmp_path, bad, missing)
    started = time.monotonic()
    diagnosis = diagnose(engine.hits([LogText([LOG])]), engine.library)
    assert time.monotonic() - started < 5
    lines = diagnosis.text.splitlines()
    assert "Root cause: the image lacks vllm" in lines
    fallback = f": Playbook bad-template (the playbook's text could not be rendered: {why})"
    assert [line for line in lines if line.endswith(fallback)] == [lines[1]]
    source = f"{tmp_path / 'bad-template.yaml'}:8"  # its diagnosis line
    assert diagnosis.unrendered == (RenderFailure("bad-template", source, why),)


@pytest.mark.slow
def test_playbooks_check_renders_each_template_against_its_examples(tmp_path: Path) -> None:
    doc = playbook(
        "bad-template",
        "application_error",
        [{"name": "bad", "regex": "BadThing happened"}],
        diagnosis=NESTED,
        examples=[
            {"name": "the bad thing", "input": "BadThing happened here", "expect": {"match": True}}
        ],
    )
    directory = write_library(tmp_path / "pb", doc)
    result = CliRunner().invoke(cli_app, ["playbooks", "check", str(directory)])
    assert result.exit_code == 2
    assert result.output == (
        f"pitcrew: {directory / 'bad-template.yaml'}:11: example 'the bad thing': "
        "diagnosis template: rendering took over 0.5s\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("template", "why"),
    [(NESTED, "rendering took over 0.5s"), ("{{ 1 // 0 }}", "integer division or modulo by zero")],
    ids=["nested-loops", "raises"],
)
def test_diagnose_shows_the_fallback_and_why_without_a_traceback(
    tmp_path: Path, template: str, why: str
) -> None:
    bad = playbook(
        "bad-template",
        "application_error",
        [{"name": "bad", "regex": "BadThing happened"}],
        diagnosis=template,
    )
    directory = write_library(tmp_path / "pb", bad)
    log = tmp_path / "driver.log"
    log.write_bytes(LOG)
    result = CliRunner().invoke(cli_app, ["diagnose", "-p", str(directory), str(log)])
    assert result.exit_code == 0
    shown = " ".join(result.output.replace("│", " ").split())
    assert (
        "Symptom of dependency_runtime_env: Playbook bad-template "
        f"(the playbook's text could not be rendered: {why})"
    ) in shown
    assert "Traceback" not in result.output
    as_json = CliRunner().invoke(
        cli_app, ["diagnose", "-p", str(directory), str(log), "--format", "json"]
    )
    assert json.loads(as_json.output)["unrendered"] == [
        {
            "playbook": "bad-template",
            "source": f"{directory / 'bad-template.yaml'}:8",
            "reason": why,
        }
    ]


def test_numbers_a_template_shows_are_values_not_widths() -> None:
    template = compile_template(
        "{{ '%d' | format(n) }} {{ '%d' % n }} {{ '{}'.format(n) }} {{ dict(a=n).a }}"
    )
    assert render(template, {"n": 86400}) == "86400 86400 86400 86400"


def test_a_template_rendered_outside_a_budget_is_not_checked() -> None:
    """The Slack card's own template builds its JSON in one render of any size."""
    template = compile_template(
        "{% for i in range(3) %}{{ 'x' * 10000 ~ 'y' * 10000 }}{% endfor %}"
    )
    assert len(template.render()) == 60_000
