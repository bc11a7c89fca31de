"""One named override in a job's entrypoint: `key=value` set, for a rerun.

Why this exists: some failures are fixed by rerunning with one setting changed (verl's
`trainer.ray_wait_register_center_timeout=600` when workers start slowly). A playbook
names the override; the rerun (`ray.resubmit_job`, `kuberay.recreate_rayjob`) sets it
in the entrypoint the same way, and its preview shows the result. Pure.
"""

from __future__ import annotations

import shlex


def with_override(entrypoint: str, override: str) -> str:
    """The entrypoint with `key=value` set: an existing `key=...` argument replaced,
    else appended. An empty override leaves the entrypoint as it is."""
    if not override:
        return entrypoint
    key = override.split("=", 1)[0]
    words = shlex.split(entrypoint)
    replaced = [override if "=" in w and w.split("=", 1)[0] == key else w for w in words]
    if replaced == words:
        replaced.append(override)
    return shlex.join(replaced)
