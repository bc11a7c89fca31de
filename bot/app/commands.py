"""The daemon's commands: run, demo, config, ingest, and the operations on its state.

Why this exists: `pitcrew run` starts the daemon; the other commands work on
the same store file from another shell (found with `--config`, or `--store`),
so a person at a terminal can approve, reject, silence and look around
exactly as they would from the chat: every operation goes through
`bot.daemon.service`, and the command-line user is checked against the approval
policy as `console:<name>` (`--as NAME`, default $USER). `bot.app.cli_app` imports
this module when one of them runs.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated
from urllib.parse import urlencode, urlsplit

import typer

from bot.adapters.files.playbooks import load_builtin
from bot.adapters.http.ingest import PATH as INGEST_PATH
from bot.adapters.http.ingest import parse_workload
from bot.adapters.store.store import Store
from bot.app.cli_inputs import expand_inputs, fail, notice, say, typer_app
from bot.app.factories import build_registry, check_kinds, open_store, probe_store
from bot.app.settings import loading
from bot.app.settings.loading import ConfigError
from bot.app.settings.sections import Settings
from bot.core.durations import parse_duration
from bot.core.errors import PitcrewError
from bot.core.incidents.outcomes import status as card_status
from bot.core.incidents.workloads import key_text
from bot.core.model import Incident, Proposal
from bot.daemon.ports import Answer, EvidenceFetch, utcnow
from bot.daemon.service import Service, console_user

# The daemon's commands, for the command group (`bot.app.cli_app`) to take in.
cli = typer_app()
config_app = typer_app(help="Check or show the daemon's configuration.")
cli.add_typer(config_app, name="config")

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="config file (default: $PITCREW_CONFIG, else built-in defaults)",
    ),
]
StoreOption = Annotated[
    Path | None,
    typer.Option(
        "--store",
        metavar="FILE",
        help="the daemon's SQLite file (overrides the config's store.path and store.url)",
    ),
]
UserOption = Annotated[
    str | None,
    typer.Option(
        "--as", metavar="NAME", help="who you are, for the approval policy (default: $USER)"
    ),
]
TIME = "%Y-%m-%d %H:%M:%S"


def load_settings(
    file: Path | None, store: Path | None = None, *, client: bool = False
) -> Settings:
    """The settings; `client` for commands that need no chat tokens (they talk to the
    daemon over HTTP or read its store)."""
    try:
        loaded = loading.load(file, client=client)
    except ConfigError as error:
        for problem in error.problems:
            notice(str(problem))
        raise typer.Exit(2) from None
    if store is not None:
        loaded = loaded.model_copy(
            update={"store": loaded.store.model_copy(update={"path": store, "url": ""})}
        )
    return loaded


@contextmanager
def opened_store(settings: Settings) -> Iterator[Store]:
    """The daemon's existing store: never an empty SQLite file made here; a PostgreSQL
    that does not answer is an error naming its URL (without the password)."""
    path = settings.store.path
    if not settings.store.url and not path.exists():
        raise fail(f"{path}: no pitcrew state here; point at the daemon's with --config or --store")
    try:
        opened = open_store(settings)
    except PitcrewError as error:
        raise fail(str(error)) from None
    with opened:
        try:
            yield opened
        except PitcrewError as error:
            raise fail(str(error)) from None


@contextmanager
def opened_service(file: Path | None, store: Path | None) -> Iterator[Service]:
    """The service over the daemon's existing store; the daemon's playbooks are read only
    for a silence by playbook (its silencer's scope)."""
    settings = load_settings(file, store, client=True)

    def offers() -> Mapping[str, tuple[str, ...]]:
        return load_builtin(settings.playbooks.dirs).actions_by_playbook()

    with opened_store(settings) as opened:
        registry = build_registry(settings)
        yield Service(opened, settings.approvals, registry, offers=offers)


def _user(name: str | None) -> str:
    return name or os.environ.get("USER") or getpass.getuser()


def _say(answer: Answer) -> None:
    say(f"{answer.outcome}: {answer.text}")
    if not answer.ok:
        raise typer.Exit(1)


# -- the daemon ---------------------------------------------------------------------------


@cli.command("run")
def run_command(
    file: ConfigOption = None,
    init_store: Annotated[
        bool,
        typer.Option("--init-store", help="make an existing empty or foreign file the store"),
    ] = False,
) -> None:
    """Run the daemon: sources -> pipeline -> chat, with approvals, until SIGTERM."""
    from bot.app import wiring as app  # the daemon's wiring is only needed here

    settings = load_settings(file)
    try:
        code = app.run(settings, init_store=init_store)
    except PitcrewError as error:
        raise fail(str(error)) from None
    raise typer.Exit(code)


@cli.command("demo")
def demo_command(
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="approve every offered action (no questions)")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="the daemon's log too")] = False,
) -> None:
    """Show the whole loop: real failures on a local Ray (and the seed case on an emulated
    Kubernetes API), cards, approvals, remediation, a successful rerun."""
    from bot.app.demo import unavailable

    if problem := unavailable():
        raise fail(problem)
    from bot.app.demo.session import main  # Ray, kmock and the daemon's wiring: only here

    raise typer.Exit(main(yes=yes, verbose=verbose))


@config_app.command("check")
def config_check(
    file: Annotated[
        Path | None, typer.Argument(metavar="FILE", help="config file (default: $PITCREW_CONFIG)")
    ] = None,
) -> None:
    """Validate a config file: every bad key is named as file:line: field: reason."""
    try:
        loaded = loading.load(file)
    except ConfigError as error:
        for problem in error.problems:
            say(problem)
        raise typer.Exit(2) from None
    problems = check_kinds(loaded)
    for problem in problems:
        say(problem)
    store = probe_store(loaded)
    say(f"store: {store}")
    if problems or not store.answers:
        raise typer.Exit(2)
    say(f"{loaded.origin}: OK")


@config_app.command("show")
def config_show(
    file: Annotated[
        Path | None, typer.Argument(metavar="FILE", help="config file (default: $PITCREW_CONFIG)")
    ] = None,
) -> None:
    """Print the effective configuration, secrets masked."""
    sys.stdout.write(loading.render(load_settings(file)))


@cli.command("ingest")
def ingest_command(
    file: Annotated[str, typer.Argument(metavar="FILE", help="a file, a directory, or -")],
    url: Annotated[str | None, typer.Option(metavar="URL", help="the daemon's ingest URL")] = None,
    workload: Annotated[
        str | None, typer.Option(metavar="NAMESPACE/KIND/NAME", help="the owning workload")
    ] = None,
    cluster: Annotated[str, typer.Option(metavar="NAME", help="the Kubernetes cluster")] = "",
    origin: Annotated[
        str | None, typer.Option(metavar="LABEL", help="label for evidence lines")
    ] = None,
    file_config: ConfigOption = None,
) -> None:
    """Send evidence (anything `pitcrew diagnose` reads) to a running daemon: a file, each
    file of a directory (one request each, as `diagnose` reads a directory), or stdin."""
    query: dict[str, str] = {}
    if cluster:
        query["cluster"] = cluster
    if workload:
        try:
            ref = parse_workload(workload)
        except PitcrewError as error:
            raise fail(str(error)) from None
        query["workload"] = f"{ref.kind}/{ref.name}"
        if ref.namespace:
            query["namespace"] = ref.namespace
    try:
        files = ["-"] if file == "-" else expand_inputs([file])
    except PitcrewError as error:
        raise fail(str(error)) from None
    settings = load_settings(file_config, client=True)
    target = _with_ingest_path(url) if url else _ingest_url(settings)
    headers = {"Content-Type": "text/plain; charset=utf-8"}
    if settings.secrets.ingest_token is not None:  # a daemon beyond loopback wants it
        headers["Authorization"] = f"Bearer {settings.secrets.ingest_token.get_secret_value()}"
    for name in files:
        body = sys.stdin.buffer.read() if name == "-" else _read(name)
        label = origin or ("<stdin>" if name == "-" else name)
        if origin and len(files) > 1:
            label = f"{origin}/{Path(name).name}"
        _send(target, headers, body, {"origin": label, **query})


def _send(target: str, headers: dict[str, str], body: bytes, query: dict[str, str]) -> None:
    """One request of `pitcrew ingest`, and what the daemon said."""
    body, cut_note = log_tail(body, INGEST_BODY_LIMIT - 4096)
    request = urllib.request.Request(
        f"{target}?{urlencode(query)}", data=body, method="POST", headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            reply = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        raise fail(f"{target}: {error.code}: {_error_detail(error)}") from None
    except (urllib.error.URLError, OSError) as error:
        raise fail(
            f"{target}: cannot reach the daemon: {getattr(error, 'reason', error)}"
        ) from None
    for note in filter(None, [cut_note, *reply.get("notes", [])]):
        notice(str(note))
    accepted = int(reply.get("accepted", 0))
    say(f"queued {accepted} part{'' if accepted == 1 else 's'} of {query['origin']}")


# The daemon reads at most this much of one request (bot.adapters.http.server.MAX_BODY).
INGEST_BODY_LIMIT = 1 << 20


def log_tail(body: bytes, limit: int) -> tuple[bytes, str]:
    """A body over `limit` bytes as its last whole lines within `limit` (a failure is
    at a log's end), and what was done, to say; else the body and ""."""
    if len(body) <= limit:
        return body, ""
    tail = body[-limit:]
    start = tail.find(b"\n") + 1
    tail = tail[start:] if 0 < start < len(tail) else tail
    lines = tail.count(b"\n") + (not tail.endswith(b"\n"))
    return tail, (
        f"sent the last {len(tail):,} bytes ({lines:,} lines) of {len(body):,}: the daemon "
        f"takes at most {INGEST_BODY_LIMIT:,} bytes per request, and a failure is at a log's end"
    )


def _with_ingest_path(url: str) -> str:
    """A daemon's base URL (`http://host:9464`) means its ingest endpoint."""
    return url.rstrip("/") + "/ingest" if urlsplit(url).path in ("", "/") else url


def _error_detail(error: urllib.error.HTTPError) -> str:
    """The daemon's JSON `error`, or the reason line when the body is not ours."""
    try:
        return str(json.loads(error.read() or b"{}").get("error", error.reason))
    except (ValueError, AttributeError):
        return str(error.reason)


def _read(file: str) -> bytes:
    try:
        return Path(file).read_bytes()
    except OSError as error:
        raise fail(f"{file}: cannot read: {error.strerror}") from None


def _ingest_url(settings: Settings) -> str:
    host = settings.http.host
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://{host}:{settings.http.port}{INGEST_PATH}"


# -- operations on the state ----------------------------------------------------------------


@cli.command("approve")
def approve_command(
    proposal_id: Annotated[
        str, typer.Argument(metavar="PROPOSAL_ID", help="the proposal id shown on the card")
    ],
    user: UserOption = None,
    file: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """Approve a proposal; the running daemon executes it."""
    with opened_service(file, store) as service:
        answer = service.approve(proposal_id, console_user(_user(user)), utcnow())
    _say(answer)


@cli.command("reject")
def reject_command(
    proposal_id: Annotated[
        str, typer.Argument(metavar="PROPOSAL_ID", help="the proposal id shown on the card")
    ],
    reason: Annotated[str, typer.Option(metavar="TEXT", help="why, for the card")] = "",
    user: UserOption = None,
    file: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """Reject a proposal."""
    with opened_service(file, store) as service:
        _say(service.reject(proposal_id, console_user(_user(user)), utcnow(), reason))


@cli.command("incidents")
def incidents_command(
    namespace: Annotated[
        str | None, typer.Argument(metavar="NAMESPACE", help="only this namespace")
    ] = None,
    file: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """List open incidents with their proposals."""
    with opened_service(file, store) as service:
        views = service.incidents(namespace)
    for view in views:
        say(_incident_line(view.incident, view.proposals))
        for proposal in view.proposals:
            say(_proposal_line(proposal))
    say(f"{len(views)} open incident{'' if len(views) == 1 else 's'}")


@cli.command("silence")
def silence_command(
    matcher: Annotated[
        str,
        typer.Argument(
            metavar="MATCHER",
            help="KEY=VALUE[,KEY=VALUE], each KEY one of playbook, category, namespace, "
            "workload, incident (e.g. workload=ml-train/rayjob/verl-ppo-qwen)",
        ),
    ],
    duration: Annotated[str, typer.Argument(metavar="DURATION", help="how long: 30m, 2h, 1d")],
    reason: Annotated[str, typer.Argument(metavar="REASON", help="why, for whoever wonders")] = "",
    user: UserOption = None,
    file: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """Mute matching incidents' notifications for a while."""
    matchers: dict[str, str] = {}
    for item in matcher.split(","):
        key, sep, value = item.partition("=")
        if not sep or not value:
            raise fail(f"{item!r}: expected KEY=VALUE, e.g. playbook=pod-oom-killed")
        matchers[key.strip()] = value.strip()
    try:
        length = parse_duration(duration)
    except ValueError as error:
        raise fail(str(error)) from None
    with opened_service(file, store) as service:
        try:
            who = console_user(_user(user))
            made = service.silence(matchers, length, who.id, utcnow(), reason, who)
        except ValueError as error:
            raise fail(str(error)) from None
    say(f"silence {made.id} until {_time(made.ends_at)}")


@cli.command("unsilence")
def unsilence_command(
    silence_id: Annotated[str, typer.Argument(metavar="SILENCE_ID", help="the silence id")],
    user: UserOption = None,
    file: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """End a silence now (its creator, or a silencer or approver in its scope)."""
    with opened_service(file, store) as service:
        try:
            ended = service.unsilence(silence_id, utcnow(), console_user(_user(user)))
        except ValueError as error:
            raise fail(str(error)) from None
    if ended is None:
        raise fail(f"no silence {silence_id}")
    say(f"silence {silence_id} ended")


@cli.command("history")
def history_command(
    n: Annotated[int, typer.Argument(metavar="N", min=1, help="how many")] = 10,
    file: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """The most recent incidents, actions and asks for evidence (allowed or refused)."""
    with opened_service(file, store) as service:
        history = service.history(n)
    say("incidents:")
    for incident in history.incidents:
        say(_incident_line(incident, ()))
    say("actions:")
    for entry in history.actions:
        say(
            f"  {_time(entry.started_at)}  {entry.cluster or '-'}  {entry.proposal_id}  "
            f"{entry.action}  {entry.result}  by {entry.approver or '-'}  {entry.detail}"
        )
    say("evidence asked for:")
    for fetch in history.fetches:
        say(
            f"  {_time(fetch.at)}  {fetch.incident_id}  by {fetch.user}  {fetch.via}  "
            f"{fetch.outcome}  {fetch.detail}".rstrip()
        )


@cli.command("status")
def status_command(file: ConfigOption = None, store: StoreOption = None) -> None:
    """Which store, and counts of open incidents, proposals, queued notifications and
    silences."""
    settings = load_settings(file, store, client=True)
    with opened_store(settings) as opened:
        service = Service(opened, settings.approvals, build_registry(settings))
        found = service.status(utcnow())
        say(f"store: {opened.describe()}: answers")
    proposals = ", ".join(f"{k} {v}" for k, v in found.proposals.items())
    if found.cluster:
        say(f"cluster: {found.cluster}")
    if found.other_clusters:
        say(f"slack app shared: {found.other_clusters}")
    say(f"open incidents: {found.open_incidents}")
    say(f"proposals: {proposals}")
    say(f"notifications waiting: {found.pending_notifications}")
    unchecked = found.unchecked
    say(f"cards posted while Slack's history did not answer: {len(unchecked.cards)}")
    for card in unchecked.cards:
        which = card.ts or "(a post that went unanswered)"
        say(f"  {card.incident_id}  {card.channel_id} {which}  checked once it answers")
    for problem in unchecked.unreadable:
        say(f"  {problem}")
    say(f"active silences: {found.active_silences}")
    say(f"executors: {', '.join(found.executors) or 'none configured'}")
    say(f"evidence set aside: {len(found.set_aside)}")
    for row in found.set_aside:
        when = _time(row.at) if row.at else "?"
        say(f"  #{row.id}  {row.state}  {row.stage}  {when}  {row.size} bytes  {row.problem}")
    say(f"notifications waiting for a person: {len(found.held)}")
    for message in found.held:
        sent = message.notification
        say(f"  {sent.kind} for {sent.incident_id} to {sent.channel}  {message.held}")
    shown = (
        f" (the newest {len(found.dead_letters)})"
        if found.given_up > len(found.dead_letters)
        else ""
    )
    say(f"notifications given up: {found.given_up}{shown}")
    for letter in found.dead_letters:
        sent = letter.notification
        say(
            f"  {sent.kind} for {sent.incident_id}  after {letter.attempts} attempts  "
            f"{letter.last_error}"
        )


@cli.command("requeue")
def requeue_command(
    row: Annotated[
        int | None, typer.Argument(metavar="ROW", help="one row (#N in pitcrew status); else all")
    ] = None,
    file: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """Release evidence a bug or a budget set aside; the running daemon takes it in within
    seconds (scheduler.released), else its next start."""
    with opened_service(file, store) as service:
        released = service.requeue(row)
    if row is not None and not released:
        raise fail(f"no evidence #{row} is set aside")
    say(
        f"released {released} pieces of evidence; the daemon takes them in within seconds "
        "(or at its next start, if it is not running)"
    )


def _time(value: datetime) -> str:
    return value.strftime(TIME)


def _incident_line(incident: Incident, proposals: tuple[Proposal, ...]) -> str:
    primary = incident.diagnosis.primary
    cause = str(primary.category) if primary else "no failure"
    where = str(incident.workload) if incident.workload else key_text(incident.key)
    return (
        f"{incident.id}  {incident.state}  {where}  {cause}  since {_time(incident.opened_at)}"
        f"  [{card_status(incident, proposals)}]"
    )


def _proposal_line(proposal: Proposal) -> str:
    return (
        f"  {proposal.id}  {proposal.action}  {proposal.state}  {proposal.preview}"
        f"  (expires {_time(proposal.expires_at)})"
    )


@cli.command("unmatched")
def unmatched_command(
    limit: Annotated[int, typer.Option("--limit", "-n", metavar="N", min=1, max=1000)] = 20,
    file: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """Failures the daemon saw that no playbook matched, grouped by shape with counts and
    first and last seen: the playbook to write next."""
    with opened_service(file, store) as service:
        shapes = service.unmatched(limit)
    if not shapes:
        say("No unmatched failures: every failure seen matched a playbook.")
        return
    say(f"{'count':>6}  {'first seen':<19}  {'last seen':<19}  shape / example")
    for item in shapes:
        say(
            f"{item.count:>6}  {_time(item.first_seen):<19}  {_time(item.last_seen):<19}  "
            f"{item.shape}"
        )
        say(f"{'':>6}  {'':<19}  {'':<19}  e.g. {item.origin}: {item.example}")


@cli.command("bundle")
def bundle_command(
    incident: Annotated[
        str, typer.Argument(metavar="INCIDENT", help="the incident id (pitcrew incidents)")
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help="the file to write (a folder: INCIDENT.tar.gz in it); default INCIDENT.tar.gz",
        ),
    ] = None,
    user: UserOption = None,
    file: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """Write the evidence bundles captured for an incident (driver log, dead actors, pods'
    last logs and states, the RayJob's and RayCluster's status, events) as one tar.gz,
    one folder per KubeRay attempt, and print its size. It is audited (pitcrew history)
    as console:USER; approvals.evidence answers the chat's /pitcrew bundle, not this:
    who can read the store here can read the evidence."""
    from bot.app.bundles import merged_bundles, write_new

    settings = load_settings(file, store, client=True)
    with opened_store(settings) as opened:
        kept = opened.bundles(incident)
        if not kept:
            raise fail(f"{incident}: no evidence bundle kept for this incident")
        body = merged_bundles([(b.name.removesuffix(".tar.gz"), b.body) for b in kept])
        try:
            target = write_new(out or Path("."), incident, body)
        except PitcrewError as error:
            raise fail(str(error)) from None
        who = console_user(_user(user)).id
        fetched = EvidenceFetch(incident, who, "console", "written", str(target), utcnow())
        Service(opened, settings.approvals, build_registry(settings)).audit_fetch(fetched)
    say(f"{target}: {len(body)} bytes ({len(kept)} bundle(s) of {incident})")
