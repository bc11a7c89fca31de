"""`pitcrew diagnose`: what is pasted or named (files, directories, standard input), a
live Ray job (`--ray-job`) or a live Kubernetes object (`--kube`), diagnosed and shown.

Why a module of its own: `bot.app.cli_app` imports it when `diagnose` runs, and a short
`pitcrew diagnose` imports this and what it needs, nothing of the other commands.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.adapters.console.render import plain_lines, terminal_text
from bot.adapters.files.inputs import open_input
from bot.adapters.files.playbooks import builtin_engine
from bot.app.cli_inputs import (
    ChartFile,
    PlaybookDirs,
    PrometheusUrl,
    err,
    expand_inputs,
    fail,
    notice,
    out,
    say,
    typer_app,
)
from bot.app.diagnose_apart import diagnose_apart
from bot.core.diagnosis.engine import to_json
from bot.core.errors import PitcrewError
from bot.core.inputs import InputPart
from bot.core.inputs.reader import read_stream
from bot.core.model import Diagnosis

if TYPE_CHECKING:
    from rich.progress import Progress

    from bot.app.memory_wiring import Measurement


# `pitcrew diagnose`, for the command group (`bot.app.cli_app`) to take in.
cli = typer_app()


def show(diagnosis: Diagnosis, title: str) -> None:
    """A diagnosis for people: a panel on a terminal, whole plain lines in a pipe."""
    if sys.stdout.isatty():
        from bot.adapters.console.render import print_diagnosis

        print_diagnosis(diagnosis, out(), title=title)
    else:
        sys.stdout.write("".join(f"{line}\n" for line in plain_lines(diagnosis)))


def _parts(
    names: list[str], stack: ExitStack, progress: Progress | None, read: list[int]
) -> Iterator[InputPart]:
    """The parts of every input; `read` gets each input's size in bytes."""
    for name in names:
        stream, origin, size = open_input(name)
        if stream is not sys.stdin.buffer:
            stack.enter_context(stream)
        task = progress.add_task(origin, total=size) if progress else None
        read.append(0)

        def advance(n: int, task: object = task) -> None:
            read[-1] += n
            if progress is not None and task is not None:
                progress.advance(task, n)  # type: ignore[arg-type]

        yield from read_stream(stream, origin, advance, notice)


NO_FAILURE_HINT = (
    "No playbook matched. `pitcrew diagnose --explain` shows the lines that look like "
    "failures no playbook knows."
)


def _diagnose_ray_job(
    address: str | None,
    job: str | None,
    inputs: list[str] | None,
    output: str,
    playbooks: list[Path] | None,
) -> None:
    """`diagnose --ray-address URL --ray-job ID`: a live job, the same output as files."""
    from bot.adapters.ray.on_demand import diagnose_ray_job

    if not address or not job or inputs:
        raise fail("--ray-address and --ray-job go together, without input files")
    try:
        live = diagnose_ray_job(builtin_engine(playbooks or []), address, job)
    except PitcrewError as error:
        raise fail(str(error)) from None
    if output == "json":
        sys.stdout.write(json.dumps(to_json(live.diagnosis), ensure_ascii=False) + "\n")
    else:
        show(live.diagnosis, f"pitcrew diagnose --ray-job {job}")


@dataclass(frozen=True)
class KubeRequest:
    """`diagnose --kube NAMESPACE/KIND/NAME` and what goes with it."""

    target: str
    kubeconfig: Path | None
    context: str | None
    prometheus: str | None = None
    chart: Path | None = None


def _diagnose_kube(
    request: KubeRequest, inputs: list[str] | None, output: str, playbooks: list[Path] | None
) -> None:
    """A live object, the same output as files; with `--prometheus`, the killed pod's
    memory before the kill, the bump sized from it, and `--chart FILE`."""
    from bot.adapters.kubernetes.on_demand import diagnose_target
    from bot.app.memory_wiring import measure

    if inputs:
        raise fail("--kube reads from the cluster; give no input files with it")
    if request.chart is not None and not request.prometheus:
        raise fail("--chart draws what --prometheus URL reads; give both")
    try:
        engine = builtin_engine(playbooks or [])
        diagnosis = diagnose_target(
            engine,
            request.target,
            str(request.kubeconfig) if request.kubeconfig else None,
            request.context,
        )
        measured = (
            measure(diagnosis, request.prometheus, datetime.now(UTC))
            if request.prometheus
            else None
        )
    except PitcrewError as error:
        raise fail(str(error)) from None
    if measured is not None:
        diagnosis = measured.diagnosis
    if output == "json":
        shown = to_json(diagnosis) | ({"memory": measured.line} if measured else {})
        sys.stdout.write(json.dumps(shown, ensure_ascii=False) + "\n")
    else:
        show(diagnosis, f"pitcrew diagnose --kube {request.target}")
        if measured is not None:
            out().print(terminal_text(f"Memory: {measured.line}"))
            if measured.spark:
                out().print(terminal_text(f"  {measured.spark}"))
    if request.chart is not None:
        _save_chart(request.chart, measured)


def _save_chart(path: Path, measured: Measurement | None) -> None:
    from bot.app.memory_wiring import render

    if measured is None:
        raise fail("--chart: no finding names a pod killed for memory")
    if measured.evidence is None or not measured.evidence.killed.samples:
        raise fail(f"--chart: {measured.line}")
    try:
        path.write_bytes(render(measured.evidence))
    except OSError as error:
        raise fail(f"--chart: cannot write {path}: {error.strerror}") from None
    err().print(terminal_text(f"chart: {path}"))


Inputs = Annotated[
    list[str] | None, typer.Argument(metavar="INPUT", hidden=True)  # said in the docstring
]
Format = Annotated[str, typer.Option("--format", "-f", metavar="text|json")]
RayAddress = Annotated[
    str | None,
    typer.Option("--ray-address", metavar="URL", help="Ray dashboard URL, with --ray-job"),
]
RayJob = Annotated[
    str | None,
    typer.Option(
        "--ray-job", metavar="SUBMISSION_ID", help="diagnose this live Ray job (submission id)"
    ),
]
KubeTarget = Annotated[
    str | None,
    typer.Option(
        "--kube",
        metavar="NAMESPACE/KIND/NAME",
        help="diagnose a live object: NAMESPACE/pod/NAME, NAMESPACE/rayjob/NAME "
        "or NAMESPACE/raycluster/NAME",
    ),
]
KubeConfig = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig for --kube (default: in-cluster or ~/.kube)",
    ),
]
KubeContext = Annotated[
    str | None, typer.Option("--context", metavar="NAME", help="kubeconfig context for --kube")
]
Explain = Annotated[
    bool,
    typer.Option(
        "--explain",
        help="which lines matched which signature; with no finding, the lines that "
        "look like failures that no playbook knows",
    ),
]


@cli.command("diagnose")
def diagnose_command(
    inputs: Inputs = None,
    output: Format = "text",
    playbooks: PlaybookDirs = None,
    ray_address: RayAddress = None,
    ray_job: RayJob = None,
    kube: KubeTarget = None,
    kubeconfig: KubeConfig = None,
    context: KubeContext = None,
    prometheus: PrometheusUrl = None,
    chart: ChartFile = None,
    explain: Explain = False,
) -> None:
    """Diagnose logs, kubectl output, Kubernetes objects or Ray job info pasted together.

    Each INPUT is a file or a directory (its files); `-`, or no INPUT, reads standard input.
    """
    if output not in ("text", "json"):
        raise fail(f"--format must be text or json, not {output!r}")
    if ray_address is not None or ray_job is not None:
        _diagnose_ray_job(ray_address, ray_job, inputs, output, playbooks)
        return
    if kube is not None:
        request = KubeRequest(kube, kubeconfig, context, prometheus, chart)
        _diagnose_kube(request, inputs, output, playbooks)
        return
    if explain:
        _explain_files(inputs, output, playbooks)
        return
    _diagnose_files(inputs, output, playbooks)


def _explain_files(inputs: list[str] | None, output: str, playbooks: list[Path] | None) -> None:
    """`diagnose --explain`: the inputs are read whole (to show their lines), diagnosed
    as usual, and the matching and unmatched failure lines are shown with the verdict."""
    try:
        engine = builtin_engine(playbooks or [])
        parts: list[InputPart] = []
        for name in expand_inputs(inputs or ["-"]):
            stream, origin, _ = open_input(name)
            with stream if stream is not sys.stdin.buffer else nullcontext(stream):
                data = stream.read()
            parts.extend(read_stream(BytesIO(data), origin, notice=notice))
        hits = engine.hits(parts)
        diagnosis = engine.verdict(parts, hits)
    except PitcrewError as error:
        raise fail(str(error)) from None
    from bot.core.diagnosis.explain import explain as explain_hits
    from bot.core.diagnosis.explain import explanation_json, explanation_lines

    explanation = explain_hits(hits, engine.unknown_lines(parts), bool(diagnosis.findings))
    if output == "json":
        shown = to_json(diagnosis) | {"explain": explanation_json(explanation)}
        sys.stdout.write(json.dumps(shown, ensure_ascii=False) + "\n")
        return
    show(diagnosis, "pitcrew diagnose " + " ".join(inputs or ["-"]))
    for line in explanation_lines(explanation):
        out().print(terminal_text(line), highlight=False, soft_wrap=True)


def _diagnose_files(inputs: list[str] | None, output: str, playbooks: list[Path] | None) -> None:
    """Files, directories or standard input, with a progress bar on a terminal."""
    try:
        engine = builtin_engine(playbooks or [])
        names = expand_inputs(inputs or ["-"])
        if several := diagnose_apart(engine, names, notice):
            _show_apart(several, output)
            return
        show_progress = sys.stderr.isatty() and output == "text"
        with ExitStack() as stack:
            progress = None
            if show_progress:
                from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

                progress = stack.enter_context(
                    Progress(
                        *Progress.get_default_columns()[:1],
                        BarColumn(),
                        DownloadColumn(),
                        TransferSpeedColumn(),
                        console=err(),
                        transient=True,
                    )
                )
            read: list[int] = []
            diagnosis = engine.diagnose(_parts(names, stack, progress, read))
    except PitcrewError as error:
        raise fail(str(error)) from None
    if not any(read):
        shown = "standard input" if names == ["-"] else ", ".join(names)
        raise fail(f"{shown}: empty, nothing to diagnose")
    if output == "json":
        sys.stdout.write(json.dumps(to_json(diagnosis), ensure_ascii=False) + "\n")
        return
    show(diagnosis, "pitcrew diagnose " + " ".join(inputs or ["-"]))
    if not diagnosis.findings:
        sys.stdout.write(NO_FAILURE_HINT + "\n")


def _show_apart(several: list[tuple[list[str], Diagnosis]], output: str) -> None:
    """Inputs of unrelated workloads, each group's diagnosis on its own."""
    notice(f"these inputs are {len(several)} unrelated workloads, diagnosed apart")
    for group, diagnosis in several:
        if output == "json":
            shown = {"inputs": group} | to_json(diagnosis)
            sys.stdout.write(json.dumps(shown, ensure_ascii=False) + "\n")
        else:
            if not sys.stdout.isatty():
                say(f"== {' '.join(group)}")
            show(diagnosis, "pitcrew diagnose " + " ".join(group))
