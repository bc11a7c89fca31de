"""The Kubernetes adapter's calls fail with its own errors, never the client's.

Callers say what they expect (`except NotFoundError`, `except ConflictError`) instead of
comparing HTTP statuses, so each status the API server answers must arrive as one class,
with the server's own message, and a server that cannot be reached as `UnavailableError`.
"""

from __future__ import annotations

import socket
from typing import Any

import kmock
import pytest
from kubernetes import client

from bot.adapters.kubernetes.api import PODS, KubeApi
from bot.adapters.kubernetes.errors import (
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    KubeApiError,
    NotFoundError,
    UnavailableError,
)
from tests.e2e.kubernetes.conftest import Emulator
from tests.support import kube_objects as o

pytestmark = pytest.mark.kube


def status_body(code: int, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "message": message,
    }


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (400, InvalidError),
        (401, ForbiddenError),
        (403, ForbiddenError),
        (409, ConflictError),
        (410, GoneError),
        (422, InvalidError),
        (429, UnavailableError),
        (500, UnavailableError),
        (503, UnavailableError),
        (418, KubeApiError),
    ],
)
def test_each_status_arrives_as_its_own_error(
    emulator: Emulator, code: int, expected: type[KubeApiError]
) -> None:
    emulator.run(
        lambda k: (
            k[kmock.action.FETCH, kmock.resource("v1/pods")] << code << status_body(code, "told so")
        )
    )
    with pytest.raises(expected) as raised:
        emulator.api.get(PODS, o.NS, "trainer")
    assert type(raised.value) is expected
    assert str(raised.value) == f"{code} told so"


def test_a_missing_object_is_none_and_a_missing_target_of_a_patch_is_not_found(
    emulator: Emulator,
) -> None:
    assert emulator.api.get(PODS, o.NS, "nobody") is None
    with pytest.raises(NotFoundError, match=r"^404 The object is not found"):
        emulator.api.patch(PODS, o.NS, "nobody", {"metadata": {"labels": {"a": "b"}}})


def test_creating_a_name_that_is_taken_is_a_conflict(emulator: Emulator) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": o.NS},
        "spec": {"containers": [{"name": "main", "image": "trainer"}]},
    }
    emulator.api.create(PODS, o.NS, pod)
    with pytest.raises(ConflictError, match=r"^409 "):
        emulator.api.create(PODS, o.NS, pod)


def test_a_server_that_is_not_there_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    configuration.retries = 0
    api = KubeApi(client.ApiClient(configuration), timeout=2.0)
    try:
        with pytest.raises(UnavailableError) as refused:
            api.list(PODS, o.NS)
        assert str(refused.value) == (
            f"the Kubernetes API at 127.0.0.1:{port} did not answer (connection refused)"
        )
    finally:
        api.api_client.close()
