"""How long `pitcrew diagnose` of a small paste takes, from process start to answer.

People run it by hand, over and over (and Slack's `/pitcrew diagnose` runs the same
code), so start-up dominates: imports, loading the playbook library, the Hyperscan
database. Each tree is run as `python -c 'from bot.app.cli import main; main()'
diagnose -` with a five-byte paste on standard input, once to warm its pattern cache
(its own temporary PITCREW_CACHE_DIR, and its bytecode written, whatever
PYTHONDONTWRITEBYTECODE says), then `--runs` times; the medians are printed.
`--before REV` also runs the tree of a git revision (extracted with `git archive`)
with the same interpreter, for a before/after line; the two trees' runs alternate, so
a machine busy for a while weighs on both alike. Figures only: nothing is asserted.

    .venv/bin/python bench/startup.py [--runs 9] [--before REV] [--paste TEXT]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "import sys; sys.argv[0] = 'pitcrew'; from bot.app.cli import main; main()"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(tree: Path, cache: Path, paste: bytes) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `diagnose -`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PITCREW_CACHE_DIR": str(cache)}
    # Bytecode is written and reused as in an installed pitcrew (the image compiles its
    # modules): without it every run of a tree compiles its sources again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, "diagnose", "-"],
        input=paste,
        capture_output=True,
        env=env,
        cwd=tree,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{tree}: exit {done.returncode}: {done.stderr.decode()[-400:]}")
    return elapsed, _children_cpu() - cpu


def measure(trees: list[Path], runs: int, paste: bytes) -> list[tuple[float, float, float]]:
    """For each tree: (wall seconds of the first run, with an empty cache; median wall and
    median CPU seconds of the warm runs), the trees' warm runs alternating. CPU time says
    less about waiting on a busy machine."""
    with tempfile.TemporaryDirectory(prefix="pitcrew-bench-cache-") as scratch:
        caches = [Path(scratch) / str(n) for n in range(len(trees))]
        colds = [run_once(tree, cache, paste)[0] for tree, cache in zip(trees, caches, strict=True)]
        warm: list[list[tuple[float, float]]] = [[] for _ in trees]
        for _ in range(runs):
            for n, (tree, cache) in enumerate(zip(trees, caches, strict=True)):
                warm[n].append(run_once(tree, cache, paste))
    return [
        (cold, statistics.median(w for w, _ in runs_of), statistics.median(c for _, c in runs_of))
        for cold, runs_of in zip(colds, warm, strict=True)
    ]


def extract(revision: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "bot", "playbooks"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--before", help="git revision to compare with (e.g. main~5)")
    parser.add_argument("--paste", default="OOM!\n", help="what is piped into diagnose")
    args = parser.parse_args()
    paste = args.paste.encode()
    trees = [("after", ROOT)]
    with tempfile.TemporaryDirectory(prefix="pitcrew-bench-tree-") as scratch:
        if args.before:
            trees.insert(0, ("before", extract(args.before, Path(scratch))))
        summary = []
        figures = measure([tree for _, tree in trees], args.runs, paste)
        for (label, _), (cold, wall, cpu) in zip(trees, figures, strict=True):
            name = f"{label} ({args.before})" if label == "before" else f"{label} (this tree)"
            print(
                f"{name}: first run {cold:.3f}s; median of {args.runs} runs "
                f"{wall:.3f}s wall, {cpu:.3f}s CPU"
            )
            summary.append(f"{label}_median_s={wall:.3f} {label}_cpu_s={cpu:.3f}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(" ".join(summary))


if __name__ == "__main__":
    main()
