"""One list+watch loop of one Kubernetes resource, shared by the Kubernetes source's watches
and Ray discovery's RayCluster scopes.

Why this exists: both keep a watch of one resource in one namespace (or cluster-wide) going
through everything a long watch goes through: streams the server ends (resume from the last
resourceVersion), a 410 Gone (relist), a broken stream (relist), a resource that is not served,
errors (back off with jitter), a server that ends every watch at once (do not spin). That
loop is subtle enough to be written once; `WatchLoop` is it, and a subclass says only what a
listed object and a watch event mean to it, and what to do when the resource is not served.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Protocol

from bot.adapters.kubernetes.api import (
    KubeApi,
    Resource,
    StreamBrokenError,
    WatchEvent,
    WatchStream,
)
from bot.adapters.kubernetes.errors import GoneError, NotFoundError, error_for, reason_of
from bot.core.inputs.values import as_list, as_map, text_at

log = logging.getLogger(__name__)


class NotServedError(Exception):
    """The API server does not serve the resource (a CRD that is not installed)."""


class WatchBackoff:
    """A watch's wait before it reconnects: `initial · 2ⁿ`, capped, times a random 0.5-1;
    `reset` once a connection delivers (the outbox's retries have their own `Backoff`)."""

    def __init__(
        self, initial: float, maximum: float, rng: Callable[[], float] = random.random
    ) -> None:
        self.initial = initial
        self.maximum = maximum
        self.rng = rng
        self.attempt = 0

    def next(self) -> float:
        base = min(self.maximum, self.initial * (2**self.attempt))
        self.attempt += 1
        return float(base * (0.5 + 0.5 * self.rng()))

    def reset(self) -> None:
        self.attempt = 0


class WatchHost(Protocol):
    """What a watch needs of the source that runs it."""

    @property
    def api(self) -> KubeApi: ...

    @property
    def rng(self) -> Callable[[], float]: ...

    def stopping(self) -> bool: ...

    def sleep(self, seconds: float) -> None: ...


class WatchOptions(Protocol):
    """How patiently a resource is listed and watched (`KubeSourceConfig`, `DiscoveryOptions`)."""

    @property
    def page_size(self) -> int: ...

    @property
    def watch_timeout(self) -> int: ...

    @property
    def read_timeout(self) -> float: ...

    @property
    def backoff_initial(self) -> float: ...

    @property
    def backoff_max(self) -> float: ...

    @property
    def unhealthy_after(self) -> float: ...


class WatchLoop:
    """One resource in one namespace (or cluster-wide): list, watch, resume, relist.

    A subclass fills in `_list_started` / `_listed` / `_list_done` (one relist, page by
    page), `_apply` (an ADDED, MODIFIED, DELETED or unknown watch event) and
    `_not_served` (whether to keep going)."""

    COUNTS: ClassVar[tuple[str, ...]] = ("lists", "gone", "cuts", "errors", "events")
    WHAT: ClassVar[str] = "watch"  # how `_fail` names the loop in the log
    LOG: ClassVar[logging.Logger] = log

    def __init__(
        self,
        host: WatchHost,
        options: WatchOptions,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host = host
        self.options = options
        self.resource = resource
        self.namespace = namespace
        self.id = f"{name}@{namespace}" if namespace else name
        self.clock = clock
        self.backoff = WatchBackoff(options.backoff_initial, options.backoff_max, host.rng)
        self.rv: str | None = None
        self.state = "starting"
        self.synced = False
        self.stream: WatchStream | None = None
        self.last_ok = clock()
        self.last_error = ""
        self.counts = dict.fromkeys(self.COUNTS, 0)

    # -- what a subclass says ---------------------------------------------------------

    def _list_started(self) -> None:
        """A relist (or a restart of one whose continue token expired) begins."""

    def _listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        """The objects of one page of the list."""

    def _list_done(self) -> None:
        """The list is complete: reconcile."""

    def _apply(self, event: WatchEvent) -> None:
        """A watch event other than ERROR and BOOKMARK."""

    def _not_served(self, error: NotServedError) -> bool:
        """The resource is not served; True to keep the loop going."""
        return True

    # -- health -----------------------------------------------------------------------

    def healthy(self, now: float) -> bool:
        return self.state == "watching" or now - self.last_ok <= self.options.unhealthy_after

    def status(self, now: float) -> dict[str, Any]:
        return {
            "state": self._state_text(),
            "resource_version": self.rv or "",
            **self._status_details(),
            "seconds_since_ok": round(now - self.last_ok, 1),
            "last_error": self.last_error,
            **self.counts,
        }

    def _state_text(self) -> str:
        return self.state

    def _status_details(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        stream = self.stream
        if stream is not None:
            stream.close()

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> None:
        gone_in_a_row = 0
        while not self.host.stopping():
            try:
                if self.rv is None:
                    self._relist()
                self._watch()
                gone_in_a_row = 0
            except GoneError:
                self.counts["gone"] += 1
                self.rv = None
                gone_in_a_row += 1
                if gone_in_a_row > 1:  # a server that keeps saying 410: do not spin
                    self._fail("410 Gone again right after a relist")
            except NotServedError as error:
                if not self._not_served(error):
                    return
            except StreamBrokenError as error:
                if self.host.stopping():
                    break
                self.counts["cuts"] += 1
                self.rv = None  # a broken stream may have lost events: relist and reconcile
                self._fail(str(error))
            except Exception as error:
                if self.host.stopping():
                    break
                self._fail(reason_of(error))
        self.state = "stopped"

    def _fail(self, reason: str) -> None:
        self.counts["errors"] += 1
        self.last_error = reason
        self.state = "backoff"
        delay = self.backoff.next()
        self.LOG.warning("%s %s: %s; retrying in %.1fs", self.WHAT, self.id, reason, delay)
        self.host.sleep(delay)

    def _relist(self) -> None:
        """List everything (paged), handing each page to `_listed`, then `_list_done`."""
        self.state = "listing"
        token: str | None = None
        resource_version = ""
        self._list_started()
        while True:
            try:
                page = self.host.api.list(
                    self.resource,
                    self.namespace,
                    limit=self.options.page_size,
                    continue_token=token,
                )
            except NotFoundError as error:
                raise NotServedError(f"{self.resource} is not served") from error
            except GoneError:
                if not token:
                    raise
                token = None  # the continue token expired
                self._list_started()
                continue
            metadata = as_map(page.get("metadata"))
            resource_version = resource_version or text_at(metadata, "resourceVersion")
            self._listed(i for i in as_list(page.get("items")) if isinstance(i, Mapping))
            token = text_at(metadata, "continue") or None
            if not token:
                break
        self._list_done()
        self.rv = resource_version
        self.counts["lists"] += 1
        self.last_ok = self.clock()

    def _watch(self) -> None:
        """One watch request from `rv`; returns when the server ends it cleanly (resume),
        raises GoneError (relist), StreamBrokenError (relist) or NotServedError (give up)."""
        try:
            stream = self.host.api.watch(
                self.resource,
                self.namespace,
                self.rv,
                timeout_seconds=self.options.watch_timeout,
                read_timeout=self.options.read_timeout,
            )
        except NotFoundError as error:
            raise NotServedError(f"{self.resource} is not served") from error
        self.stream = stream
        if self.host.stopping():
            stream.close()
        self.state = "watching"
        self.synced = True
        self.last_ok = self.clock()
        opened = time.monotonic()
        delivered = 0
        try:
            for event in stream:
                self._handle(event)
                delivered += 1
                self.last_ok = self.clock()
                if delivered == 1:
                    self.backoff.reset()
        except (GoneError, StreamBrokenError):
            raise
        except Exception as error:
            if stream.stopped:
                return
            raise StreamBrokenError(f"the stream broke: {reason_of(error)}") from error
        finally:
            self.stream = None
            if not self.host.stopping():
                self.state = "reconnecting"
        if delivered == 0 and time.monotonic() - opened < 1.0:
            self.host.sleep(self.backoff.next())  # a server that ends every watch at once

    def _handle(self, event: WatchEvent) -> None:
        self.counts["events"] += 1
        obj = event.object
        if event.type == "ERROR":
            code = obj.get("code")
            error = error_for(_int(code), text_at(obj, "message"))
            if isinstance(error, GoneError):
                raise error
            raise StreamBrokenError(f"watch error {code}: {text_at(obj, 'message')[:200]}")
        version = text_at(obj, "metadata", "resourceVersion")
        if event.type != "BOOKMARK":
            self._apply(event)
        self.rv = version or self.rv


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
