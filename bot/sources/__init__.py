"""Sources: what watches Kubernetes and Ray and puts observations on the pipeline's queue.

Why this exists: the daemon must start, stop and health-check every source the
same way, and the sources arrive with their own issues (`bot.sources.kubernetes`,
`bot.sources.ray`). A source implements `Source`; one that polls also has
`poll_interval` and `poll()` and the scheduler calls it. A kind is a module
`bot.sources.<kind>` with `build(settings, sink) -> Sequence[Source]`, built
when the config enables that kind (`sources.<kind>`), or a factory registered
with `register_kind`. What sources put on the queue is in `bot.feed`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Protocol, runtime_checkable

from bot.errors import PitcrewError
from bot.feed import Sink
from bot.plugins import find_build
from bot.ports import Bookmarks, accepts_bookmarks
from bot.settings import Settings


class Source(Protocol):
    name: str

    def start(self) -> None:
        """Begin watching (in threads of its own); returns at once."""
        ...

    def stop(self) -> None:
        """Stop watching and join its threads; nothing is put on the queue afterwards."""
        ...

    def healthy(self) -> bool:
        """False while the source cannot observe (for /readyz)."""
        ...


@runtime_checkable
class Polling(Protocol):
    """A source the scheduler calls every `poll_interval`."""

    poll_interval: timedelta

    def poll(self) -> None: ...


SourceFactory = Callable[[Settings, Sink], Sequence[Source]]

_KINDS: dict[str, SourceFactory] = {}


def register_kind(name: str, factory: SourceFactory) -> None:
    _KINDS[name] = factory


def kind_factory(name: str) -> SourceFactory:
    """The factory of a source kind; raises PitcrewError when this pitcrew has none."""
    build = find_build("bot.sources", name, _KINDS)
    if build is None:
        raise PitcrewError(
            f"sources.{name}: enabled, but this pitcrew has no {name} source "
            f"(no bot.sources.{name} module with a build function)"
        )
    factory: SourceFactory = build
    return factory


def check_kinds(settings: Settings) -> list[str]:
    """Problems with the enabled source kinds, one line each (for `config check`)."""
    problems = []
    for kind in settings.sources.enabled_kinds():
        try:
            kind_factory(kind)
        except PitcrewError as error:
            problems.append(f"{settings.origin}: {error}")
    return problems


def build_sources(
    settings: Settings, sink: Sink, bookmarks: Bookmarks | None = None
) -> list[Source]:
    """Every source the config enables; kinds whose `build` takes `bookmarks` get the
    store's, so what they reported survives a restart."""
    built: list[Source] = []
    for kind in settings.sources.enabled_kinds():
        factory = kind_factory(kind)
        if bookmarks is not None and accepts_bookmarks(factory):
            built.extend(factory(settings, sink, bookmarks=bookmarks))  # type: ignore[call-arg]
        else:
            built.extend(factory(settings, sink))
    return built
