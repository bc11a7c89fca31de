"""The command group: each command's module is imported when that command runs, and a
parameter reaches its command as typed, or is refused with a message naming it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from bot.app.cli_app import COMMANDS, app


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["bogus"], "Error: No such command 'bogus'."),
        (["diagnose", "--format"], "Error: Option '--format' requires an argument."),
        (["diagnose", "-f", "yaml", "-"], "pitcrew: --format must be text or json, not 'yaml'"),
        (
            ["history", "0"],
            "Error: Invalid value for 'N': Input should be greater than or equal to 1",
        ),
        (
            ["unmatched", "--limit", "many"],
            "Error: Invalid value for '--limit' / '-n': Input should be a valid integer, "
            "unable to parse string as an integer",
        ),
        (
            ["playbooks", "coverage", "--sample", "101"],
            "Error: Invalid value for '--sample': Input should be less than or equal to 100",
        ),
        (["playbooks", "check", "./no-such-dir"], "pitcrew: no-such-dir: not a directory"),
    ],
)
def test_a_parameter_is_refused_with_a_message_naming_it(args: list[str], said: str) -> None:
    result = CliRunner().invoke(app, args, prog_name="pitcrew")
    assert (result.exit_code, result.output.splitlines()[-1]) == (2, said)


def test_the_map_names_every_command_there_is() -> None:
    listed = CliRunner().invoke(app, ["-h"], prog_name="pitcrew").output
    shown = listed.split("Commands:\n")[1].splitlines()
    assert {line.split()[0] for line in shown if line.strip()} == {*COMMANDS, "version"}


def test_every_command_is_found_in_the_module_that_registers_it() -> None:
    code = (
        "import sys\n"
        "from typer.main import get_group\n"
        "from bot.app.cli_app import COMMANDS, app\n"
        "group = get_group(app)\n"
        "for name, module in COMMANDS.items():\n"
        "    before = set(sys.modules)\n"
        "    found = group.get_command(None, name)\n"
        "    print(name, found.name, module in sys.modules, module in before)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seen = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()}
    first_of_its_module = {module: name for name, module in reversed(COMMANDS.items())}
    assert seen == {
        name: [name, "True", "False" if first_of_its_module[module] == name else "True"]
        for name, module in COMMANDS.items()
    }
