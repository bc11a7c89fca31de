"""One run of `pitcrew demo`: start the Ray head, the Kubernetes emulator, Prometheus and
the daemon, run the scenes of `bot.app.demo.runner` in turn, and stop everything it
started by process id whatever happened (Ctrl-C and SIGTERM included).
"""

from __future__ import annotations

import logging
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from rich.console import Console

from bot.adapters.prometheus.local import LocalPrometheus
from bot.adapters.ray.client import RayApiError
from bot.adapters.ray.local import LocalRayHead
from bot.app import wiring as app
from bot.app.demo import memory_step
from bot.app.demo import seed as seed_case
from bot.app.demo.emulator import KubeEmulator
from bot.app.demo.jobs import Jobs
from bot.app.demo.runner import (
    APPROVER,
    Demo,
    ScenarioDeclinedError,
    ScenarioFailedError,
    settings_for,
)
from bot.app.demo.screen import DemoChat, ScenarioRow, Screen, summary
from bot.core.errors import PitcrewError
from bot.daemon.service import console_user

log = logging.getLogger("pitcrew.demo")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def _signals() -> Iterator[None]:
    """SIGTERM stops the demo as Ctrl-C does: through the clean-up."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _logging(verbose: bool) -> None:
    app.setup_logging(logging.INFO if verbose else logging.WARNING)
    _quiet(verbose)


def _quiet(verbose: bool) -> None:
    """Libraries' chatter off the screen unless --verbose: Ray's modules set their own
    levels (its job client logs each upload); the Kubernetes executor's warning that the
    emulator ignores dryRun is on the card already."""
    level = logging.INFO if verbose else logging.ERROR
    known = list(logging.root.manager.loggerDict)
    for name in ("urllib3", "kubernetes", "aiohttp", "kmock", "pitcrew.actions.kubernetes"):
        logging.getLogger(name).setLevel(level)
    for name in ("ray", *(n for n in known if n.startswith("ray."))):
        logging.getLogger(name).setLevel(level)


def main(*, yes: bool, verbose: bool = False, console: Console | None = None) -> int:
    """Run the demo; returns the exit status."""
    console = console or Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:  # a pipe or a file: 100 columns unless $COLUMNS says more
        console.width = max(console.width, 100)
    screen = Screen(console)
    if not yes and not sys.stdin.isatty():
        sys.stderr.write("pitcrew demo: standard input is not a terminal; pass --yes\n")
        return 2
    _logging(verbose)
    outcomes = [
        ScenarioRow("stale named actor (Ray)"),
        ScenarioRow("missing dependency (Ray)"),
        ScenarioRow("the seed (EMULATED Kubernetes)"),
    ]
    timings: list[str] = []
    began = time.monotonic()
    code, survivors = _everything(screen, outcomes, timings, yes=yes, verbose=verbose)
    timings.append(f"total: {time.monotonic() - began:.0f} s")
    if code == 130:
        return code
    summary(console, outcomes, timings)
    return _exit_code(screen, outcomes, survivors, code)


@dataclass
class _Parts:
    """What the demo started, to stop whatever happens."""

    head: LocalRayHead
    emulator: KubeEmulator | None = None
    daemon: app.Daemon | None = None
    jobs: Jobs | None = None
    prometheus: LocalPrometheus | None = None


def _everything(
    screen: Screen, outcomes: list[ScenarioRow], timings: list[str], *, yes: bool, verbose: bool
) -> tuple[int, list[int]]:
    """Start, run the scenarios, stop; the exit status so far and surviving Ray pids."""
    began = time.monotonic()
    directory = Path(tempfile.mkdtemp(prefix="pitcrew-demo-"))
    parts = _Parts(LocalRayHead(num_cpus=2))
    code = 0
    with _signals():
        try:
            demo = _start(screen, parts, directory, yes=yes, verbose=verbose)
            timings.append(f"set-up: {time.monotonic() - began:.0f} s")
            scenarios = (demo.stale_actor, demo.missing_dependency, demo.seed)
            for outcome, scenario in zip(outcomes, scenarios, strict=True):
                started = time.monotonic()
                _run(scenario, outcome, screen)
                timings.append(f"{outcome.scenario}: {time.monotonic() - started:.0f} s")
        except KeyboardInterrupt:
            screen.problem("interrupted: stopping everything the demo started")
            code = 130
        except Exception as error:  # Ray, kmock or the daemon could not start
            log.debug("set-up failed", exc_info=True)
            screen.problem(f"set-up failed: {error}")
            code = 1
        finally:
            stopping = time.monotonic()
            survivors = _stop(parts.daemon, parts.jobs, parts.emulator, parts.head, screen)
            if parts.prometheus is not None:
                parts.prometheus.stop()
            shutil.rmtree(directory, ignore_errors=True)
            timings.append(f"stop: {time.monotonic() - stopping:.0f} s")
    return code, survivors


def _start(screen: Screen, parts: _Parts, directory: Path, *, yes: bool, verbose: bool) -> Demo:
    """The Ray head, the emulator and the daemon, each said on screen as it comes up."""
    began = time.monotonic()
    screen.heading(
        "pitcrew demo",
        "Real failures on a local Ray, pitcrew's diagnosis on cards, approvals, "
        "remediation, verification. Approver: "
        f"{console_user(APPROVER).id}" + (" (--yes approves everything)" if yes else ""),
    )
    head = parts.head
    with screen.step("Starting a local Ray head on 127.0.0.1 (its own temp dir)"):
        head.start()
    screen.done(f"Ray head up in {time.monotonic() - began:.0f} s: dashboard {head.url}")
    screen.say(f"  process group {head.pid}, temp dir {head.temp_dir}")
    with screen.step("Starting kmock's Kubernetes API emulator (EMULATED Kubernetes)"):
        emulator = parts.emulator = KubeEmulator()
        emulator.install_kuberay()
        kubeconfig = emulator.write_kubeconfig(directory / "kubeconfig")
    screen.done(f"EMULATED Kubernetes API at {emulator.url} (kmock, in this process)")
    prometheus = parts.prometheus = memory_step.serve(screen)
    url = prometheus.url if prometheus is not None else ""
    with screen.step("Starting pitcrew (playbooks, store, sources, executors)"):
        chat = DemoChat(screen.console)
        daemon = parts.daemon = app.build(
            settings_for(directory, head.url, kubeconfig, url), chat=chat
        )
        daemon.start()
        jobs = parts.jobs = Jobs(head.url, directory / "jobs")
        _quiet(verbose)  # importing Ray set its loggers' levels again
    screen.done(f"pitcrew running in this process: console chat, store {daemon.store.path}")
    screen.say(
        f"  sources: Ray (polls {head.url} every 1 s), Kubernetes (watches "
        f"{seed_case.NS} on the emulator); executors: ray.* ray, k8s.* kubernetes, "
        "kuberay.* kuberay" + (f"; memory evidence: Prometheus at {url}" if url else "")
    )
    return Demo(screen, chat, daemon, jobs, emulator, yes=yes, measured=prometheus is not None)


def _exit_code(screen: Screen, outcomes: list[ScenarioRow], survivors: list[int], code: int) -> int:
    if survivors:
        screen.problem(f"Ray processes survived the stop: {survivors}")
        code = code or 1
    failed = [o for o in outcomes if not o.ok and not o.declined]
    if failed and code == 0:
        for outcome in failed:
            sys.stderr.write(
                f"pitcrew demo: scenario {outcome.scenario!r} did not reach its expected end: "
                f"{outcome.result}\n"
            )
        code = 1
    return code


def _run(scenario: Callable[[ScenarioRow], None], outcome: ScenarioRow, screen: Screen) -> None:
    try:
        scenario(outcome)
    except ScenarioDeclinedError as declined:  # the person's choice, not a failure
        outcome.result, outcome.declined = str(declined), True
        screen.say(f"{outcome.scenario}: {declined}")
    except (ScenarioFailedError, TimeoutError, PitcrewError, RayApiError) as error:
        outcome.result = f"stopped: {error}"
        screen.problem(f"{outcome.scenario}: {error}")
    except Exception as error:  # a client library's own error: the next scenario still runs
        log.debug("scenario %s failed", outcome.scenario, exc_info=True)
        outcome.result = f"stopped: {type(error).__name__}: {error}"
        screen.problem(f"{outcome.scenario}: {type(error).__name__}: {error}")


def _stop(
    daemon: app.Daemon | None,
    jobs: Jobs | None,
    emulator: KubeEmulator | None,
    head: LocalRayHead,
    screen: Screen,
) -> list[int]:
    """Stop in reverse order of start, each step whatever the others did."""
    pgid = head.pid
    with screen.step("Stopping pitcrew, the emulator and the Ray head"):
        for what, step in (
            ("pitcrew", daemon.stop if daemon else None),
            ("the job client", jobs.close if jobs else None),
            ("the Kubernetes emulator", emulator.stop if emulator else None),
        ):
            if step is None:
                continue
            try:
                step()
            except Exception as error:
                screen.problem(f"could not stop {what}: {error}")
        survivors = head.stop()
    ray = f"the Ray head (process group {pgid}) with everything it started" if pgid else ""
    screen.done(f"stopped: pitcrew, the Kubernetes emulator{', and ' + ray if ray else ''}")
    return survivors
