"""Lets `python -m bot` run the same CLI as the `pitcrew` console script."""

from bot.app.cli import main

main()
