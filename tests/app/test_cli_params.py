"""The CLI's plain parameters (text, paths, flags, lists of text or paths) get, without
pydantic, exactly the values and the messages typer's own adapters give them; any other
parameter is still typer's."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
import typer
import typer.core
from typer._coercion import build_runtime_param
from typer.testing import CliRunner

import bot.app.cli  # noqa: F401  (installs the CLI's coercion of plain parameters)


def _app() -> typer.Typer:
    """A command with a parameter of each shape, printing what it received."""
    app = typer.Typer()

    @app.command()
    def show(
        names: list[str],
        text: Annotated[str, typer.Option()] = "default",
        where: Annotated[Path | None, typer.Option()] = None,
        must: Annotated[Path | None, typer.Option(exists=True, dir_okay=False)] = None,
        dirs: Annotated[list[Path] | None, typer.Option("--dir")] = None,
        count: Annotated[int, typer.Option()] = 1,
        flag: bool = False,
    ) -> None:
        print(repr((names, text, where, must, dirs, count, flag)))

    return app


@pytest.mark.parametrize(
    "args",
    [
        ["-"],
        ["a", "b", "--text", "y", "--flag", "--count", "3"],
        ["a", "--where", "./x//y/", "--dir", "a/", "--dir", "./b"],
        ["a", "--must", "./missing.yaml"],
        ["a", "--must", "."],
        ["a", "--count", "many"],
        ["a", "--text"],
    ],
)
def test_plain_parameters_get_what_typers_adapters_give(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = CliRunner().invoke(_app(), args)
    assert typer.core.build_runtime_param is not build_runtime_param  # type: ignore[attr-defined]
    monkeypatch.setattr(typer.core, "build_runtime_param", build_runtime_param)
    theirs = CliRunner().invoke(_app(), args)
    assert (ours.exit_code, ours.output) == (theirs.exit_code, theirs.output)
