"""The collector is paused only when asked, and resumed as it was: objects made while it
was paused are set aside (frozen), and a resume with nothing paused changes nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

STEPS = {
    "import": "from bot.app import collector",
    "pause": "collector.pause()",
    "resume": "collector.resume()",
    "off": "gc.disable()",
}


@pytest.mark.parametrize(
    ("steps", "after"),
    [
        (["import"], "collecting True, set aside False"),
        (["import", "resume"], "collecting True, set aside False"),
        (["import", "pause"], "collecting False, set aside False"),
        (["import", "pause", "resume"], "collecting True, set aside True"),
        (["off", "import", "pause", "resume"], "collecting False, set aside True"),
        (["import", "pause", "pause", "resume"], "collecting False, set aside True"),
        (["import", "pause", "pause", "resume", "resume"], "collecting True, set aside True"),
    ],
)
def test_the_collector_is_left_as_it_was_found(steps: list[str], after: str) -> None:
    code = (
        "import gc\n"
        + "\n".join(STEPS[step] for step in steps)
        + ("\nprint(f'collecting {gc.isenabled()}, set aside {gc.get_freeze_count() > 0}')")
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == after
