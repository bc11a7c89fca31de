"""A flood of 1 MiB logs at a running daemon's `/ingest`, counted, with its RSS sampled.

Why this exists: the flood test (`tests/app/test_daemon_flood.py`) and its full-length
run in `bench/flood.py` send the same bodies and count them the same way. Each
body is a megabyte of ordinary training-log lines that no playbook matches and
that do not look like failures, ended by one failure-looking line with the body's
number in it. No playbook knows that line either, so the daemon keeps it under
its shape (`pitcrew unmatched`, numbers normalised away): the shape's count is the
number of flood bodies the pipeline has read to their last line. A body answered
202 and never counted there was lost."""

from __future__ import annotations

import itertools
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot.adapters.store.store import Store
from bot.core.diagnosis.unmatched import shape

BODY_BYTES = 1 << 20
FILLER = b"2026-11-03 10:00:00,123 INFO train.py:88 -- step 4242 loss=0.4321 lr=3e-05 tps=18234\n"
LAST_LINE = "2026-11-03 10:00:01,000 ERROR flood.py:1 -- flood body {:06d} could not be frobnicated"
MARK = shape(LAST_LINE.format(0))  # the shape every body's last line is kept under
_FILLING = FILLER * ((BODY_BYTES - len(LAST_LINE) - 8) // len(FILLER))


def body(number: int) -> bytes:
    """Flood body `number`: about 1 MiB, its number on its last line."""
    return _FILLING + LAST_LINE.format(number).encode() + b"\n"


def counted(store: Path) -> int:
    """Flood bodies the daemon has read to their last line (the unmatched count of MARK)."""
    with Store(store) as opened:
        return sum(kept.count for kept in opened.unmatched(1000) if kept.shape == MARK)


@dataclass
class Tally:
    """What the flood's senders were answered, and the daemon's RSS while they sent."""

    answers: Counter[str] = field(default_factory=Counter)  # "202", "503", or an error
    peak_rss: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def accepted(self) -> int:
        return self.answers["202"]

    @property
    def refused(self) -> int:
        return self.answers["503"]

    def unexpected(self) -> dict[str, int]:
        return {k: v for k, v in self.answers.items() if k not in ("202", "503")}

    def count(self, answer: str) -> None:
        with self.lock:
            self.answers[answer] += 1

    def sample(self, rss: int) -> None:
        with self.lock:
            self.peak_rss = max(self.peak_rss, rss)


def send(url: str, data: bytes, timeout: float = 30) -> str:
    """POST `data` to `url`; the status as text, or the error's type when none came."""
    request = urllib.request.Request(url, data=data, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            return str(response.status)
    except urllib.error.HTTPError as error:
        error.read()
        return str(error.code)
    except OSError as error:
        return type(error).__name__


def flood(ingest: str, seconds: float, senders: int, rss: Callable[[], int]) -> Tally:
    """`senders` threads POST numbered bodies to `ingest` for `seconds`, each the next as
    soon as the last was answered; `rss` is sampled every 50 ms meanwhile."""
    tally = Tally()
    numbers = itertools.count(1)
    deadline = time.monotonic() + seconds

    def sender() -> None:
        while time.monotonic() < deadline:
            tally.count(send(f"{ingest}?origin=flood.log", body(next(numbers))))

    threads = [threading.Thread(target=sender, name=f"flood-{i}") for i in range(senders)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        tally.sample(rss())
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    return tally


def matching_body(number: int) -> bytes:
    """About 1 MiB of distinct lines a built-in playbook matches (a missing module each):
    seconds of classification per body, as the logs of a failing job that loops."""
    lines = (
        b"ModuleNotFoundError: No module named 'flood_%d_%d'\n" % (number, n) for n in range(19000)
    )
    return b"".join(lines)


def matching_flood(ingest: str, seconds: float, senders: int, rss: Callable[[], int]) -> Tally:
    """`flood`, of `matching_body`s, all from one workload (`FLOOD_WORKLOAD`)."""
    tally = Tally()
    numbers = itertools.count(1)
    deadline = time.monotonic() + seconds
    url = f"{ingest}?origin=flood.log&workload={FLOOD_WORKLOAD}"

    def sender() -> None:
        while time.monotonic() < deadline:
            tally.count(send(url, matching_body(next(numbers))))

    threads = [threading.Thread(target=sender, name=f"flood-{i}") for i in range(senders)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        tally.sample(rss())
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    return tally


FLOOD_WORKLOAD = "ml-train/RayJob/flooding-job"
