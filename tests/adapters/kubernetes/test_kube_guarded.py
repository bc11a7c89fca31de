"""A write its own guard protects (a JSON patch `test`, a uid precondition), as every
Kubernetes executor makes it (`bot.adapters.kubernetes.base.guarded`): a failed guard
refuses the action with what changed, any other API error fails it with the server's
reason, or, for a server-side dry-run, refuses it with nothing changed."""

from __future__ import annotations

import pytest

from bot.adapters.kubernetes.base import guarded
from bot.adapters.kubernetes.errors import (
    ConflictError,
    ForbiddenError,
    InvalidError,
    KubeApiError,
    UnavailableError,
)
from bot.core.errors import ActionFailedError, ActionRefusedError, PitcrewError

CHANGED = "pod ml/p was replaced meanwhile; nothing was deleted"
TESTED = 'the server rejected our patch: jsonpatch: "tested value" does not match'


@pytest.mark.parametrize(
    ("error", "dry_run", "raised", "said"),
    [
        (InvalidError("422 the test operation failed"), False, ActionRefusedError, CHANGED),
        (ConflictError("409 the uid precondition failed"), False, ActionRefusedError, CHANGED),
        (UnavailableError(f"500 {TESTED}"), False, ActionRefusedError, CHANGED),  # an emulator
        (
            UnavailableError("503 etcd is unavailable"),
            False,
            ActionFailedError,
            "delete failed: 503 etcd is unavailable",
        ),
        (
            ForbiddenError("403 pods is forbidden"),
            True,
            ActionRefusedError,
            "delete failed: 403 pods is forbidden; nothing was changed",
        ),
    ],
    ids=["test-failed", "uid-precondition", "emulator-500", "unavailable", "dry-run"],
)
def test_a_failed_guard_refuses_and_any_other_api_error_fails(
    error: KubeApiError, dry_run: bool, raised: type[PitcrewError], said: str
) -> None:
    with pytest.raises(raised) as stopped, guarded(CHANGED, "delete failed", dry_run=dry_run):
        raise error
    assert type(stopped.value) is raised
    assert str(stopped.value) == said
    assert stopped.value.__cause__ is error


def test_a_write_that_passes_its_guard_goes_through() -> None:
    done: list[str] = []
    with guarded(CHANGED, "delete failed"):
        done.append("deleted")
    assert done == ["deleted"]
