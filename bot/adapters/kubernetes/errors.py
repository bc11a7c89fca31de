"""The Kubernetes adapter's own errors, and the one translation from the client's.

Why this exists: callers say what they expect (`except NotFoundError`, `except
ConflictError`) instead of comparing HTTP statuses or catching the official client's
`ApiException` and urllib3's transport errors; `translating()` turns those into these
around every call in `bot.adapters.kubernetes.api`. Import them from there.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping

import urllib3
from kubernetes.client.exceptions import ApiException

from bot.core.errors import PitcrewError


class KubeApiError(PitcrewError):
    """A Kubernetes API call failed; the message is the status and the server's reason."""


class KubeConfigError(PitcrewError):
    """No usable Kubernetes configuration: no kubeconfig, a bad one, or no service account."""


class NotFoundError(KubeApiError):
    """404: no such object, or the resource is not served (a CRD that is not installed)."""


class ConflictError(KubeApiError):
    """409: a concurrent change, a failed precondition (uid) or a name already taken."""


class GoneError(KubeApiError):
    """410 Gone: the resourceVersion or continue token is too old; list again."""


class ForbiddenError(KubeApiError):
    """401 or 403: the credentials are refused or RBAC does not allow the verb."""


class InvalidError(KubeApiError):
    """400 or 422: the server refused the request's content (a JSON patch `test` failed)."""


class UnavailableError(KubeApiError):
    """The server could not be reached or could not serve the request (a transport error,
    a timeout, 429 or a 5xx): try again later."""


_BY_STATUS: Mapping[int, type[KubeApiError]] = {
    400: InvalidError,
    401: ForbiddenError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    422: InvalidError,
    429: UnavailableError,
}


def error_for(status: int, message: str) -> KubeApiError:
    """The error of an HTTP status (and a watch ERROR event's `code`), with its message."""
    kind = _BY_STATUS.get(status) or (UnavailableError if status >= 500 else KubeApiError)
    return kind(f"{status} {message}".strip())


def _translated(error: ApiException) -> KubeApiError:
    try:
        body = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return error_for(int(error.status or 0), str(message or error.reason or ""))


@contextlib.contextmanager
def translating() -> Iterator[None]:
    """Turn the client's errors into this module's own."""
    try:
        yield
    except ApiException as error:
        raise _translated(error) from error
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise UnavailableError(unreachable(error)) from error


def unreachable(error: BaseException) -> str:
    """One line for a transport failure, naming the server and the innermost cause:
    "the Kubernetes API at 127.0.0.1:6443 did not answer (connection refused)"."""
    pool = getattr(error, "pool", None)
    host, port = getattr(pool, "host", ""), getattr(pool, "port", None)
    where = f" at {host}:{port}" if host and port else f" at {host}" if host else ""
    return f"the Kubernetes API{where} did not answer ({_innermost(error)})"


def _innermost(error: BaseException) -> str:
    """The deepest cause's words: an OS error's ("connection refused"), else its text."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        reason = getattr(current, "reason", None)
        following = reason if isinstance(reason, BaseException) else None
        current = following or current.__cause__ or current.__context__
    for cause in reversed(seen):
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror.lower()
    deepest = seen[-1]
    return str(deepest) or type(deepest).__name__


# What an action's precondition check can meet and still answer "withheld: <why>": the
# API's answers, a configuration that does not reach a cluster, and parameters or
# objects that do not parse (pydantic's errors are ValueErrors). Anything else is a
# fault of pitcrew's own and goes up to the live check, which logs it.
CHECK_ERRORS: tuple[type[Exception], ...] = (KubeApiError, KubeConfigError, ValueError)


def reason_of(error: BaseException) -> str:
    """A one-line reason: an API error's message, else the error's type and text."""
    if isinstance(error, KubeApiError):
        return str(error)
    return f"{type(error).__name__}: {error}"
