"""Cards posted while Slack's history did not answer, as the store keeps them until each is
checked: two incidents' cards in one channel (one of them also in another), and a post
that went unanswered (no ts: which card is kept is not known yet)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.daemon.ports import UncheckedCard

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
A = UncheckedCard("C0PITCREW", "1772366400.000100", "inc-a", T0)
A_LATER = UncheckedCard("C0PITCREW", "1772366460.000200", "inc-a", T0)
B = UncheckedCard("C0PITCREW", "1772366410.000300", "inc-b", None)
B_ELSEWHERE = UncheckedCard("C0OTHER00", "1772366420.000400", "inc-b", T0)
A_UNANSWERED = UncheckedCard("C0PITCREW", "", "inc-a", T0)  # a post that went unanswered


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)
