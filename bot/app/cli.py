"""`pitcrew`, the console script (and `python -m bot`): the command line run with the
garbage collector paused until the command's modules are imported.

Why this exists apart from the command group (`bot.app.cli_app`): the collector is
paused here, before typer and the command's modules are imported, and nothing else is
imported first; see `bot.app.collector` for why.
"""

from __future__ import annotations

from bot.app import collector


def main() -> None:
    """Run the command line; the collector is paused until the command's modules are
    imported (they make objects that live as long as the process)."""
    collector.pause()
    try:
        from bot.app.cli_app import app

        app()
    finally:
        collector.resume()
