"""Finding the factory of a "kind" (a source kind, an executor kind): registered in
code, or the `build` function of a module named after it in a package."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def find_build(
    package: str, name: str, registered: Mapping[str, Callable[..., Any]]
) -> Callable[..., Any] | None:
    """`registered[name]`, else `package.name.build`; None when there is neither."""
    if name in registered:
        return registered[name]
    module_name = f"{package}.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise
        return None
    build = getattr(module, "build", None)
    return build if callable(build) else None
