"""Sources: what watches Kubernetes and Ray and puts observations on the pipeline's queue.

Why this exists: the daemon must start, stop and health-check every source the
same way, whatever watches (`bot.adapters.kubernetes.source`, `bot.adapters.ray.source`,
`bot.adapters.kuberay.discovery`). A source implements `Source`; one that polls also
has `poll_interval` and `poll()` and the scheduler calls it. Which kinds exist and how
each is built is `bot.app.factories`. What sources put on the queue is in
`bot.daemon.feed`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol, runtime_checkable


class Source(Protocol):
    name: str

    def start(self) -> None:
        """Begin watching (in threads of its own); returns at once."""
        ...

    def stop(self) -> None:
        """Stop watching and join its threads; nothing is put on the queue afterwards."""
        ...

    def healthy(self) -> bool:
        """False while the source cannot observe (for /readyz)."""
        ...


@runtime_checkable
class Polling(Protocol):
    """A source the scheduler calls every `poll_interval`."""

    poll_interval: timedelta

    def poll(self) -> None: ...
