"""A failure storm through the real pipeline (issue 3's benchmark).

10,000 signals in 60 s of simulated time across 1,000 pods of one RayCluster
(OOMKilled pod statuses and the raylet's worker-death lines), mixed with
background noise from other workloads (crash loops, image pulls, benign
events), go through the real Engine, Correlator, approvals, notification
policy and SQLite store (a temporary file), with a chat that counts what it is
sent and a clock the benchmark moves. The scheduler's tick runs every
simulated second; after the storm the clock runs on until the incident
resolves. Each item's ingest-to-decision time is measured on the wall clock.
The last line is `messages=N incidents=N p99_ms=N peak_rss_mb=N`: chat
messages about the storm's workload, incidents opened, the 99th percentile of
ingest-to-decision in milliseconds, and the process's peak RSS.

    .venv/bin/python bench/storm.py [--signals 10000] [--pods 1000] [--noise 2000] [--budget 10]
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.adapters.files.playbooks import engine_of, load_builtin
from bot.adapters.store.store import Store
from bot.app.settings.actions import ActionSettings
from bot.core.actions import tuning
from bot.core.incidents.assessment import adjusted, assessor
from bot.core.incidents.correlator import Correlator
from bot.core.incidents.notify import NotifyConfig
from bot.core.inputs import LogText
from bot.core.model import ObjectRef, Report, Signal, SourceKind, frozen_map
from bot.daemon.budget import Budget, BudgetedClassifier, budgeted_assess
from bot.daemon.feed import Context, Observation, Tick
from bot.daemon.metrics import Metrics
from bot.daemon.outbox import Outbox
from bot.daemon.pipeline import Pipeline, PipelineConfig
from bot.daemon.ports import Attempt

T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
NS = "ml-train"
CLUSTER = "verl-ppo-qwen-raycluster-x7k2p"
STORM = ObjectRef("RayCluster", CLUSTER, NS)
STORM_WHERE = f"RayCluster {CLUSTER}"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class CountingChat:
    """Counts messages per workload (as the card names it)."""

    name = "counting"

    def __init__(self) -> None:
        self.messages: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self._where: dict[str, str] = {}

    def post(self, channel: str, report: Report) -> str:
        ref = f"{channel}/{len(self._where) + 1}"
        self._where[ref] = report.where.get("workload", "")
        self._count(ref, "post")
        return ref

    def update(self, ref: str, report: Report) -> None:
        self._count(ref, "update")

    def reply(self, ref: str, text: str, attempt: Attempt | None = None) -> None:
        self._count(ref, "reply")

    def attach(self, ref: str, path: str, text: str, attempt: Attempt | None = None) -> None:
        self._count(ref, "reply")

    def healthy(self) -> bool:
        return True

    def _count(self, ref: str, kind: str) -> None:
        self.messages[self._where[ref]] += 1
        self.kinds[kind] += 1


def oom_status(pod: str, restarts: int) -> Signal:
    return Signal(
        SourceKind.POD_STATUS,
        "container ray-worker last terminated: OOMKilled (exit code 137)",
        reason="OOMKilled",
        fields=frozen_map(
            {
                "pod": pod,
                "namespace": NS,
                "container": "ray-worker",
                "state": "last_terminated",
                "exit_code": "137",
                "restart_count": str(restarts),
                "memory_limit": "16Gi",
                "ray_cluster": CLUSTER,
                "ray_group": "gpu-group",
                "ray_node_type": "worker",
            }
        ),
        obj=ObjectRef("Pod", pod, NS),
        workload=STORM,
    )


def worker_death(i: int) -> LogText:
    line = (
        f"(raylet, ip=10.0.{i % 250}.{i % 7}) A worker died or was killed while executing a task "
        f"by an unexpected system error. Worker exit type: SYSTEM_ERROR Worker PID: {1000 + i}\n"
    )
    return LogText((line.encode(),), SourceKind.WORKER_LOG, "raylet.out", workload=STORM)


NOISE_REASONS = (
    ("CrashLoopBackOff", "back-off 5m0s restarting failed container"),
    ("ImagePullBackOff", 'Back-off pulling image "registry.local/app:v2"'),
    ("Completed", "container app terminated: Completed (exit code 0)"),
)


def noise(rng: random.Random, i: int) -> Signal:
    team = rng.randrange(40)
    workload = ObjectRef("Deployment", f"svc-{team}", f"team-{team % 8}")
    reason, text = NOISE_REASONS[rng.randrange(len(NOISE_REASONS))]
    state = "terminated" if reason == "Completed" else "waiting"
    pod = f"svc-{team}-{i % 5}"
    return Signal(
        SourceKind.POD_STATUS,
        text,
        reason=reason,
        fields=frozen_map(
            {"pod": pod, "namespace": workload.namespace, "container": "app", "state": state}
        ),
        obj=ObjectRef("Pod", pod, workload.namespace),
        workload=workload,
    )


def items(args: argparse.Namespace) -> list[tuple[float, Observation, bool]]:
    """(seconds after T0, observation, is storm) in arrival order."""
    rng = random.Random(3)
    pods = [f"{CLUSTER}-gpu-group-worker-{i:05d}" for i in range(args.pods)]
    restarts: Counter[str] = Counter()
    found: list[tuple[float, Observation, bool]] = []
    for i in range(args.signals):
        at = rng.uniform(0, args.seconds)
        if rng.random() < 0.6:
            pod = pods[i % len(pods)]
            restarts[pod] += 1
            found.append((at, Observation((oom_status(pod, restarts[pod]),)), True))
        else:
            found.append((at, Observation((worker_death(i),), Context()), True))
    for i in range(args.noise):
        found.append((rng.uniform(0, args.seconds), Observation((noise(rng, i),)), False))
    found.sort(key=lambda item: item[0])
    return found


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--signals", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=1_000)
    parser.add_argument("--noise", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--budget", type=float, default=10.0, help="pipeline.step_budget in s (0: inline work)"
    )
    args = parser.parse_args()

    library = load_builtin()
    engine = engine_of(library)  # as the daemon builds it (pattern databases cached)
    base = assessor(library)
    values = ActionSettings().overrides()
    clock = Clock()
    chat = CountingChat()
    metrics = Metrics()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "pitcrew.db")
        outbox = Outbox(store, chat, clock=clock, metrics=metrics)
        budget = Budget(args.budget)  # the pure work on a worker, as the daemon runs it
        assess = budgeted_assess(adjusted(base, lambda d: tuning.tune(d, values)), budget)
        pipeline = Pipeline(
            BudgetedClassifier(engine, budget),
            Correlator(assess),
            store,
            clock,
            config=PipelineConfig(notify=NotifyConfig()),
            metrics=metrics,
        )
        pipeline.restore()
        arrivals = items(args)
        latencies: list[float] = []
        started = time.perf_counter()
        next_tick = 1.0
        for at, observation, _ in arrivals:
            while next_tick <= at:
                clock.now = T0 + timedelta(seconds=next_tick)
                pipeline.process(Tick())
                outbox.deliver_due()
                next_tick += 1.0
            clock.now = T0 + timedelta(seconds=at)
            begun = time.perf_counter()
            pipeline.process(observation)
            latencies.append((time.perf_counter() - begun) * 1000)
        storm_seconds = time.perf_counter() - started
        # Then quiet: the card's last update, and its resolution after the quiet period.
        end = args.seconds + 1800 + 120
        while next_tick <= end:
            clock.now = T0 + timedelta(seconds=next_tick)
            pipeline.process(Tick())
            outbox.deliver_due()
            next_tick += 10.0 if next_tick > args.seconds + 180 else 1.0
        incidents = len(store.recent_incidents(1_000_000))
        size_mb = (Path(tmp) / "pitcrew.db").stat().st_size / 1e6
        store.close()

    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    storm_messages = chat.messages[STORM_WHERE]
    p99 = percentile(latencies, 0.99)
    total = len(arrivals)
    print(
        f"items: {total} ({args.signals} storm over {args.pods} pods, {args.noise} noise) "
        f"in {args.seconds:g} s simulated; processed in {storm_seconds:.1f} s wall "
        f"({total / storm_seconds:.0f} items/s)"
    )
    print(
        f"ingest-to-decision ms: p50 {statistics.median(latencies):.2f}  "
        f"p95 {percentile(latencies, 0.95):.2f}  p99 {p99:.2f}  max {max(latencies):.2f}"
    )
    print(
        f"chat: {sum(chat.messages.values())} messages ({dict(chat.kinds)}), "
        f"{storm_messages} about {STORM_WHERE}; {len(chat.messages)} workloads had cards"
    )
    print(f"incidents: {incidents}; store file {size_mb:.1f} MB")
    print(
        f"messages={storm_messages} incidents={incidents} p99_ms={p99:.1f} "
        f"peak_rss_mb={peak_rss_mb:.0f}"
    )


if __name__ == "__main__":
    main()
