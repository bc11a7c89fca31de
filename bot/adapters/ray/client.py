"""The one place pitcrew talks HTTP to a Ray dashboard: Jobs API and State API.

Why this exists: the Ray source (polling for failed jobs), `pitcrew diagnose
--ray-job` and the Ray actions all need the same few calls against the same
dashboard, with the same timeouts, optional auth headers, bounded reads and
errors that name the URL. Plain `requests` instead of `ray`: the daemon then
needs no Ray of the cluster's version, starts no Ray client, and a hung
dashboard costs one timeout, not a stuck gRPC channel. Submitting a
remediation job is one POST too (no local working_dir to upload), so Ray's
JobSubmissionClient would add nothing.

Endpoints (checked against Ray 2.60's dashboard):
- `GET /api/version` (reachability), `GET /api/jobs/`, `GET /api/jobs/{id}`,
  `POST /api/jobs/`, `POST /api/jobs/{id}/stop`, `GET /api/jobs/{id}/logs`;
- State API `GET /api/v0/actors|tasks` with `filter_keys/filter_predicates/
  filter_values` (server-side filters on state, name, ray_namespace, job_id;
  `is_detached` is not filterable there, so it is filtered here), `detail=true`
  for death causes; `GET /api/v0/logs/file` to tail the driver log on its node.

The driver log is read as a tail of at most `LOG_LIMIT` bytes, streamed, so a
huge log never sits in memory: first through the State API log endpoint
(server-side tail by lines), else from the Jobs API logs (whose JSON is streamed
and only its last bytes kept and decoded).

Errors are translated here: a call fails with a `RayApiError` (`RayNotFoundError`,
`RayForbiddenError`, `DashboardUnreachableError`), never with a `requests` error, so
callers say what they expect instead of comparing HTTP statuses.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

import requests

from bot.core.errors import PitcrewError
from bot.core.inputs.ray_actors import ActorInfo

log = logging.getLogger(__name__)

LOG_LIMIT = 2 * 1024 * 1024
"""At most this many bytes of a driver log are read (its tail)."""
LOG_LINES = 100_000
"""Lines asked of the State API log tail (the byte limit still applies)."""
MAX_JSON_BYTES = 256 * 1024 * 1024
"""A JSON answer larger than this is refused rather than parsed."""
DEFAULT_TIMEOUT = 10.0
STATE_LIMIT = 10_000
"""The State API's own maximum (RAY_MAX_LIMIT_FROM_API_SERVER)."""
_CHUNK = 64 * 1024

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
ACTIVE = frozenset({"PENDING", "RUNNING"})
DEAD = "DEAD"
SUPERVISOR_NAMESPACE = "SUPERVISOR_ACTOR_RAY_NAMESPACE"
"""The namespace of Ray's per-job JobSupervisor actors."""
SUPERVISOR_NAME = "_ray_internal_job_actor_{submission_id}"


HEADERS_ENV = "PITCREW_RAY_HEADERS"
"""A JSON object of extra HTTP headers for the dashboard (auth proxies)."""
TOKEN_ENV = "RAY_AUTH_TOKEN"
"""Ray's token authentication: sent as `Authorization: Bearer <token>`."""


def headers_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Dashboard headers from the environment: `PITCREW_RAY_HEADERS` (JSON) and
    `RAY_AUTH_TOKEN` (Ray token auth, as `Authorization: Bearer`)."""
    env = os.environ if environ is None else environ
    headers: dict[str, str] = {}
    raw = env.get(HEADERS_ENV, "").strip()
    if raw:
        try:
            data = json.loads(raw)
        except ValueError:
            raise PitcrewError(f"{HEADERS_ENV} is not a JSON object") from None
        if not isinstance(data, dict):
            raise PitcrewError(f"{HEADERS_ENV} is not a JSON object")
        headers.update({str(k): str(v) for k, v in data.items()})
    token = env.get(TOKEN_ENV, "").strip()
    if token and not any(k.lower() == "authorization" for k in headers):
        headers["Authorization"] = f"Bearer {token}"
    return headers


class RayApiError(PitcrewError):
    """A Ray dashboard call failed; the message names the URL and the reason."""

    def __init__(self, url: str, problem: str) -> None:
        self.url = url
        self.problem = problem
        super().__init__(f"{url}: {problem}")

    def __reduce__(self) -> tuple[type[RayApiError], tuple[str, str]]:
        return (type(self), (self.url, self.problem))


class DashboardUnreachableError(RayApiError):
    """No answer at all: connection refused, DNS, TLS or timeout."""


class RayNotFoundError(RayApiError):
    """The dashboard answered 404 (no such job)."""


class RayForbiddenError(RayApiError):
    """The dashboard (or an auth proxy before it) answered 401 or 403: check the headers."""


_BY_STATUS: Mapping[int, type[RayApiError]] = {
    401: RayForbiddenError,
    403: RayForbiddenError,
    404: RayNotFoundError,
}


@dataclass(frozen=True)
class RayClusterConfig:
    """How to reach one Ray cluster's dashboard, and what it belongs to on Kubernetes.

    `k8s_namespace`, `ray_cluster` and `rayjob` are copied into every signal's fields
    (`namespace`, `ray_cluster`, `rayjob`) so incidents key on the Kubernetes workload;
    a RayCluster discovered from Kubernetes knows them, a configured URL may not."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    timeout: float = DEFAULT_TIMEOUT
    k8s_namespace: str = ""
    ray_cluster: str = ""
    rayjob: str = ""
    k8s_cluster: str = ""  # the Kubernetes cluster it runs in: the incidents' cluster name

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a Ray cluster needs a name")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(
                f"Ray cluster {self.name}: dashboard URL must be http(s), not {self.url!r}"
            )
        object.__setattr__(self, "url", self.url.rstrip("/"))
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))


def _str(value: Any) -> str:
    return "" if value is None or isinstance(value, Mapping | list) else str(value)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def job_key(job: Mapping[str, Any]) -> str:
    """A job's identity in the Jobs API: its submission id, else `driver:<job id>`."""
    submission = _str(job.get("submission_id"))
    return submission or f"driver:{_str(job.get('job_id'))}"


class RayDashboard:
    """A client of one Ray dashboard. Not shared between threads: give each its own."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        session: requests.Session | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._session = session or requests.Session()
        self._session.headers.update(dict(headers or {}))

    @classmethod
    def of(cls, config: RayClusterConfig) -> RayDashboard:
        return cls(config.url, config.headers, config.timeout)

    def close(self) -> None:
        self._session.close()

    # -- Jobs API ---------------------------------------------------------------------

    def version(self) -> dict[str, Any]:
        """`/api/version`: the dashboard answers at all (and with which Ray)."""
        return _as_dict(self._json("GET", "/api/version"), self.url)

    def list_jobs(self) -> list[dict[str, Any]]:
        """Every job the cluster knows (submissions and plain drivers), as JobDetails."""
        data = self._json("GET", "/api/jobs/")
        if not isinstance(data, list):
            raise RayApiError(f"{self.url}/api/jobs/", "expected a list of jobs")
        return [job for job in data if isinstance(job, dict)]

    def get_job(self, job_or_submission_id: str) -> dict[str, Any] | None:
        """One job's JobDetails, None when the cluster has no such job."""
        try:
            data = self._json("GET", f"/api/jobs/{_seg(job_or_submission_id)}")
        except RayNotFoundError:
            return None
        return _as_dict(data, self.url)

    def submit_job(
        self,
        entrypoint: str,
        *,
        submission_id: str | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        metadata: Mapping[str, str] | None = None,
        entrypoint_num_cpus: float | None = None,
        entrypoint_num_gpus: float | None = None,
        entrypoint_memory: int | None = None,
        entrypoint_resources: Mapping[str, float] | None = None,
    ) -> str:
        """Submit a job; returns its submission id. Raises RayApiError when the id is taken."""
        body: dict[str, Any] = {"entrypoint": entrypoint}
        optional: dict[str, Any] = {
            "submission_id": submission_id,
            "runtime_env": dict(runtime_env) if runtime_env else None,
            "metadata": dict(metadata) if metadata else None,
            "entrypoint_num_cpus": entrypoint_num_cpus,
            "entrypoint_num_gpus": entrypoint_num_gpus,
            "entrypoint_memory": entrypoint_memory,
            "entrypoint_resources": dict(entrypoint_resources) if entrypoint_resources else None,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        data = _as_dict(self._json("POST", "/api/jobs/", body=body), self.url)
        return _str(data.get("submission_id")) or _str(data.get("job_id"))

    def stop_job(self, submission_id: str) -> bool:
        """Ask Ray to stop a job; True when it was running (Ray's `stopped`)."""
        data = _as_dict(self._json("POST", f"/api/jobs/{_seg(submission_id)}/stop"), self.url)
        return data.get("stopped") is True

    # -- State API --------------------------------------------------------------------

    def actors(
        self,
        *,
        state: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        job_id: str | None = None,
        actor_id: str | None = None,
        detached: bool | None = None,
        limit: int = STATE_LIMIT,
    ) -> list[ActorInfo]:
        """Actors matching every filter given (`detached` is applied here, see above)."""
        filters = [
            ("state", state),
            ("name", name),
            ("ray_namespace", namespace),
            ("job_id", job_id),
            ("actor_id", actor_id),
        ]
        rows = self._state_list("actors", filters, limit)
        actors = [ActorInfo.parse(row) for row in rows]
        if detached is not None:
            actors = [a for a in actors if a.is_detached is detached]
        return actors

    def actor_tasks(self, actor_id: str, limit: int = 1000) -> list[dict[str, Any]]:
        """The tasks run on one actor (State API task events, `detail=true`)."""
        return self._state_list("tasks", [("actor_id", actor_id)], limit)

    def _state_list(
        self, resource: str, filters: Sequence[tuple[str, str | None]], limit: int
    ) -> list[dict[str, Any]]:
        params: list[tuple[str, str]] = [
            ("limit", str(limit)),
            ("detail", "true"),
            ("timeout", str(max(1, int(self.timeout)))),
        ]
        for key, value in filters:
            if value is not None:
                params += [
                    ("filter_keys", key),
                    ("filter_predicates", "="),
                    ("filter_values", value),
                ]
        path = f"/api/v0/{resource}"
        envelope = _as_dict(self._json("GET", path, params=params), self.url + path)
        if envelope.get("result") is False:
            raise RayApiError(self.url + path, _str(envelope.get("msg")) or "State API error")
        result = _as_dict(_as_dict(envelope.get("data"), self.url).get("result"), self.url)
        warning = result.get("partial_failure_warning")
        if warning:
            log.warning("%s%s: %s", self.url, path, warning)
        rows = result.get("result")
        return [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []

    # -- logs -------------------------------------------------------------------------

    def driver_log_tail(self, job: Mapping[str, Any], limit: int = LOG_LIMIT) -> bytes:
        """The last `limit` bytes (at most) of a job's driver log, cut at a line start.

        State API file tail on the driver's node first; the Jobs API logs when that is
        not possible (no driver node yet, an old dashboard, the file gone)."""
        submission = _str(job.get("submission_id"))
        if not submission:
            return b""
        node = _str(job.get("driver_node_id"))
        if node:
            params = {
                "node_id": node,
                "filename": f"job-driver-{submission}.log",
                "lines": str(LOG_LINES),
                "timeout": str(max(1, int(self.timeout))),
            }
            try:
                return _line_start(self._stream_tail("/api/v0/logs/file", params, limit), limit)
            except DashboardUnreachableError:
                raise
            except RayApiError as error:
                log.info("driver log of %s via the State API: %s", submission, error)
        return self.job_logs_tail(submission, limit)

    def job_logs_tail(self, submission_id: str, limit: int = LOG_LIMIT) -> bytes:
        """The tail of `/api/jobs/{id}/logs` (`{"logs": "..."}`), streamed: only the last
        `limit` bytes of the JSON are kept, then decoded from the first whole line."""
        raw = self._stream_tail(f"/api/jobs/{_seg(submission_id)}/logs", None, limit + 16)
        return _logs_from_json_tail(raw, limit, f"{self.url}/api/jobs/{submission_id}/logs")

    def job_logs_ends(self, submission_id: str, limit: int = LOG_LIMIT) -> bytes:
        """`/api/jobs/{id}/logs` whole when it is at most 2 × `limit` bytes, else its first
        and its last `limit` bytes (from whole lines), with a line between them saying how
        much was left out: the first lines say what ran, the last how it ended."""
        path = f"/api/jobs/{_seg(submission_id)}/logs"
        url = self.url + path
        response = self._request("GET", path)
        with response:
            try:
                found = log_ends(response.iter_content(_CHUNK), limit)
            except requests.RequestException as error:
                raise DashboardUnreachableError(
                    url, f"the answer broke off: {_reason(error)}"
                ) from None
        return found.decoded(limit, url)

    # -- plumbing ---------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Any = None,
        body: Any = None,
    ) -> requests.Response:
        url = self.url + path
        try:
            response = self._session.request(
                method, url, params=params, json=body, timeout=self.timeout, stream=True
            )
        except requests.Timeout as error:
            raise DashboardUnreachableError(
                url, f"no answer within {self.timeout:g}s ({error})"
            ) from None
        except requests.ConnectionError as error:
            raise DashboardUnreachableError(
                url, f"cannot connect to the Ray dashboard: {_reason(error)}"
            ) from None
        except requests.RequestException as error:
            raise RayApiError(url, f"request failed: {error}") from None
        if response.status_code >= 400:
            try:
                body = tail_bytes(response.iter_content(_CHUNK), 16384)
            except requests.RequestException:
                body = b""
            response.close()
            text = _first_line(body.decode("utf-8", "replace"))
            kind = _BY_STATUS.get(response.status_code, RayApiError)
            raise kind(url, f"HTTP {response.status_code}: {text}")
        return response

    def _json(self, method: str, path: str, *, params: Any = None, body: Any = None) -> Any:
        url = self.url + path
        response = self._request(method, path, params=params, body=body)
        with response:
            data = _read_capped(response, MAX_JSON_BYTES, url)
        try:
            return json.loads(data)
        except ValueError:
            raise RayApiError(
                url, f"not JSON: {_first_line(data[:200].decode('utf-8', 'replace'))}"
            ) from None

    def _stream_tail(self, path: str, params: Any, limit: int) -> bytes:
        url = self.url + path
        response = self._request("GET", path, params=params)
        with response:
            try:
                return tail_bytes(response.iter_content(_CHUNK), limit)
            except requests.RequestException as error:
                raise DashboardUnreachableError(
                    url, f"the answer broke off: {_reason(error)}"
                ) from None


def tail_bytes(chunks: Iterable[bytes], limit: int) -> bytes:
    """The last `limit` bytes of a stream, holding at most about `limit` + one chunk."""
    kept: deque[bytes] = deque()
    size = 0
    for chunk in chunks:
        if not chunk:
            continue
        kept.append(chunk)
        size += len(chunk)
        while kept and size - len(kept[0]) >= limit:
            size -= len(kept.popleft())
    data = b"".join(kept)
    return data[-limit:] if len(data) > limit else data


@dataclass(frozen=True, slots=True)
class LogEnds:
    """The first and the last bytes of a Jobs API logs answer (`{"logs": "..."}`)."""

    head: bytes
    tail: bytes
    total: int  # bytes of the whole answer
    newlines: int  # JSON `\\n` escapes in the part left out (the lines left out, but one)

    def decoded(self, limit: int, url: str) -> bytes:
        left_out = self.total - len(self.head) - len(self.tail)
        if left_out <= 0:
            return _logs_from_json_tail(self.head + self.tail, 2 * limit, url)
        opening = _LOGS_OPENING.match(self.head)
        if opening is None:
            raise RayApiError(url, "the logs answer is not the expected JSON")
        body = self.head[opening.end() :]
        try:
            head = str(json.loads(b'"' + body[: _past_last_escaped_newline(body)] + b'"'))
        except ValueError:
            raise RayApiError(url, "the logs answer could not be decoded") from None
        first = head.encode("utf-8")
        last = _logs_from_json_tail(self.tail, limit, url)
        between = (
            f"[pitcrew: about {left_out:,} bytes ({self.newlines + 1:,} lines) of the driver log "
            f"left out here; kept: its first {len(first):,} bytes and its last {len(last):,}]"
        )
        return first + between.encode() + b"\n" + last


_LOGS_OPENING = re.compile(rb'\{\s*"logs"\s*:\s*"')


def log_ends(chunks: Iterable[bytes], limit: int) -> LogEnds:
    """The first `limit` bytes of a stream and the last `limit` of the rest, holding at
    most about 2 × `limit` + one chunk, counting the JSON newline escapes left out."""
    head = bytearray()
    kept: deque[bytes] = deque()
    size = total = newlines = 0
    carried = b""  # the last byte left out, for an escape split between two chunks
    for chunk in chunks:
        total += len(chunk)
        if len(head) < limit:
            take = limit - len(head)
            head += chunk[:take]
            chunk = chunk[take:]
        if not chunk:
            continue
        kept.append(chunk)
        size += len(chunk)
        while kept and size - len(kept[0]) >= limit:
            gone = kept.popleft()
            size -= len(gone)
            newlines += (carried + gone).count(b"\\n")
            carried = gone[-1:]
    data = b"".join(kept)
    if len(data) > limit:
        newlines += (carried + data[:-limit]).count(b"\\n")
        data = data[-limit:]
    return LogEnds(bytes(head), data, total, newlines)


def _past_last_escaped_newline(body: bytes) -> int:
    """Index just past the last JSON `\\n` escape in `body` (a string cut short), so what
    is before it decodes; 0 when there is none."""
    index = body.rfind(b"\\n")
    while index >= 0:
        backslashes = 0
        j = index
        while j >= 0 and body[j : j + 1] == b"\\":
            backslashes += 1
            j -= 1
        if backslashes % 2 == 1:
            return index + 2
        index = body.rfind(b"\\n", 0, index)
    return 0


def _line_start(data: bytes, limit: int) -> bytes:
    """Drop the partial first line of a tail that was cut at `limit` bytes (best effort:
    a cut that fell on a line boundary loses one whole line)."""
    if len(data) < limit:
        return data
    newline = data.find(b"\n")
    if newline < 0 or newline == len(data) - 1:
        return data
    return data[newline + 1 :]


def _logs_from_json_tail(raw: bytes, limit: int, url: str) -> bytes:
    """Decode the `logs` string of `{"logs": "..."}` from the whole body or its tail."""
    if raw.startswith(b"{"):
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if isinstance(data, dict):
            return _str(data.get("logs")).encode("utf-8")[-limit:]
    end = raw.rfind(b'"')
    if end < 0:
        raise RayApiError(url, "the logs answer is not the expected JSON")
    body = raw[:end]
    start = _escaped_newline_after_cut(body)
    try:
        text = json.loads(b'"' + body[start:] + b'"')
    except ValueError:
        raise RayApiError(url, "the logs answer could not be decoded") from None
    return str(text).encode("utf-8")[-limit:]


def _escaped_newline_after_cut(body: bytes) -> int:
    """Index just past the first JSON `\\n` escape in `body` (a cut mid-string), so the
    rest decodes; 0 when there is none."""
    index = body.find(b"\\n")
    while index >= 0:
        backslashes = 0
        j = index
        while j >= 0 and body[j : j + 1] == b"\\":
            backslashes += 1
            j -= 1
        if backslashes % 2 == 1:
            return index + 2
        index = body.find(b"\\n", index + 1)
    return len(body)


def _read_capped(response: requests.Response, cap: int, url: str) -> bytes:
    parts: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_content(_CHUNK):
            parts.append(chunk)
            size += len(chunk)
            if size > cap:
                raise RayApiError(url, f"answer larger than {cap} bytes")
    except requests.RequestException as error:
        raise DashboardUnreachableError(url, f"the answer broke off: {_reason(error)}") from None
    return b"".join(parts)


def _as_dict(value: Any, url: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RayApiError(url, "expected a JSON object")
    return value


def _seg(value: str) -> str:
    return quote(value, safe="")


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if len(line.strip()) > 2]
    # Ray answers 500s with a traceback (and a lone "."); its last line names the error.
    return (lines[-1] if lines else "")[:300]


def _reason(error: Exception) -> str:
    """The innermost useful words of a requests/urllib3 error (`Connection refused`)."""
    text = str(error)
    for marker in ("[Errno", "NewConnectionError", "Read timed out", "Connection refused"):
        at = text.find(marker)
        if at >= 0:
            return text[at:].rstrip(")'\"").split("'))")[0][:200]
    return text[:200]
