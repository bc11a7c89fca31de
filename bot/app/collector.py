"""The garbage collector paused while a command's modules are imported, when `main` asks.

Why this exists: `pitcrew diagnose` is run by hand over and over, and most of a short
run is importing. The imports make tens of thousands of objects the collector tracks,
all of them living as long as the process; it walked them again and again while they
were made, and once more at exit. `bot.app.cli.main` pauses it before the command line
is read; once the command's module is imported, `resume` sets every object made so far
aside (`gc.freeze`) and collects again as before, so the daemon's own objects are
collected as usual (it runs for days). Importing this module changes nothing.
"""

from __future__ import annotations

import gc

_paused: list[bool] = []  # whether the collector was on, for each pause not yet resumed


def pause() -> None:
    """No collection until `resume`."""
    _paused.append(gc.isenabled())
    gc.disable()


def resume() -> None:
    """Keep every object made so far out of later collections, and collect again if the
    collector was on at `pause`; nothing if nothing is paused."""
    if not _paused:
        return
    was_on = _paused.pop()
    gc.freeze()
    if was_on:
        gc.enable()
