"""Which source and executor kinds this pitcrew has, and how each is built from settings.

Why this exists: the config names kinds (`sources.<kind>`, `actions.executors`); the
composition root must turn each name into running objects. Two explicit tables do it,
so every kind is visible here and an unknown name is an error naming it, not a module
looked up by reflection. Adapters are imported only when their kind is built, so a
command that builds none of them does not pay for their SDKs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.app.settings import Settings
from bot.core.actions.catalog import CATALOG
from bot.core.errors import PitcrewError
from bot.daemon.feed import Sink
from bot.daemon.ports import Bookmarks
from bot.daemon.runner import Executor, Registry
from bot.daemon.sources import Source

SourceFactory = Callable[[Settings, Sink, Bookmarks | None], Sequence[Source]]
ExecutorFactory = Callable[[Settings, Bookmarks | None], Executor]


def _ray_sources(settings: Settings, sink: Sink, bookmarks: Bookmarks | None) -> Sequence[Source]:
    from bot.adapters.ray import source

    return source.build(settings, sink, bookmarks)


def _kubernetes_sources(
    settings: Settings, sink: Sink, bookmarks: Bookmarks | None
) -> Sequence[Source]:
    from bot.adapters.kubernetes import source

    return source.build(settings, sink, bookmarks)


def _echo_executor(settings: Settings, bookmarks: Bookmarks | None) -> Executor:
    from bot.adapters.echo import executor

    return executor.build(settings)


def _kubernetes_executor(settings: Settings, bookmarks: Bookmarks | None) -> Executor:
    from bot.adapters.kubernetes import executors

    return executors.build(settings)


def _ray_executor(settings: Settings, bookmarks: Bookmarks | None) -> Executor:
    from bot.adapters.ray import executors

    return executors.build(settings, bookmarks)


SOURCE_KINDS: dict[str, SourceFactory] = {
    "ray": _ray_sources,
    "kubernetes": _kubernetes_sources,
}

EXECUTOR_KINDS: dict[str, ExecutorFactory] = {
    "echo": _echo_executor,
    "kubernetes": _kubernetes_executor,
    "ray": _ray_executor,
}


def source_factory(kind: str) -> SourceFactory:
    """The factory of a source kind; raises PitcrewError when this pitcrew has none."""
    if kind not in SOURCE_KINDS:
        known = ", ".join(sorted(SOURCE_KINDS))
        raise PitcrewError(
            f"sources.{kind}: enabled, but this pitcrew has no {kind} source ({known})"
        )
    return SOURCE_KINDS[kind]


def executor_factory(kind: str) -> ExecutorFactory:
    """The factory of an executor kind; raises PitcrewError for an unknown one."""
    if kind not in EXECUTOR_KINDS:
        raise PitcrewError(f"actions.executors: unknown executor kind {kind!r}")
    return EXECUTOR_KINDS[kind]


def check_kinds(settings: Settings) -> list[str]:
    """Problems with the configured source and executor kinds, one line each."""
    problems = []
    for kind in settings.sources.enabled_kinds():
        if kind not in SOURCE_KINDS:
            problems.append(f"{settings.origin}: {_error(source_factory, kind)}")
    for kind in dict.fromkeys(settings.actions.executors.values()):
        if kind not in EXECUTOR_KINDS:
            problems.append(f"{settings.origin}: {_error(executor_factory, kind)}")
    return problems


def _error(lookup: Callable[[str], object], kind: str) -> str:
    try:
        lookup(kind)
    except PitcrewError as error:
        return str(error)
    return ""


def build_sources(
    settings: Settings, sink: Sink, bookmarks: Bookmarks | None = None
) -> list[Source]:
    """Every source the config enables, remembering what they reported in `bookmarks`."""
    built: list[Source] = []
    for kind in settings.sources.enabled_kinds():
        built.extend(source_factory(kind)(settings, sink, bookmarks))
    return built


def build_registry(settings: Settings, bookmarks: Bookmarks | None = None) -> Registry:
    """The executors `actions.executors` names, one instance per kind."""
    built: dict[str, Executor] = {}
    registry = Registry()
    for action in CATALOG:
        kind = settings.actions.executor_for(action)
        if kind is None:
            continue
        if kind not in built:
            built[kind] = executor_factory(kind)(settings, bookmarks)
        registry.register(action, built[kind])
    return registry
