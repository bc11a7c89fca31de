"""The memory series the Prometheus tests backfill and the verdict tests read: a leak,
a spike and a pod with no samples, shaped like the failures they stand for."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from bot.core.actions.memory_evidence import GI, PodSeries, Sample

STEP = timedelta(seconds=10)
LIMIT = 16 * GI


def series(
    shape: Callable[[float], float], end: datetime, minutes: int = 30, step: timedelta = STEP
) -> tuple[Sample, ...]:
    """Samples of `shape(seconds before end)` (in Gi) every `step`, up to `end`."""
    count = int(timedelta(minutes=minutes) / step)
    return tuple(
        Sample(end - step * (count - i), round(shape((count - i) * step.total_seconds()) * GI))
        for i in range(count + 1)
    )


def leak(before: float) -> float:
    """Flat at 2Gi, then 0.8Gi/min for the last 17 min up to 15.9Gi."""
    minutes = before / 60
    return 15.9 - 0.8 * minutes if minutes <= 17 else 2.3


def spike(before: float) -> float:
    """Flat at 9Gi, then +6.9Gi over the last 40 s."""
    return 9.0 + 6.9 * max(0.0, 1 - before / 40)


def flat(level: float) -> Callable[[float], float]:
    return lambda before: level


def pod(name: str, shape: Callable[[float], float], end: datetime, limit: int = LIMIT) -> PodSeries:
    return PodSeries(name, "ray-worker", series(shape, end), limit)


# The seed's OOM kill: the worker pod of gpu-group, OOMKilled at its 16Gi limit.
SEED_NS = "ml-train"
SEED_CLUSTER = "verl-ppo-qwen-raycluster-x7k2p"
SEED_POD = f"{SEED_CLUSTER}-gpu-group-worker-9zq4f"
SEED_KILLED_AT = datetime(2025, 11, 3, 10, 13, 58, tzinfo=UTC)
