"""The garbage collector paused while the CLI's modules are imported, then told to leave
what they made alone.

Why this exists: `pitcrew diagnose` is run by hand over and over, and most of a short
run is importing. The imports make some 60,000 objects the collector tracks, all of
them living as long as the process; it walked them again and again while they were
made, and once more at exit: about a quarter of the run's CPU. `bot.app.cli` imports
this module first and calls `resume` once its own imports are done; the commands'
objects are collected as usual after that (the daemon runs for days with it on).
"""

from __future__ import annotations

import gc

_WAS_ON = gc.isenabled()
gc.disable()


def resume() -> None:
    """Keep every object made so far out of later collections (`gc.freeze`), and
    collect again if the collector was on before the import."""
    gc.freeze()
    if _WAS_ON:
        gc.enable()
