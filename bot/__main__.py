"""Lets `python -m bot` run the same CLI as the `pitcrew` console script."""

from bot.cli import main

main()
