"""`pitcrew playbooks`: list, check, test and measure the playbooks (against the message
catalogue), and print their JSON Schema.

Why a module of its own: `bot.app.cli_app` imports it when a `playbooks` command runs.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.adapters.files.playbooks import (
    builtin_dir,
    builtin_engine,
    engine_of,
    load_builtin,
    load_library,
    load_playbook,
    playbook_files,
)
from bot.app.cli_inputs import PlaybookDirs, fail, notice, say, typer_app
from bot.core.errors import PitcrewError, PlaybookError

if TYPE_CHECKING:
    from bot.core.diagnosis.engine import Engine
    from bot.core.quality.examples import ExampleResult
    from bot.core.quality.inventory import InventoryEntry
    from bot.core.quality.inventory_coverage import Checked


# `pitcrew playbooks ...`, for the command group (`bot.app.cli_app`) to take in.
cli = typer_app()
playbooks_app = typer_app(help="List, check and test playbooks.")
cli.add_typer(playbooks_app, name="playbooks")


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
        say(f"{p.id:<34} {p.category:<32} {p.severity:<9} {actions}")
    say(f"{len(library)} playbooks")


def _problem(path: Path) -> PlaybookError | None:
    try:
        load_playbook(path)
    except PlaybookError as error:
        return error
    return None


@playbooks_app.command("check")
def playbooks_check(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="playbook directory")],
) -> None:
    """Validate a directory of playbooks (schema, regexes, templates, ids, actions), and
    render each template against the playbook's own examples."""
    try:
        bad = [str(e) for e in (_problem(path) for path in playbook_files(directory)) if e]
        if bad:  # every bad file at once, not the first alone
            for problem in bad:
                notice(problem)
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
        for problem in problems:
            notice(problem)
        raise typer.Exit(2)
    say(f"{directory}: {len(mine)} playbooks OK")


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
                say(f"ok   {result.playbook}: {result.name}")
            continue
        failed += 1
        where = f"{result.source}:{result.line}" if result.line else result.source
        say(f"FAIL {result.playbook}: {result.name} ({where})")
        for problem in result.problems:
            say(f"     - {problem}")
    say(f"playbook examples: {passed} passed, {failed} failed")
    if failed:
        raise typer.Exit(1)


CatalogueDirs = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalogue", "-c", metavar="DIR", help="catalogue directory (default: the built-in one)"
    ),
]
FailUnder = Annotated[
    float,
    typer.Option(
        metavar="PERCENT", help="exit 1 when a carrier's share recognized is below this %"
    ),
]
InventoryDirs = Annotated[
    list[Path] | None,
    typer.Option(
        "--inventory", "-i", metavar="DIR", help="inventory directory (default: the built-in one)"
    ),
]
Jobs = Annotated[
    int,
    typer.Option(
        metavar="N", min=0, help="check the inventory in N processes (0, the default: one a core)"
    ),
]
Sample = Annotated[
    int,
    typer.Option(
        metavar="PERCENT",
        min=0,
        max=100,
        help="check this % of the inventory's messages (the same every run)",
    ),
]


@playbooks_app.command("coverage")
def playbooks_coverage(
    playbooks: PlaybookDirs = None,
    catalogue: CatalogueDirs = None,
    fail_under: FailUnder = 0.0,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="show each missed text; signature drift")
    ] = False,
    inventory: InventoryDirs = None,
    sample: Sample = 100,
    jobs: Jobs = 0,
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
        say(line)
    if messages:
        _inventory_coverage(engine, messages, sample, jobs or os.cpu_count() or 1)
    short = below(coverage, fail_under / 100)
    if short or coverage.unknown_signatures:
        for item in short:
            notice(f"below --fail-under: {item}")
        if coverage.unknown_signatures:
            notice("catalogue entries name signatures no playbook has")
        raise typer.Exit(1)


def _inventory_coverage(
    engine: Engine, messages: Sequence[InventoryEntry], sample: int, jobs: int
) -> None:
    """The inventory's part of `pitcrew playbooks coverage`, with how long it took."""
    from bot.core.quality import inventory_coverage

    started = time.monotonic()
    picked = inventory_coverage.sampled(messages, sample)
    checked = _pooled(engine, picked, jobs)
    for line in inventory_coverage.report_lines(picked, checked):
        say(line)
    say(
        f"inventory: {len(picked)} of {len(messages)} messages checked"
        f" in {time.monotonic() - started:.0f} s ({jobs} process{'es' if jobs > 1 else ''})"
    )


_POOL_ENGINE: list[Engine] = []
"""The engine a forked worker of `_pooled` diagnoses with (built once, before the fork)."""


def _pooled_chunk(chunk: Sequence[InventoryEntry]) -> tuple[Checked, ...]:
    from bot.core.quality import inventory_coverage

    return inventory_coverage.run(_POOL_ENGINE[0], chunk)


def _pooled(engine: Engine, picked: Sequence[InventoryEntry], jobs: int) -> tuple[Checked, ...]:
    """The inventory's texts checked in `jobs` forked processes sharing the parent's
    engine (the first entry is checked here, so the inventory's matcher is built before
    the fork), in the entries' order."""
    from bot.core.quality import inventory_coverage

    first = inventory_coverage.run(engine, picked[:1])
    rest = picked[1:]
    if jobs <= 1 or len(rest) < 2 * jobs:
        return first + inventory_coverage.run(engine, rest)
    _POOL_ENGINE[:] = [engine]
    chunks = [rest[i :: jobs * 8] for i in range(jobs * 8)]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        results = pool.map(_pooled_chunk, chunks)
    order = {e.key: n for n, e in enumerate(picked)}
    checked = sorted((c for r in results for c in r), key=lambda c: order[c.entry.key])
    return first + tuple(checked)


@playbooks_app.command("schema")
def playbooks_schema(
    write: Annotated[
        Path | None, typer.Option(metavar="FILE", help="write to this file instead of stdout")
    ] = None,
) -> None:
    """Print (or write) the playbook JSON Schema."""
    from bot.core.playbooks.schema import json_schema_text

    text = json_schema_text()
    if write:
        write.write_text(text)
    else:
        sys.stdout.write(text)
