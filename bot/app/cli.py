"""The `pitcrew` command line: diagnose, playbooks list/check/test/coverage, schema, and the
daemon's commands (run, config, ingest, approve, reject, incidents, silence, unsilence,
history, status; in `bot.app.commands`)."""

from __future__ import annotations

from bot.app import collector  # first: no collection while the modules below are imported

# isort: split
import json
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperGroup
from typer.main import get_group

from bot import __version__
from bot.adapters.console.render import plain_lines
from bot.adapters.files.inputs import open_input
from bot.adapters.files.playbooks import (
    builtin_dir,
    builtin_engine,
    engine_of,
    load_builtin,
    load_library,
    load_playbook,
    playbook_files,
)
from bot.app import cli_params
from bot.app.cli_inputs import (
    ChartFile,
    PlaybookDirs,
    PrometheusUrl,
    err,
    expand_inputs,
    fail,
    notice,
    out,
)
from bot.app.diagnose_apart import diagnose_apart
from bot.core.diagnosis.engine import to_json
from bot.core.errors import PitcrewError, PlaybookError
from bot.core.inputs import InputPart
from bot.core.inputs.reader import read_stream
from bot.core.model import Diagnosis

if TYPE_CHECKING:
    from rich.progress import Progress
    from typer import _click as click

    from bot.app.memory_wiring import Measurement
    from bot.core.diagnosis.engine import Engine
    from bot.core.quality.examples import ExampleResult
    from bot.core.quality.inventory import InventoryEntry


_TYPE_WORDS = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "path": "PATH", "Path": "PATH"}
_typer_display_type = typer.core._TyperParameter.display_type


def _help_type(param: typer.core._TyperParameter, ctx: click.Context) -> str:
    """What to type, as help shows it: nothing for a flag, `TEXT`, `PATH`, `TEXT...` for a
    repeatable one, never Python's type names (`<bool>`, `<list[str]>`)."""
    if getattr(param, "is_flag", False):
        return ""
    label = _typer_display_type(param, ctx).strip("<>")
    many = label.startswith("list[") and label.endswith("]")
    label = label.removeprefix("list[").removesuffix("]") if many else label
    word = _TYPE_WORDS.get(label, label.upper() if label.isidentifier() else label)
    return f"{word}..." if many else word


typer.core._TyperParameter.display_type = _help_type  # type: ignore[method-assign,assignment]
cli_params.install()


class _WithDaemonCommands(TyperGroup):
    """The top-level command group. The daemon's commands (`bot.app.commands`: the store,
    the settings, the adapters) are imported the first time one of them, or the list of
    all, is asked for, so `pitcrew diagnose` and `playbooks` start without them."""

    _daemon_loaded = False

    def _load_daemon_commands(self) -> None:
        if self._daemon_loaded:
            return
        from bot.app import commands

        daemon = typer.Typer()
        commands.register(daemon)
        merged = {**self.commands, **get_group(daemon).commands}
        order = sorted(merged, key=lambda name: isinstance(merged[name], TyperGroup))
        self.commands = {name: merged[name] for name in order}  # commands, then groups
        self._daemon_loaded = True

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            self._load_daemon_commands()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_daemon_commands()
        return super().list_commands(ctx)


app = typer.Typer(
    cls=_WithDaemonCommands,
    help="pitcrew: diagnoses Ray-on-Kubernetes failures and offers approved remediations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"pitcrew {__version__}\n")
        raise typer.Exit()


@app.callback()
def _top(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="print pitcrew's version and exit",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """pitcrew: diagnoses Ray-on-Kubernetes failures and offers approved remediations."""


playbooks_app = typer.Typer(help="List, check and test playbooks.", no_args_is_help=True)
app.add_typer(playbooks_app, name="playbooks")


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
            out().print(f"Memory: {measured.line}", markup=False)
            if measured.spark:
                out().print(f"  {measured.spark}", markup=False)
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
    err().print(f"chart: {path}")


@app.command("diagnose")
def diagnose_command(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(help="files or directories to read; `-` or nothing reads standard input"),
    ] = None,
    output: Annotated[str, typer.Option("--format", "-f", help="text or json")] = "text",
    playbooks: PlaybookDirs = None,
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="Ray dashboard URL, with --ray-job")
    ] = None,
    ray_job: Annotated[
        str | None, typer.Option("--ray-job", help="diagnose this live Ray job (submission id)")
    ] = None,
    kube: Annotated[
        str | None,
        typer.Option(
            "--kube",
            help="diagnose a live object: NAMESPACE/pod/NAME, NAMESPACE/rayjob/NAME "
            "or NAMESPACE/raycluster/NAME",
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="kubeconfig for --kube (default: in-cluster or ~/.kube)"),
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", help="kubeconfig context for --kube")
    ] = None,
    prometheus: PrometheusUrl = None,
    chart: ChartFile = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="which lines matched which signature; with no finding, the lines that "
            "look like failures that no playbook knows",
        ),
    ] = False,
) -> None:
    """Diagnose logs, kubectl output, Kubernetes objects or Ray job info pasted together."""
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
        out().print(line, markup=False, highlight=False, soft_wrap=True)


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
                sys.stdout.write(f"== {' '.join(group)}\n")
            show(diagnosis, "pitcrew diagnose " + " ".join(group))


def _examples(engine: Engine) -> Iterator[ExampleResult]:
    from bot.core.quality.examples import run_examples  # playbooks check and test only

    yield from run_examples(engine)


@playbooks_app.command("list")
def playbooks_list(playbooks: PlaybookDirs = None) -> None:
    """List loaded playbooks with their category and severity."""
    try:
        library = load_builtin(playbooks or [])
    except PitcrewError as error:
        raise fail(str(error)) from None
    for loaded in library.playbooks:
        p = loaded.playbook
        actions = ",".join(a.action for a in p.actions) or "-"
        typer.echo(f"{p.id:<34} {p.category:<32} {p.severity:<9} {actions}")
    typer.echo(f"{len(library)} playbooks")


def _problem(path: Path) -> PlaybookError | None:
    try:
        load_playbook(path)
    except PlaybookError as error:
        return error
    return None


@playbooks_app.command("check")
def playbooks_check(directory: Annotated[Path, typer.Argument(help="playbook directory")]) -> None:
    """Validate a directory of playbooks (schema, regexes, templates, ids, actions), and
    render each template against the playbook's own examples."""
    try:
        bad = [str(e) for e in (_problem(path) for path in playbook_files(directory)) if e]
        if bad:  # every bad file at once, not the first alone
            sys.stderr.write("".join(f"pitcrew: {problem}\n" for problem in bad))
            raise typer.Exit(2)
        library = load_library([builtin_dir(), directory])
        mine = load_library([directory])
    except PitcrewError as error:
        raise fail(str(error)) from None
    ids = {p.playbook.id for p in mine.playbooks}
    problems = [
        f"{result.source}:{result.line or ''}: example {result.name!r}: {problem}"
        for result in _examples(engine_of(library))
        if result.playbook in ids
        for problem in result.problems
        if problem.startswith("diagnosis template: ")
    ]
    if problems:
        sys.stderr.write("".join(f"pitcrew: {p}\n" for p in problems))
        raise typer.Exit(2)
    typer.echo(f"{directory}: {len(mine)} playbooks OK")


@playbooks_app.command("test")
def playbooks_test(
    playbooks: PlaybookDirs = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run every playbook's examples; exit 1 on any failure, printing what differed."""
    try:
        engine = builtin_engine(playbooks or [])
    except PitcrewError as error:
        raise fail(str(error)) from None
    passed = failed = 0
    for result in _examples(engine):
        if result.passed:
            passed += 1
            if verbose:
                typer.echo(f"ok   {result.playbook}: {result.name}")
            continue
        failed += 1
        where = f"{result.source}:{result.line}" if result.line else result.source
        typer.echo(f"FAIL {result.playbook}: {result.name} ({where})")
        for problem in result.problems:
            typer.echo(f"     - {problem}")
    typer.echo(f"playbook examples: {passed} passed, {failed} failed")
    if failed:
        raise typer.Exit(1)


@playbooks_app.command("coverage")
def playbooks_coverage(
    playbooks: PlaybookDirs = None,
    catalogue: Annotated[
        list[Path] | None,
        typer.Option("--catalogue", "-c", help="catalogue directory (default: the built-in one)"),
    ] = None,
    fail_under: Annotated[
        float, typer.Option(help="exit 1 when a carrier's share recognized is below this %")
    ] = 0.0,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="show each missed text; signature drift")
    ] = False,
    inventory: Annotated[
        list[Path] | None,
        typer.Option("--inventory", "-i", help="inventory directory (default: the built-in one)"),
    ] = None,
    sample: Annotated[
        int,
        typer.Option(
            min=0, max=100, help="check this % of the inventory's messages (the same every run)"
        ),
    ] = 100,
) -> None:
    """Classify every catalogue entry in every carrier; print per class, per carrier and in
    total the entries, texts and share recognized, and list every miss. Then the message
    inventory: per project its messages, wordings and verdicts, and the share of its
    wordings answered as their verdict asks in every carrier, with the misses."""
    from bot.adapters.files.catalogue import builtin_catalogue_dir, load_catalogue
    from bot.adapters.files.inventory import (
        builtin_inventory_dir,
        inventory_known_messages,
        load_inventory,
    )
    from bot.adapters.files.playbooks import engine_of, load_builtin
    from bot.core.quality.coverage import below, report_lines, run

    directories = inventory or [builtin_inventory_dir()]
    try:
        engine = engine_of(
            load_builtin(playbooks or []), lambda: inventory_known_messages(directories)
        )
        entries = load_catalogue(catalogue or [builtin_catalogue_dir()])
        messages = load_inventory(directories) if sample else ()
    except PitcrewError as error:
        raise fail(str(error)) from None
    coverage = run(engine, entries)
    for line in report_lines(coverage, verbose):
        typer.echo(line)
    if messages:
        _inventory_coverage(engine, messages, sample)
    short = below(coverage, fail_under / 100)
    if short or coverage.unknown_signatures:
        sys.stderr.write("".join(f"pitcrew: below --fail-under: {s}\n" for s in short))
        if coverage.unknown_signatures:
            sys.stderr.write("pitcrew: catalogue entries name signatures no playbook has\n")
        raise typer.Exit(1)


def _inventory_coverage(engine: Engine, messages: Sequence[InventoryEntry], sample: int) -> None:
    """The inventory's part of `pitcrew playbooks coverage`, with how long it took."""
    from bot.core.quality import inventory_coverage

    started = time.monotonic()
    picked = inventory_coverage.sampled(messages, sample)
    checked = inventory_coverage.run(engine, picked)
    for line in inventory_coverage.report_lines(picked, checked):
        typer.echo(line)
    typer.echo(
        f"inventory: {len(picked)} of {len(messages)} messages checked"
        f" in {time.monotonic() - started:.0f} s"
    )


@playbooks_app.command("schema")
def playbooks_schema(
    write: Annotated[Path | None, typer.Option(help="write to this file instead of stdout")] = None,
) -> None:
    """Print (or write) the playbook JSON Schema."""
    from bot.core.playbooks.schema import json_schema_text

    text = json_schema_text()
    if write:
        write.write_text(text)
    else:
        sys.stdout.write(text)


@app.command("version")
def version() -> None:
    """Print pitcrew's version."""
    out().print(__version__)


def main() -> None:
    app()


collector.resume()
