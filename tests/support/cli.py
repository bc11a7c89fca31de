"""`pitcrew` run as a user runs it (`python -m bot` in a process of its own, from the
checkout), and the seed case its specs diagnose."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "examples" / "seed"


def pitcrew(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`env`: the process's whole environment (None: this one's)."""
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        env=env,
    )
