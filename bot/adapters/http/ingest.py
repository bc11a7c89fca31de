"""`POST /ingest`: hand a running daemon any text `pitcrew diagnose` accepts.

Why this exists: the Kubernetes and Ray sources arrive with their own issues;
until then, and in CI, evidence reaches a running daemon over its HTTP port
(`pitcrew ingest FILE` or curl). The body is parsed by `bot.core.inputs` exactly as
`pitcrew diagnose` parses it; the query names what the text itself may not:

    POST /ingest?origin=driver.log&cluster=prod&namespace=ml-train&workload=RayCluster/verl

`workload` is `Kind/name` (or `namespace/Kind/name`) of the owning workload:
findings that do not name their own are attached to it, so a driver log and a
`kubectl describe` of its worker pod land in one incident. Without it, a paste
whose lines name one Ray submission (`Job 'raysubmit_…' failed`) is about that
job. A Ray submission is its RayJob's once the RayJob's status has been seen
(`bot.core.incidents.rayjob_owners`), before or after the evidence.
"""

from __future__ import annotations

import json
from io import BytesIO
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

from bot.adapters.http.server import Route
from bot.core.errors import InputError
from bot.core.incidents.rayjob_owners import sole_submission
from bot.core.incidents.workloads import SUBMISSION_KIND, WORKLOAD_KINDS
from bot.core.inputs.reader import read_stream
from bot.core.model import ObjectRef
from bot.daemon.feed import Context, Observation, observe

PATH = "/ingest"
KINDS = (*WORKLOAD_KINDS, SUBMISSION_KIND)


def parse_workload(text: str, namespace: str = "") -> ObjectRef:
    """`Kind/name` or `namespace/Kind/name`; raises InputError for anything else."""
    parts = text.split("/")
    if len(parts) == 3:
        namespace, kind, name = parts
    elif len(parts) == 2:
        kind, name = parts
    else:
        raise InputError(f"workload {text!r}: expected Kind/name or namespace/Kind/name")
    if kind not in KINDS or not name:
        raise InputError(f"workload {text!r}: the kind must be one of {', '.join(KINDS)}")
    return ObjectRef(kind, name, "" if kind == SUBMISSION_KIND else namespace)


def observation(body: bytes, target: str, notes: list[str] | None = None) -> Observation:
    """The observation a request carries; raises InputError for unreadable input. What
    the sender should know (undecodable bytes read as U+FFFD) is added to `notes`."""
    query = {k: v[-1] for k, v in parse_qs(urlsplit(target).query).items()}
    origin = query.get("origin") or "ingest"
    namespace = query.get("namespace", "")
    workload = parse_workload(query["workload"], namespace) if query.get("workload") else None
    if not body.strip():
        raise InputError(f"{origin}: empty body")
    said = notes.append if notes is not None else None
    observed = observe(read_stream(BytesIO(body), origin, notice=said))
    if workload is None:
        workload = sole_submission(observed.parts)
    context = Context(cluster=query.get("cluster", ""), namespace=namespace, workload=workload)
    return Observation(observed.parts, context)


class Accepts(Protocol):
    """Where accepted evidence goes (`bot.daemon.intake.Intake`)."""

    def accept(self, observation: Observation) -> str | None:
        """None once the evidence is kept and queued, else why it was not."""
        ...


def route(intake: Accepts) -> Route:
    """The HTTP route: 202 once the evidence is kept in the store and queued, 400 for
    bad input, 503 when the queue is full or the store cannot be written (nothing was
    kept, so the sender keeps it and retries)."""

    def handle(
        target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        notes: list[str] = []
        try:
            item = observation(body, target, notes)
        except InputError as error:
            return _reply(400, {"error": str(error)})
        refusal = intake.accept(item)
        if refusal is not None:
            return _reply(503, {"error": refusal})
        return _reply(202, {"accepted": len(item.parts), **({"notes": notes} if notes else {})})

    return handle


def _reply(status: int, payload: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps(payload, sort_keys=True).encode() + b"\n"
    return status, {"Content-Type": "application/json"}, body
