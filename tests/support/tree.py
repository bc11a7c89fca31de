"""The package the whole-tree specs read: bot/ and every module in it."""

from __future__ import annotations

from pathlib import Path

BOT = Path(__file__).resolve().parents[2] / "bot"


def modules() -> list[Path]:
    return sorted(BOT.rglob("*.py"))
