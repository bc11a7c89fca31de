"""The command line's plain parameters (text, paths, flags, and lists of text or paths)
made into their values without pydantic.

Why this exists: typer makes every parameter's value into its annotated type through a
pydantic TypeAdapter, built for each parameter of the command that runs, given or not (a
dozen for `pitcrew diagnose`), and importing pydantic for that was about a quarter of a
short `pitcrew diagnose`. For text, a path and a flag the value typer's adapter would
make is known without it: the text itself; the path once typer's own check of it has passed
(`coerce_cli_path`: exists, file or directory, readable); the flag's bool. A value of any
other shape (not a string, not a bool) and every other parameter (choices, numbers, a
parser, a file opened for the command) are left to typer's adapter, as before, so typer's
messages are unchanged. `install` puts this in front of typer's own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args, get_origin

import typer.core
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_path

if TYPE_CHECKING:
    from typer import _click as click

_typer_runtime_param = build_runtime_param
_Param = typer.core._TyperParameter


@dataclass(frozen=True)
class _Plain(RuntimeParam):
    """One parameter of a plain type (`str`, `Path`, `bool`), or a list of `str` or `Path`."""

    descriptor: TypeDescriptor
    item: type
    many: bool

    def _coerce_value(self, value: Any, param: _Param, ctx: click.Context) -> Any:
        items = list(value) if isinstance(value, list | tuple) else [value]
        plain = bool if self.item is bool else str
        shaped = self.many or len(items) == 1
        if not shaped or not all(isinstance(item, plain) for item in items):
            return _typer_runtime_param(self.descriptor)._coerce_value(value, param, ctx)
        done = [self._one(item, param, ctx) for item in items]
        return done if self.many else done[0]

    def _one(self, value: Any, param: _Param, ctx: click.Context) -> Any:
        if self.item is not Path:
            return value
        info = self.descriptor.parameter_info  # checked as typer checks it, named as given
        checked = coerce_cli_path(value, info, path_type=None, param=param, ctx=ctx)
        return Path(os.fsdecode(checked))


def _plain_item(descriptor: TypeDescriptor) -> tuple[type, bool] | None:
    """The item type and whether it is a list, for a parameter `_Plain` makes; else None."""
    info = descriptor.parameter_info
    if descriptor.file_annotation is not None or info.parser is not None or descriptor.is_choice:
        return None
    if info.path_type is not None or info.allow_dash:  # typer's own ways with paths
        return None
    annotation = descriptor.annotation
    origin: object = get_origin(annotation)
    if origin is list:
        (item,) = get_args(annotation)
        return (item, True) if item in (str, Path) else None
    return (annotation, False) if annotation in (str, Path, bool) else None


def runtime_param(descriptor: TypeDescriptor) -> RuntimeParam:
    """What typer coerces one parameter's value with: `_Plain` where it applies."""
    plain = _plain_item(descriptor)
    if plain is None:
        return _typer_runtime_param(descriptor)
    item, many = plain
    info, annotation = descriptor.parameter_info, descriptor.annotation
    return _Plain(info, annotation, descriptor=descriptor, item=item, many=many)


def install() -> None:
    typer.core.build_runtime_param = runtime_param  # type: ignore[attr-defined]
