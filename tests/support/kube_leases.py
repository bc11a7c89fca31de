"""Leases with the API server's concurrency rules, on kmock's emulator.

Why this exists: leader election needs a record that one write at a time can change.
kmock 0.8's KubernetesEmulator serves `coordination.k8s.io/v1` `leases` (discovery,
create, get, and 409 for a second create of one name), but not what election relies on:

- it assigns no `metadata.resourceVersion` (an object keeps whatever it was created with,
  usually none) and changes none on a write;
- it does not serve PUT (an update, `replace_namespaced_lease`): 404 "Endpoint Not
  Found";
- its PATCH merges whatever it is sent, never refusing a write made from an older
  `resourceVersion` (no 409 Conflict).

`serve_leases` adds those three to an emulator, for leases only, with reactions of its
own on the emulator's loop: every create and update of a Lease gets a new
`resourceVersion` (one counter per emulator, as etcd's revision), and a PUT whose
`metadata.resourceVersion` is not the stored one is refused with 409 and the API
server's Status, as a real one does. The product is not changed for the emulator:
`bot.adapters.kubernetes.lease` talks to it as to a real API server.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import kmock

from bot.app.demo.emulator import KubeEmulator

LEASES = kmock.resource("coordination.k8s.io/v1/leases")
COLLECTION = re.compile(r"^/apis/coordination\.k8s\.io/v1/namespaces/[^/]+/leases$")
NAMED = re.compile(
    r"^/apis/coordination\.k8s\.io/v1/namespaces/(?P<ns>[^/]+)/leases/(?P<name>[^/]+)$"
)


def status(code: int, reason: str, message: str) -> kmock.Response:
    body = {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return kmock.Response(status=code, payload=body)


def serve_leases(emulator: KubeEmulator) -> None:
    """Leases on `emulator` get resourceVersions, PUT, and 409 on a stale one."""
    versions = itertools.count(1000)

    def created(request: Any) -> Any:
        """kmock stored the new Lease (or refused a second one) before this runs."""
        name = request.data["metadata"]["name"]
        stored = emulator.k.objects[LEASES, request.namespace, name]
        stored.patch({"metadata": {"resourceVersion": str(next(versions))}})
        return kmock.Response(status=201, payload=stored.raw)

    def replaced(request: Any) -> Any:
        found = NAMED.match(request.url.path)
        assert found is not None
        key = (LEASES, found["ns"], found["name"])
        if key not in emulator.k.objects or emulator.k.objects[key].deleted:
            return status(
                404, "NotFound", f'leases.coordination.k8s.io "{found["name"]}" not found'
            )
        stored = emulator.k.objects[key]
        sent = str((request.data.get("metadata") or {}).get("resourceVersion") or "")
        current = str(stored.raw.get("metadata", {}).get("resourceVersion") or "")
        if sent != current:
            return status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on leases.coordination.k8s.io "{found["name"]}": '
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
            )
        body = dict(request.data)
        body["metadata"] = {**body.get("metadata", {}), "resourceVersion": str(next(versions))}
        stored.delete()
        stored.create(body)
        return kmock.Response(status=200, payload=stored.raw)

    def declare(k: Any) -> None:
        k[kmock.method.POST, COLLECTION] << created
        k[kmock.method.PUT, NAMED] << replaced

    emulator.run(declare)


def stored_lease(emulator: KubeEmulator, namespace: str, name: str) -> dict[str, Any] | None:
    """The Lease as the emulator holds it (bypassing the API)."""

    def read(k: Any) -> dict[str, Any] | None:
        key = (LEASES, namespace, name)
        if key not in k.objects or k.objects[key].deleted:
            return None
        return dict(k.objects[key].raw)

    result: dict[str, Any] | None = emulator.run(read)
    return result
