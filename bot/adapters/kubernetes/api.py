"""The one place pitcrew talks HTTP to Kubernetes: raw JSON over the official client.

Why this exists: the watch source, `pitcrew diagnose --kube` and the Kubernetes
actions all need the same few verbs (list, watch, get, JSON-patch, delete,
create, pod logs, discovery) on the same resources, and all need objects as
plain dicts. The official client's typed models reject malformed objects (a
`containerStatuses` that is a string fails the whole list), so every call here
asks for the undecoded response (`_preload_content=False`) and parses JSON
itself; the bot's parsers (`bot.core.inputs`) are built to read any shape.

Errors are translated here: a call fails with one of the adapter's `KubeApiError`s
(`NotFoundError`, `ConflictError`, `GoneError`, `ForbiddenError`, `InvalidError`,
`UnavailableError`, defined in `errors.py` and importable from here), never with the
client's `ApiException` or a urllib3 error, so callers say what they expect (`except
NotFoundError`) instead of comparing HTTP statuses.

Resources map onto the typed API classes (`CoreV1Api.list_namespaced_pod`,
`AppsV1Api.patch_namespaced_deployment` …) by a naming rule, and onto
`CustomObjectsApi` for KubeRay's `ray.io/v1` resources. Every request says it is
pitcrew's (`User-Agent: pitcrew/<version>`) and every patch and create carries
`fieldManager=pitcrew`, so `managedFields` and audit logs credit the change to it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import urllib3
from kubernetes import client, config

from bot import __version__
from bot.adapters.kubernetes.errors import (
    KubeConfigError,
    NotFoundError,
    error_for,
    translating,
)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
DEFAULT_TIMEOUT = 30.0
MAX_LINE_BYTES = 16 << 20  # a watch event bigger than this is not a Kubernetes object
FIELD_MANAGER = "pitcrew"  # who `managedFields` and audit logs credit with each write
USER_AGENT = f"pitcrew/{__version__}"


@dataclass(frozen=True, slots=True)
class Resource:
    """A Kubernetes resource type, with the snake-case name the typed client uses."""

    kind: str
    plural: str
    group: str = ""
    version: str = "v1"
    namespaced: bool = True
    snake: str = ""  # "" for custom resources (served through CustomObjectsApi)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = Resource("Pod", "pods", snake="pod")
EVENTS = Resource("Event", "events", snake="event")
NODES = Resource("Node", "nodes", namespaced=False, snake="node")
RESOURCE_QUOTAS = Resource("ResourceQuota", "resourcequotas", snake="resource_quota")
REPLICA_SETS = Resource("ReplicaSet", "replicasets", "apps", snake="replica_set")
DEPLOYMENTS = Resource("Deployment", "deployments", "apps", snake="deployment")
STATEFUL_SETS = Resource("StatefulSet", "statefulsets", "apps", snake="stateful_set")
JOBS = Resource("Job", "jobs", "batch", snake="job")
CRON_JOBS = Resource("CronJob", "cronjobs", "batch", snake="cron_job")
LEASES = Resource("Lease", "leases", "coordination.k8s.io", snake="lease")
RAY_JOBS = Resource("RayJob", "rayjobs", "ray.io")
RAY_CLUSTERS = Resource("RayCluster", "rayclusters", "ray.io")

BY_KIND: Mapping[str, Resource] = {
    r.kind: r
    for r in (
        PODS,
        EVENTS,
        NODES,
        RESOURCE_QUOTAS,
        REPLICA_SETS,
        DEPLOYMENTS,
        STATEFUL_SETS,
        JOBS,
        CRON_JOBS,
        RAY_JOBS,
        RAY_CLUSTERS,
    )
}


@dataclass(frozen=True, slots=True)
class RbacRule:
    """One rule of a Role: verbs on resources of an API group, and why pitcrew needs it.
    Sources and executors declare theirs; docs/rbac.md lists them for the Helm chart."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str

    @property
    def writes(self) -> bool:
        return any(v in ("create", "update", "patch", "delete") for v in self.verbs)


class StreamBrokenError(Exception):
    """A watch stream ended mid-event (a cut connection) or sent something undecodable."""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: Mapping[str, Any]


class WatchStream:
    """One open watch request: iterate its events; `close()` from another thread ends it."""

    def __init__(self, response: Any, max_line: int = MAX_LINE_BYTES) -> None:
        self._response = response
        self._max_line = max_line
        self.stopped = False  # closed on purpose (source stopping), not cut

    def __iter__(self) -> Iterator[WatchEvent]:
        buffer = bytearray()
        try:
            for chunk in self._chunks():
                buffer.extend(chunk if isinstance(chunk, bytes) else str(chunk).encode())
                while (end := buffer.find(b"\n")) != -1:
                    line = bytes(buffer[:end])
                    del buffer[: end + 1]
                    if line.strip():
                        yield _decode_event(line)
                if len(buffer) > self._max_line:
                    raise StreamBrokenError(f"a watch event is over {self._max_line} bytes")
        finally:
            self._release()
        if buffer.strip() and not self.stopped:
            raise StreamBrokenError("the stream was cut in the middle of an event")

    def _chunks(self) -> Iterator[Any]:
        """The response's chunks; a read that fails ends them (quietly when closed on
        purpose, else as a StreamBrokenError)."""
        try:
            yield from self._response.stream(amt=None, decode_content=False)
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as error:
            if not self.stopped:
                raise StreamBrokenError(
                    f"the stream broke: {type(error).__name__}: {error}"
                ) from error

    def close(self) -> None:
        """Stop on purpose, unblocking a read in progress in another thread."""
        self.stopped = True
        with contextlib.suppress(Exception):  # best effort: the read fails or ends either way
            self._response.shutdown()

    def _release(self) -> None:
        with contextlib.suppress(Exception):
            self._response.release_conn()


def _decode_event(line: bytes) -> WatchEvent:
    try:
        data = json.loads(line)
    except ValueError as error:
        raise StreamBrokenError(f"undecodable watch event: {line[:120]!r}") from error
    if not isinstance(data, dict):
        raise StreamBrokenError(f"a watch event is not an object: {line[:120]!r}")
    kind = data.get("type")
    obj = data.get("object")
    return WatchEvent(str(kind or ""), obj if isinstance(obj, dict) else {})


class KubeApi:
    """Raw-JSON verbs on one cluster through an official `kubernetes.client.ApiClient`."""

    def __init__(self, api_client: Any, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.api_client = api_client
        api_client.user_agent = USER_AGENT
        self.timeout = timeout
        self._core = client.CoreV1Api(api_client)
        self._typed = {
            "": self._core,
            "apps": client.AppsV1Api(api_client),
            "batch": client.BatchV1Api(api_client),
            "coordination.k8s.io": client.CoordinationV1Api(api_client),
        }
        self._custom = client.CustomObjectsApi(api_client)

    @staticmethod
    def cluster_name(
        kubeconfig: str | None = None, context: str | None = None, *, in_cluster: bool | None = None
    ) -> str:
        """What to call the cluster when the config does not: the kubeconfig context's
        name, or `in-cluster` for the pod's service account."""
        if in_cluster or (
            in_cluster is None
            and kubeconfig is None
            and context is None
            and os.environ.get("KUBERNETES_SERVICE_HOST")
        ):
            return "in-cluster"
        if context:
            return context
        try:
            _, active = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        except Exception:  # no kubeconfig: from_config says so, more precisely
            return ""
        return str((active or {}).get("name") or "")

    @classmethod
    def from_config(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        in_cluster: bool | None = None,
    ) -> KubeApi:
        """The pod's service account when `in_cluster` (by default: when running in a pod
        and no kubeconfig or context was named), else the kubeconfig (`--kubeconfig`,
        `$KUBECONFIG`, `~/.kube/config`) and its context. KubeConfigError when neither
        can be loaded."""
        try:
            configuration = _configuration(kubeconfig, context, in_cluster)
        except (config.ConfigException, OSError, ValueError) as error:
            raise KubeConfigError(f"no Kubernetes configuration: {error}") from error
        configuration.connection_pool_maxsize = 32  # watches hold connections open
        return cls(client.ApiClient(configuration))

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    # -- reading ------------------------------------------------------------------

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        """One page of a list: `{"metadata": {"resourceVersion", "continue"}, "items": […]}`."""
        options: dict[str, Any] = {"_request_timeout": self.timeout}
        if label_selector:
            options["label_selector"] = label_selector
        if field_selector:
            options["field_selector"] = field_selector
        if limit:
            options["limit"] = limit
        if continue_token:
            options["_continue"] = continue_token
        with translating():  # the body is read here
            return _json_object(self._list_call(resource, namespace, options))

    def list_all(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> Iterator[dict[str, Any]]:
        """Every item, one page at a time (memory holds one page)."""
        token: str | None = None
        while True:
            page = self.list(
                resource,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=page_size,
                continue_token=token,
            )
            for item in page.get("items") or []:
                if isinstance(item, dict):
                    yield item
            metadata = page.get("metadata")
            token = metadata.get("continue") if isinstance(metadata, dict) else None
            if not token:
                return

    def watch(
        self,
        resource: Resource,
        namespace: str | None,
        resource_version: str | None,
        *,
        timeout_seconds: int,
        read_timeout: float,
    ) -> WatchStream:
        """Open a watch from `resource_version` (bookmarks on)."""
        options: dict[str, Any] = {
            "watch": True,
            "allow_watch_bookmarks": True,
            "timeout_seconds": timeout_seconds,
            "_request_timeout": (self.timeout, read_timeout),
        }
        if resource_version:
            options["resource_version"] = resource_version
        return WatchStream(self._list_call(resource, namespace, options))

    def server_time(self) -> datetime | None:
        """The API server's own clock: the `Date` of its answer to `GET /version` (any
        answer has one), or None when it does not answer or says no date."""
        try:
            answer: Any
            answer, _, headers = client.VersionApi(self.api_client).get_code_with_http_info(
                _preload_content=False, _request_timeout=self.timeout
            )
            answer.release_conn()  # the raw answer: its body is not wanted
        except client.ApiException as error:
            headers = error.headers or {}
        except (urllib3.exceptions.HTTPError, OSError):
            return None
        try:
            return parsedate_to_datetime(str(headers.get("Date") or ""))
        except (TypeError, ValueError):
            return None

    def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            with translating():
                response = self._get_call(resource, namespace, name)
        except NotFoundError:
            return None
        return _json_object(response)

    def _get_call(self, resource: Resource, namespace: str | None, name: str) -> Any:
        if not resource.snake:
            return self._custom_call("get", resource, namespace, name)
        if resource.namespaced:
            return self._typed_call(f"read_namespaced_{resource.snake}", resource)(
                name, namespace, _preload_content=False, _request_timeout=self.timeout
            )
        return self._typed_call(f"read_{resource.snake}", resource)(
            name, _preload_content=False, _request_timeout=self.timeout
        )

    def pod_log(
        self,
        namespace: str,
        name: str,
        container: str,
        *,
        previous: bool,
        tail_lines: int,
        limit_bytes: int,
    ) -> bytes:
        options: dict[str, Any] = {
            "previous": previous,
            "tail_lines": tail_lines,
            "limit_bytes": limit_bytes,
            "_preload_content": False,
            "_request_timeout": self.timeout,
        }
        if container:
            options["container"] = container
        with translating():
            response: Any = self._core.read_namespaced_pod_log(name, namespace, **options)
            try:
                data = response.read(limit_bytes)  # a server that ignores limitBytes: no more
            finally:
                response.close()
        return bytes(data or b"")

    def served(self, group: str, version: str, plural: str) -> bool:
        """Whether the API server serves `plural` in `group/version` (discovery)."""
        try:
            with translating():
                response = self._custom.get_api_resources(
                    group, version, _preload_content=False, _request_timeout=self.timeout
                )
        except NotFoundError:
            return False
        resources = _json_object(response).get("resources") or []
        return any(isinstance(r, dict) and r.get("name") == plural for r in resources)

    # -- writing ------------------------------------------------------------------

    def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        body: Sequence[Mapping[str, Any]] | Mapping[str, Any],
        *,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """A JSON patch (a list of operations) or a JSON merge patch (a mapping)."""
        content_type = MERGE_PATCH if isinstance(body, Mapping) else JSON_PATCH
        payload: Any = dict(body) if isinstance(body, Mapping) else [dict(op) for op in body]
        options: dict[str, Any] = {
            "_preload_content": False,
            "_request_timeout": self.timeout,
            "_content_type": content_type,
            "field_manager": FIELD_MANAGER,
        }
        if dry_run:
            options["dry_run"] = "All"
        with translating():
            if not resource.snake:
                response = self._custom_call("patch", resource, namespace, name, payload, **options)
            elif resource.namespaced:
                response = self._typed_call(f"patch_namespaced_{resource.snake}", resource)(
                    name, namespace, payload, **options
                )
            else:
                response = self._typed_call(f"patch_{resource.snake}", resource)(
                    name, payload, **options
                )
            return _json_object(response)

    def replace(
        self, resource: Resource, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Replace an object (PUT) from the `metadata.resourceVersion` it carries: the API
        server refuses it (`ConflictError`) when the object changed since."""
        put = self._typed_call(f"replace_namespaced_{resource.snake}", resource)
        options = {"_preload_content": False, "_request_timeout": self.timeout}
        with translating():
            response = put(name, namespace, dict(body), field_manager=FIELD_MANAGER, **options)
            return _json_object(response)

    def delete(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        *,
        uid: str = "",
        propagation: str = "Background",
    ) -> None:
        """Delete one object; with `uid`, only that incarnation (a precondition)."""
        options = client.V1DeleteOptions(
            propagation_policy=propagation,
            preconditions=client.V1Preconditions(uid=uid) if uid else None,
        )
        with translating():
            self._delete_call(resource, namespace, name, options)

    def _delete_call(self, resource: Resource, namespace: str, name: str, options: Any) -> None:
        if not resource.snake:
            self._custom.delete_namespaced_custom_object(
                resource.group,
                resource.version,
                namespace,
                resource.plural,
                name,
                body=options,
                _preload_content=False,
                _request_timeout=self.timeout,
            )
            return
        self._typed_call(f"delete_namespaced_{resource.snake}", resource)(
            name, namespace, body=options, _preload_content=False, _request_timeout=self.timeout
        )

    def create(self, resource: Resource, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create an object from a raw manifest (posted as is, not through a typed model,
        with the same authentication as every typed call)."""
        with translating():
            status, data = self._post(_collection_path(resource, namespace), body)
        if not 200 <= status < 300:
            raise error_for(status, _status_message(data))
        return _json_object_bytes(data)

    def _post(self, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        method, url, headers, payload, post = self.api_client.param_serialize(
            method="POST",
            resource_path=path,
            query_params=[("fieldManager", FIELD_MANAGER)],
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=dict(body),
            auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(
            method,
            url,
            header_params=headers,
            body=payload,
            post_params=post,
            _request_timeout=self.timeout,
        )
        data = response.read() if hasattr(response, "read") else response.data
        return int(getattr(response, "status", 200)), data

    # -- plumbing ---------------------------------------------------------------------

    def _list_call(self, resource: Resource, namespace: str | None, options: dict[str, Any]) -> Any:
        with translating():
            return self._list_request(resource, namespace, options)

    def _list_request(
        self, resource: Resource, namespace: str | None, options: dict[str, Any]
    ) -> Any:
        options = {**options, "_preload_content": False}
        if not resource.snake:
            if resource.namespaced and namespace:
                return self._custom.list_namespaced_custom_object(
                    resource.group, resource.version, namespace, resource.plural, **options
                )
            return self._custom.list_cluster_custom_object(
                resource.group, resource.version, resource.plural, **options
            )
        if not resource.namespaced:
            return self._typed_call(f"list_{resource.snake}", resource)(**options)
        if namespace:
            return self._typed_call(f"list_namespaced_{resource.snake}", resource)(
                namespace, **options
            )
        return self._typed_call(f"list_{resource.snake}_for_all_namespaces", resource)(**options)

    def _typed_call(self, method: str, resource: Resource) -> Any:
        return getattr(self._typed[resource.group], method)

    def _custom_call(
        self,
        verb: str,
        resource: Resource,
        namespace: str | None,
        name: str,
        *body: Any,
        **options: Any,
    ) -> Any:
        options.setdefault("_preload_content", False)
        options.setdefault("_request_timeout", self.timeout)
        group, version, plural = resource.group, resource.version, resource.plural
        if resource.namespaced:
            method = getattr(self._custom, f"{verb}_namespaced_custom_object")
            return method(group, version, namespace, plural, name, *body, **options)
        method = getattr(self._custom, f"{verb}_cluster_custom_object")
        return method(group, version, plural, name, *body, **options)


def _configuration(kubeconfig: str | None, context: str | None, in_cluster: bool | None) -> Any:
    configuration = client.Configuration()
    if in_cluster is None:
        in_cluster = (
            kubeconfig is None
            and context is None
            and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        )
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
    return configuration


def _collection_path(resource: Resource, namespace: str) -> str:
    prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    scope = f"/namespaces/{namespace}" if resource.namespaced else ""
    return f"{prefix}{scope}/{resource.plural}"


def _json_object(response: Any) -> dict[str, Any]:
    data = response.data if hasattr(response, "data") else response.read()
    return _json_object_bytes(data)


def _json_object_bytes(data: Any) -> dict[str, Any]:
    try:
        parsed = json.loads(data or b"{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _status_message(data: Any) -> str:
    parsed = _json_object_bytes(data)
    return str(parsed.get("message") or parsed.get("reason") or "request failed")


def hostname() -> str:
    return os.environ.get("HOSTNAME") or socket.gethostname()
