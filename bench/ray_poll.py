"""What the Ray poller costs and how fast it finds a failure (issue 4's figures).

1. CPU per 1,000 jobs listed: a dashboard stand-in (`python -m http.server` in a
   child process, so its CPU is not counted) serves `/api/jobs/` with N JobDetails
   shaped like Ray 2.60's (most SUCCEEDED, some FAILED with a few KB of log in the
   message, some RUNNING); the poller's own CPU (`time.process_time`) per steady-state
   poll is divided by N/1000.
2. Failure-to-finding latency, on a real local Ray head: a poll loop at `--interval`
   runs while jobs fail; for each, the time from the job's end (Ray's `end_time`)
   to its diagnosis (poll + fetch of log tail and actors + Engine) is measured, and
   the processing part of it on its own.

    .venv/bin/python bench/ray_poll.py [--jobs 1000 5000] [--interval 2] [--failures 5]
    .venv/bin/python bench/ray_poll.py --no-latency   # CPU only, no Ray started

The last line is `cpu_ms_per_1000_jobs=N latency_mean_s=N latency_max_s=N processing_ms=N`.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.adapters.files.playbooks import builtin_engine
from bot.adapters.local_process import free_port
from bot.adapters.ray.bookmarks import MemoryBookmarks
from bot.adapters.ray.client import TERMINAL, RayClusterConfig, RayDashboard
from bot.adapters.ray.local import LocalRayHead
from bot.adapters.ray.source import RayBatch, RaySource, RaySourceOptions
from bot.core.diagnosis.engine import Engine
from bot.core.model import Signal

TRACEBACK = (
    'Traceback (most recent call last):\n  File "/app/train.py", line {n}, in <module>\n'
    "    main()\n"
    '  File "/app/train.py", line {m}, in main\n    reward = load_reward_manager(config)\n'
    "KeyError: 'reward_kwargs'\n"
)


def job_details(i: int, now_ms: int) -> dict[str, Any]:
    status = random.choices(["SUCCEEDED", "FAILED", "RUNNING"], [80, 15, 5])[0]
    submission = f"raysubmit_{i:016x}"
    message = "Job finished successfully."
    if status == "FAILED":
        log = "".join(
            f"(TaskRunner pid=1187) step:{s} - actor/pg_loss:0.0213 - critic/score/mean:0.42\n"
            for s in range(60)
        ) + TRACEBACK.format(n=i % 300, m=i % 90)
        message = (
            "Job entrypoint command failed with exit code 1, last available logs "
            f"(truncated to 20,000 chars):\n{log}"
        )
    elif status == "RUNNING":
        message = "Job is currently running."
    start = now_ms - 3_600_000 + i
    return {
        "type": "SUBMISSION",
        "job_id": f"{i + 2:08x}",
        "submission_id": submission,
        "driver_info": {"id": f"{i + 2:08x}", "node_ip_address": "10.0.3.17", "pid": str(1000 + i)},
        "status": status,
        "entrypoint": "python3 -m verl.trainer.main_ppo data.train_files=/data/gsm8k/train.parquet",
        "message": message,
        "error_type": "JOB_ENTRYPOINT_COMMAND_ERROR" if status == "FAILED" else None,
        "start_time": start,
        "end_time": None if status == "RUNNING" else start + 60_000,
        "metadata": {"ray.io/rayjob": f"ml/ppo-{i % 50}", "owner": "team-rl"},
        "runtime_env": {"working_dir": "gcs://_ray_pkg_d43b46e8d60e84d4.zip", "pip": ["verl"]},
        "driver_agent_http_address": "http://10.0.3.17:52365",
        "driver_node_id": "cef2c2761f3d564e43aa06268fb5b180c448647cf225f4897b3a6ca5",
        "driver_exit_code": 1 if status == "FAILED" else 0,
    }


def cpu_per_thousand(n: int, polls: int) -> tuple[float, float, int]:
    """(CPU ms per poll per 1,000 jobs, payload MB, jobs listed)."""
    now_ms = int(time.time() * 1000)
    with tempfile.TemporaryDirectory() as root:
        jobs_dir = Path(root, "api", "jobs")
        jobs_dir.mkdir(parents=True)
        payload = json.dumps([job_details(i, now_ms) for i in range(n)]).encode()
        (jobs_dir / "index.html").write_bytes(payload)
        actors = Path(root, "api", "v0", "actors")
        actors.mkdir(parents=True)
        empty = {"result": True, "msg": "", "data": {"result": {"result": []}}}
        (actors / "index.html").write_text(json.dumps(empty))
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            client = RayDashboard(url)
            for _ in range(100):
                try:
                    client.version()
                except Exception:
                    time.sleep(0.05)
                    continue
                break
            source = RaySource(
                [RayClusterConfig("bench", url)],
                MemoryBookmarks(),
                RaySourceOptions(initial_lookback=timedelta(0)),
            )
            now = datetime.now(UTC)
            source.poll(now)  # first poll: bookmark and stale scan
            started = time.process_time()
            for k in range(polls):
                source.poll(now + timedelta(seconds=k + 1))
            cpu = (time.process_time() - started) / polls
            listed = source.status()["bench"]["jobs_listed"]
            source.close()
        finally:
            server.terminate()
            server.wait(5)
    return cpu * 1000 / (n / 1000), len(payload) / 1e6, listed


EXIT_3 = "import sys\nprint('giving up on purpose')\nsys.exit(3)\n"


def latency(interval: float, failures: int, engine: Engine) -> tuple[list[float], list[float]]:
    """(end-to-finding latencies s, processing ms per failure) on a real local head."""
    with LocalRayHead(num_cpus=2) as head, tempfile.TemporaryDirectory() as root:
        script = Path(root, "fail.py")
        script.write_text(EXIT_3)
        client = RayDashboard(head.url)
        source = RaySource([RayClusterConfig("bench", head.url)], MemoryBookmarks())
        source.poll(datetime.now(UTC))
        found: dict[str, tuple[float, float]] = {}
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                tick = time.monotonic()
                started = time.perf_counter()
                batches: list[RayBatch] = source.poll_batches(datetime.now(UTC))
                for batch in batches:
                    engine.diagnose(batch.parts)
                    first = batch.parts[0]
                    if isinstance(first, Signal) and first.fields.get("submission_id"):
                        found[first.fields["submission_id"]] = (
                            time.time(),
                            (time.perf_counter() - started) / max(1, len(batches)),
                        )
                stop.wait(max(0.0, interval - (time.monotonic() - tick)))

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        submitted = []
        for _ in range(failures):
            submitted.append(client.submit_job(f"python {script}", entrypoint_num_cpus=0))
            time.sleep(random.uniform(0.3, interval))
        deadline = time.monotonic() + 60 + interval * 2
        while not all(s in found for s in submitted) and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        thread.join()
        latencies, processing = [], []
        for submission in submitted:
            job = client.get_job(submission) or {}
            if submission not in found or job.get("status") not in TERMINAL:
                continue
            at, spent = found[submission]
            latencies.append(at - int(job["end_time"]) / 1000)
            processing.append(spent * 1000)
        client.close()
        source.close()
    return latencies, processing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--interval", type=float, default=2.0, help="poll interval, s")
    parser.add_argument("--failures", type=int, default=5)
    parser.add_argument("--no-latency", action="store_true")
    args = parser.parse_args()
    random.seed(4)

    per_thousand = []
    for n in args.jobs:
        cpu, mb, listed = cpu_per_thousand(n, args.polls)
        per_thousand.append(cpu)
        print(f"jobs={n} listed={listed} payload={mb:.1f}MB cpu_per_poll_per_1000_jobs={cpu:.1f}ms")

    mean_latency = max_latency = processing_ms = float("nan")
    if not args.no_latency:
        engine = builtin_engine([])
        latencies, processing = latency(args.interval, args.failures, engine)
        if latencies:
            mean_latency, max_latency = statistics.mean(latencies), max(latencies)
            processing_ms = statistics.mean(processing)
            print(
                f"failures={len(latencies)} interval={args.interval:g}s "
                f"latency mean={mean_latency:.2f}s max={max_latency:.2f}s "
                f"processing mean={processing_ms:.0f}ms "
                f"(expected ≈ interval/2 + processing)"
            )
    print(
        f"cpu_ms_per_1000_jobs={statistics.mean(per_thousand):.1f} "
        f"latency_mean_s={mean_latency:.2f} latency_max_s={max_latency:.2f} "
        f"processing_ms={processing_ms:.0f}"
    )


if __name__ == "__main__":
    main()
