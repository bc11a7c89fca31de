"""How long `pitcrew diagnose` takes on a 1 MB line that makes a playbook's regex costly
(issue 31): a capture over a 500-fold repeat (`a(?P<tail>[ab]{500})c` on random a and b:
RE2 leaves its DFA for its NFA, 10 s a search over the whole line) and a line of 170,000
matches of one signature (each read the line again: over ten minutes). The candidate is
confirmed in a window around its match (`bot.core.diagnosis.confirm`); this prints the
diagnosis's wall time with the cache warm, the best of `--runs`, and the RE2 work the
window allows. The last line:

    repeat_s=N matches_s=N plain_s=N confirm_work=N

(`plain_s`: the same 1 MB of ordinary log text, for scale.)

    .venv/bin/python bench/captures.py [--runs 3]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bot.core.diagnosis.confirm import CONFIRM_WORK

PLAYBOOK = """\
id: {pid}
title: {pid}
category: application_error
severity: error
match:
  - name: x
    regex: '{regex}'
diagnosis: '{pid} matched.'
examples:
  - name: quiet
    input: "nothing here"
    expect: {{match: false}}
"""
MEGABYTE = 1_000_000


def lines() -> dict[str, bytes]:
    table = bytes(b"ab"[n & 1] for n in range(256))
    repeat = bytearray(random.Random(3).randbytes(MEGABYTE).translate(table))
    repeat[-501] = ord("a")
    plain = b"(RayTrainWorker pid=2321) step 10 loss=0.1234 lr=1e-5 tokens/s=3021 ok\n"
    return {
        "repeat": bytes(repeat) + b"c\n",
        "matches": b"boom1 " * 170_000 + b"\n",
        "plain": plain * (MEGABYTE // len(plain)),
    }


def timed(playbooks: Path, log: Path, runs: int) -> float:
    best = float("inf")
    for _ in range(runs + 1):  # the first run fills the pattern cache
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "bot", "diagnose", "-p", str(playbooks), str(log)],
            check=True,
            capture_output=True,
            timeout=1200,
        )
        best = min(best, time.monotonic() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pitcrew-captures-") as folder:
        root = Path(folder)
        playbooks = root / "playbooks"
        playbooks.mkdir()
        for pid, regex in (("repeat", r"a(?P<tail>[ab]{500})c"), ("matches", r"boom(?P<n>\d)")):
            (playbooks / f"{pid}.yaml").write_text(PLAYBOOK.format(pid=pid, regex=regex))
        seconds: dict[str, float] = {}
        for name, data in lines().items():
            log = root / f"{name}.log"
            log.write_bytes(data)
            seconds[name] = timed(playbooks, log, options.runs)
            print(f"{name}: {len(data)} bytes in one line or lines, {seconds[name]:.2f}s")
    print(
        f"repeat_s={seconds['repeat']:.2f} matches_s={seconds['matches']:.2f} "
        f"plain_s={seconds['plain']:.2f} confirm_work={CONFIRM_WORK}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
