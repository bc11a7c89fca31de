"""A bounded PromQL client: range and instant queries over Prometheus's HTTP API.

Why this exists: the memory evidence of an OOM kill lives in the cluster's Prometheus;
pitcrew must read it without ever waiting long on it. Every call has one deadline for
all its requests, so an unreachable or silent Prometheus costs one timeout, not one per
query; errors come back as `PrometheusError` with the reason in one line.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

import requests

from bot.core.errors import PitcrewError

DEFAULT_TIMEOUT = 5.0
MAX_POINTS = 11000  # Prometheus refuses a range query with more points per series


class PrometheusError(PitcrewError):
    """Prometheus did not answer in time, or answered with an error."""


@dataclass(frozen=True)
class PrometheusConfig:
    url: str
    timeout: float = DEFAULT_TIMEOUT  # for everything one fetch asks
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    window: timedelta = timedelta(minutes=30)  # read this long before the kill
    step: timedelta = timedelta(seconds=10)


Series = tuple[Mapping[str, str], tuple[tuple[float, float], ...]]
"""One result series: its labels and (unix time, value) points."""


class Deadline:
    """What remains of one fetch's time budget."""

    def __init__(self, seconds: float) -> None:
        self._until = time.monotonic() + seconds

    def left(self) -> float:
        left = self._until - time.monotonic()
        if left <= 0:
            raise PrometheusError("no answer in time")
        return left


class PrometheusClient:
    def __init__(self, config: PrometheusConfig, session: requests.Session | None = None) -> None:
        self.config = config
        self._base = config.url.rstrip("/")
        self._session = session or requests.Session()
        self._session.headers.update(dict(config.headers))

    def close(self) -> None:
        self._session.close()

    def range(
        self, promql: str, start: datetime, end: datetime, step: timedelta, deadline: Deadline
    ) -> tuple[Series, ...]:
        """`query_range`: matrix series between `start` and `end` every `step`."""
        seconds = max(step.total_seconds(), (end - start).total_seconds() / MAX_POINTS, 1.0)
        params = {
            "query": promql,
            "start": f"{start.timestamp():.3f}",
            "end": f"{end.timestamp():.3f}",
            "step": f"{seconds:g}",
        }
        return _matrix(self._get("/api/v1/query_range", params, deadline))

    def instant(self, promql: str, at: datetime, deadline: Deadline) -> tuple[Series, ...]:
        """`query` at one time: vector series with one point each."""
        params = {"query": promql, "time": f"{at.timestamp():.3f}"}
        return _vector(self._get("/api/v1/query", params, deadline))

    def _get(self, path: str, params: Mapping[str, str], deadline: Deadline) -> Any:
        url = self._base + path
        left = deadline.left()
        try:
            response = self._session.get(url, params=dict(params), timeout=(left, left))
        except requests.Timeout:
            raise PrometheusError(f"{self._base} did not answer within {left:.1f} s") from None
        except requests.RequestException as error:
            raise PrometheusError(f"cannot reach {self._base}: {_reason(error)}") from None
        try:
            body = response.json()
        except ValueError:
            raise PrometheusError(f"{url} answered HTTP {response.status_code}, not JSON") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            said = body.get("error", "?") if isinstance(body, dict) else "?"
            raise PrometheusError(f"{url} answered HTTP {response.status_code}: {said}")
        return body.get("data")


def _reason(error: requests.RequestException) -> str:
    text = str(error.args[0]) if error.args else type(error).__name__
    return text.rsplit(": ", 1)[-1].rstrip("')\"") if ": " in text else text


def _matrix(data: Any) -> tuple[Series, ...]:
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise PrometheusError("a range query did not answer a matrix")
    return tuple(
        (MappingProxyType(dict(item.get("metric", {}))), _points(item.get("values", [])))
        for item in data.get("result", [])
    )


def _vector(data: Any) -> tuple[Series, ...]:
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise PrometheusError("an instant query did not answer a vector")
    return tuple(
        (MappingProxyType(dict(item.get("metric", {}))), _points([item.get("value")]))
        for item in data.get("result", [])
    )


def _points(values: Any) -> tuple[tuple[float, float], ...]:
    points: list[tuple[float, float]] = []
    for value in values:
        try:
            points.append((float(value[0]), float(value[1])))
        except (TypeError, ValueError, IndexError):
            continue  # a NaN-free point is all the verdict can use
    return tuple(p for p in points if p[1] == p[1])
