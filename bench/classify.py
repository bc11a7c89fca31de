"""Classification throughput with the full playbook library (issue: foundation benchmark).

Prints signals/s for event-sized inputs, MB/s for scanning a large realistic
Ray log in which failure lines are rare, the same for a dense log (one
failure line in 100, as in a failing job's log; its failure lines carry the
colour codes, actor prefixes and dedup suffixes Ray writes, so the cost of
normalizing them is in the figure), and MB/s of a naive loop that runs each
signature's regex over each line in turn, on each log. The last line is:
`log_mb_s=N naive_mb_s=N ratio=N events_per_s=N dense_mb_s=N dense_ratio=N`.

    .venv/bin/python bench/classify.py [--log-mb 256] [--dense-mb 64] [--naive-mb 8]
        [--before REV]

`log_cpu_mb_s` is the same scan's rate in CPU time, the figure to compare on a busy
machine. `--before REV` runs this bench over the tree of a git revision (its `bot` and
`playbooks`, extracted with `git archive`), then over this tree, one after the other
with the same interpreter and flags, and prints both last lines and the ratios of their
`log_mb_s` and `log_cpu_mb_s`: the side-by-side figure a change to the playbooks or the
classifier is held to.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

from bot.adapters.files.playbooks import load_builtin
from bot.core.model import ObjectRef, Signal, SourceKind

try:
    from bot.core.diagnosis.classifier import Classifier
except ModuleNotFoundError:  # a tree from before the core's folders (`--before`)
    from bot.core.classifier import Classifier  # type: ignore[import-untyped,no-redef]

CHUNK = 1 << 20

ROUTINE = [
    "(TaskRunner pid={pid}) step:{step} - actor/pg_loss:{f:.4f} - actor/entropy:{g:.4f} - "
    "critic/score/mean:{h:.3f} - response_length/mean:{n} - perf/throughput:{t:.1f}",
    "(WorkerDict pid={pid}, ip=10.0.{a}.{b}) INFO {n:05d} [vllm/worker/model_runner.py:1523] "
    "Graph capturing finished in {s} secs, took {g:.2f} GiB",
    "(WorkerDict pid={pid}, ip=10.0.{a}.{b}) NCCL INFO Channel {a:02d}/0 : {b}[{a}] -> {n}[{b}] "
    "via P2P/CUMEM/read",
    "(raylet) [2025-11-03 10:{a:02d}:{b:02d},{n:03d} I {pid} {pid}] (raylet) "
    "node_manager.cc:{n}: Spilled {n} MiB, {a} objects, write throughput {s} MiB/s.",
    "Training Progress: {p}%|{bar}| {step}/500 [{a:02d}:{b:02d}<{s:02d}:{a:02d}, {g:.2f}s/it]\r",
    "(WorkerDict pid={pid}) /usr/local/lib/python3.10/site-packages/torch/distributed/fsdp/"
    "_state_dict_utils.py:{n}: UserWarning: FSDP.state_dict_type() is being deprecated.",
    "(autoscaler +{s}s) Resized to {a} CPUs, {b} GPUs.",
    "2025-11-03 10:{a:02d}:{b:02d},{n:03d}\tINFO worker.py:{n} -- Task {pid:x}{n:x} finished "
    "in {g:.3f}s",
]

RARE = [
    "(TaskRunner pid=1234) ValueError: The name qwAKMv_register_center (namespace=None) is "
    "already taken. Please use a different name or get the existing actor using "
    "ray.get_actor('qwAKMv_register_center', namespace=None)",
    "(raylet) [2025-11-03 10:14:01] A worker died or was killed while executing a task by an "
    "unexpected system error. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
    "unexpectedly exits with a connection error code 2. End of file.",
    "(WorkerDict pid=2321) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free.",
]


# Failure lines as a failing job's driver log shows them: prefixed, coloured, deduplicated.
DENSE = [
    *RARE,
    "\x1b[36m(raylet)\x1b[0m [2025-11-03 10:14:01,001 E 93 93] (raylet) node_manager.cc:3277: "
    "2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to "
    "other reasons at node (ID: 8289f87b78d1, IP: 10.0.3.7) over the last time period.",
    "(WorkerDict pid=2321, ip=10.0.3.7) [rank3]:[E1103 10:14:02.1 ProcessGroupNCCL.cpp:629] "
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5919, "
    "OpType=_ALLGATHER_BASE, NumelIn=27, NumelOut=54, Timeout(ms)=1800000) ran for 1800098 "
    "milliseconds before timing out. [repeated 6x across cluster]",
    "(WorkerDict pid=27497) [2025-03-04 19:28:30,014 E 27497 27497] logging.cc:113: Unhandled "
    "exception: N5boost10wrapexceptINS_6system12system_errorEEE. what(): thread: Resource "
    "temporarily unavailable [system:11] [repeated 2x across cluster]",
]


def _routine_lines(rng: random.Random, count: int) -> list[str]:
    lines: list[str] = []
    for i in range(count):
        template = rng.choice(ROUTINE)
        lines.append(
            template.format(
                pid=rng.randint(1000, 99999),
                step=i % 500,
                f=rng.random(),
                g=rng.random() * 10,
                h=rng.random(),
                n=rng.randint(0, 9999),
                t=rng.random() * 3000,
                a=rng.randint(0, 59),
                b=rng.randint(0, 59),
                s=rng.randint(0, 59),
                p=rng.randint(0, 100),
                bar="█" * rng.randint(0, 20),
            )
        )
    return lines


def dense_log(megabytes: int, seed: int = 5) -> bytes:
    """A failing job's driver log of about `megabytes` MB: one failure line in 100."""
    rng = random.Random(seed)
    block_lines = _routine_lines(rng, 4000)
    for i in range(0, len(block_lines), 100):
        block_lines[i + rng.randint(0, 99)] = rng.choice(DENSE)
    block = ("\n".join(block_lines) + "\n").encode()
    return (block * (megabytes * 1_000_000 // len(block) + 1))[: megabytes * 1_000_000]


def realistic_log(megabytes: int, seed: int = 7) -> bytes:
    """A Ray driver log of about `megabytes` MB with one failure line every ~50,000 lines."""
    rng = random.Random(seed)
    block_lines = _routine_lines(rng, 4000)
    block = ("\n".join(block_lines) + "\n").encode()
    parts: list[bytes] = []
    size = 0
    target = megabytes * 1_000_000
    while size < target:
        parts.append(block)
        size += len(block)
        if len(parts) % 12 == 0:
            rare = (rng.choice(RARE) + "\n").encode()
            parts.append(rare)
            size += len(rare)
    return b"".join(parts)


def chunks(data: bytes) -> Iterator[bytes]:
    for start in range(0, len(data), CHUNK):
        yield data[start : start + CHUNK]


def event_signals(count: int, seed: int = 11) -> list[Signal]:
    rng = random.Random(seed)
    samples = [
        (
            SourceKind.K8S_EVENT,
            "FailedScheduling",
            "0/12 nodes are available: 4 Insufficient nvidia.com/gpu, 8 node(s) didn't match "
            "Pod's node affinity/selector. preemption: 0/12 nodes are available: 12 No "
            "preemption victims found for incoming pod.",
        ),
        (
            SourceKind.K8S_EVENT,
            "Pulled",
            'Successfully pulled image "rayproject/ray:2.40.0" in 2.1s',
        ),
        (SourceKind.K8S_EVENT, "Scheduled", "Successfully assigned ml/worker-abc to gpu-node-3"),
        (SourceKind.K8S_EVENT, "BackOff", "Back-off restarting failed container ray-worker in pod"),
        (
            SourceKind.POD_STATUS,
            "OOMKilled",
            "container ray-worker last terminated: OOMKilled (exit code 137)",
        ),
        (
            SourceKind.POD_STATUS,
            "Completed",
            "container ray-head terminated: Completed (exit code 0)",
        ),
    ]
    signals: list[Signal] = []
    for i in range(count):
        source, reason, text = rng.choice(samples)
        fields = {"exit_code": "137" if reason == "OOMKilled" else "0", "namespace": "ml"}
        signals.append(
            Signal(
                source,
                text,
                reason=reason,
                fields=fields,
                obj=ObjectRef("Pod", f"worker-{i % 1000}", "ml"),
            )
        )
    return signals


def naive_mb_s(classifier: Classifier, data: bytes) -> float:
    """The loop a first version would write: Python's `re` (the baseline every ratio
    here has been measured against), each signature's regex over each line."""
    patterns = [
        re.compile(
            s.signature.regex, re.MULTILINE | (re.IGNORECASE if s.signature.ignore_case else 0)
        )
        for s in classifier.log_signatures
        if s.signature.regex
    ]
    lines = data.decode("utf-8", "replace").split("\n")
    started = time.perf_counter()
    found = 0
    for line in lines:
        for pattern in patterns:
            if pattern.search(line):
                found += 1
    elapsed = time.perf_counter() - started
    return len(data) / 1e6 / elapsed


def scan_mb_s(classifier: Classifier, data: bytes) -> tuple[float, dict[str, int]]:
    """MB/s of one scan of `data`, and the hit count of each playbook found."""
    started = time.perf_counter()
    hits = classifier.scan_log(chunks(data))
    elapsed = time.perf_counter() - started
    return len(data) / 1e6 / elapsed, {h.sig.playbook_id: h.count for h in hits}


ROOT = Path(__file__).resolve().parents[1]


def side_by_side(revision: str, flags: list[str]) -> None:
    """The bench of `revision`'s tree, then this tree's, with the same flags."""
    lines: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="pitcrew-bench-tree-") as scratch:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", revision, "bot", "playbooks"],
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(scratch, filter="data")
        for label, tree in ((f"before ({revision})", Path(scratch)), ("after (this tree)", ROOT)):
            env = {**os.environ, "PYTHONPATH": str(tree)}
            bench = [sys.executable, str(Path(__file__).resolve()), *flags]
            out = subprocess.run(bench, env=env, cwd=tree, capture_output=True, check=True)
            lines[label] = out.stdout.decode().strip().splitlines()[-1]
            print(f"{label}: {lines[label]}")
    ratios = []
    for name in ("log_mb_s", "log_cpu_mb_s"):
        before, after = (_figure(line, name) for line in lines.values())
        ratios.append(f"{name} after/before={after / before:.2f}")
    print(f"{' '.join(ratios)} load_average={os.getloadavg()[0]:.1f}")


def _figure(line: str, name: str) -> float:
    fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
    return float(fields[name])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--log-mb", type=int, default=256)
    parser.add_argument("--dense-mb", type=int, default=64)
    parser.add_argument("--naive-mb", type=int, default=8)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--before", help="git revision to measure first (e.g. 4e2448c)")
    args = parser.parse_args()
    if args.before:
        flags = [
            f"--log-mb={args.log_mb}",
            f"--dense-mb={args.dense_mb}",
            f"--naive-mb={args.naive_mb}",
            f"--events={args.events}",
        ]
        side_by_side(args.before, flags)
        return

    library = load_builtin()
    classifier = Classifier(library)
    regexes = sum(1 for s in classifier.signatures if s.text_regex is not None)
    signatures = len(classifier.signatures)
    print(f"library: {len(library)} playbooks, {signatures} signatures ({regexes} regexes)")

    data = realistic_log(args.log_mb)
    started = time.perf_counter()
    copied = sum(len(bytes(c)) for c in chunks(data))
    memory_mb_s = copied / 1e6 / (time.perf_counter() - started)

    started, cpu = time.perf_counter(), time.process_time()
    hits = classifier.scan_log(chunks(data))
    elapsed = time.perf_counter() - started
    log_mb_s = len(data) / 1e6 / elapsed
    log_cpu_mb_s = len(data) / 1e6 / (time.process_time() - cpu)
    found = {h.sig.playbook_id: h.count for h in hits}
    print(f"log: {len(data) / 1e6:.0f} MB in {elapsed:.2f} s -> {log_mb_s:.0f} MB/s; hits {found}")
    print(f"reading the same chunks from memory: {memory_mb_s:.0f} MB/s")

    naive = naive_mb_s(classifier, data[: args.naive_mb * 1_000_000])
    print(f"naive per-line x per-regex loop over {args.naive_mb} MB: {naive:.2f} MB/s")

    dense = dense_log(args.dense_mb)
    dense_mb_s, dense_hits = scan_mb_s(classifier, dense)
    print(
        f"dense log (1 failure line in 100): {len(dense) / 1e6:.0f} MB -> {dense_mb_s:.0f} MB/s; "
        f"hits {dense_hits}"
    )
    dense_naive = naive_mb_s(classifier, dense[: args.naive_mb * 1_000_000])
    print(f"naive loop over {args.naive_mb} MB of the dense log: {dense_naive:.2f} MB/s")

    signals = event_signals(args.events)
    started = time.perf_counter()
    matched = sum(len(classifier.classify(s)) for s in signals)
    events_per_s = len(signals) / (time.perf_counter() - started)
    print(f"events: {len(signals)} signals, {matched} hits -> {events_per_s:.0f} signals/s")

    print(
        f"log_mb_s={log_mb_s:.0f} naive_mb_s={naive:.2f} ratio={log_mb_s / naive:.0f} "
        f"events_per_s={events_per_s:.0f} dense_mb_s={dense_mb_s:.0f} "
        f"dense_ratio={dense_mb_s / dense_naive:.0f} log_cpu_mb_s={log_cpu_mb_s:.0f}"
    )


if __name__ == "__main__":
    main()
