"""One real Prometheus for the memory-evidence tests, started once per session.

Debian's `prometheus` and `promtool` (installed by `make prometheus`, which `make test`
runs) hold series backfilled with `promtool tsdb create-blocks-from openmetrics`:

- `ml-train`: the seed's OOM kill, a leak in pod ...-gpu-group-worker-9zq4f, and two
  other pods of gpu-group at 11.2Gi and 8Gi;
- `ml-spike`: a pod flat at 9Gi that jumps by 6.9Gi in its last 40 s;
- nothing at all for namespace `ml-empty`.

The process runs on a free loopback port with its own temporary storage and is stopped
by pid (bot.adapters.prometheus.local.LocalPrometheus).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.adapters.prometheus.local import LocalPrometheus, memory_lines, merged, openmetrics
from tests.e2e.kubernetes.conftest import emulator, kuberay  # noqa: F401  (the Kubernetes emulator)
from tests.support.memory_series import (
    SEED_CLUSTER,
    SEED_KILLED_AT,
    SEED_NS,
    SEED_POD,
    flat,
    leak,
    pod,
    spike,
)


def exposition() -> str:
    group = [
        pod(SEED_POD, leak, SEED_KILLED_AT),
        pod(f"{SEED_CLUSTER}-gpu-group-worker-2bq7d", flat(11.2), SEED_KILLED_AT),
        pod(f"{SEED_CLUSTER}-gpu-group-worker-k4m9x", flat(8.0), SEED_KILLED_AT),
    ]
    other_group = [pod(f"{SEED_CLUSTER}-cpu-group-worker-aaaaa", flat(30.0), SEED_KILLED_AT)]
    return openmetrics(
        merged(
            memory_lines(SEED_NS, group, "gpu-group", SEED_CLUSTER),
            memory_lines(SEED_NS, other_group, "cpu-group", SEED_CLUSTER),
            memory_lines("ml-spike", [pod("spiky-worker-0", spike, SEED_KILLED_AT)], "gpu-group"),
        )
    )


@pytest.fixture(scope="session")
def prometheus() -> Iterator[LocalPrometheus]:
    server = LocalPrometheus(exposition())
    server.start()
    pid = server.pid
    try:
        yield server
    finally:
        server.stop()
        assert not _running(pid), f"prometheus (pid {pid}) survived its stop"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
