"""k8s.add_shm: give a Ray group's pods a memory-backed /dev/shm, or a larger one.

Why this exists: a container's /dev/shm is 64 MiB unless its pod mounts an `emptyDir`
with `medium: Memory` there; NCCL and Ray's object store then fail or fall back to
/tmp (`shm_too_small`). The fix belongs on the group's template (the RayCluster's,
and the RayJob's `rayClusterSpec` so the next submission keeps it): the volume and its
mount are added, or an existing memory-backed /dev/shm gets a larger `sizeLimit`. The
size is the playbook's, else half the container's memory limit (tmpfs pages count
against the limit). Running pods keep what they have; new pods get the volume.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.adapters.kubernetes.api import BY_KIND
from bot.adapters.kubernetes.base import KubeExecutor
from bot.adapters.kubernetes.capacity import quantity_text
from bot.adapters.kubernetes.templates import (
    PROPOSAL_ANNOTATION,
    Site,
    annotation_ops,
    locate,
    proposal_of,
    resolve,
    set_ops,
    test_op,
)
from bot.core import quantity
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.params import AddShm
from bot.core.actions.specs import ACTION_SPECS
from bot.core.actions.step import Step
from bot.core.errors import ActionRefusedError
from bot.core.inputs.values import as_list, as_map, text_at

SHM = "/dev/shm"
VOLUME = "pitcrew-dshm"
FACT = "k8s.shm_can_grow"


@dataclass(frozen=True)
class ShmChange:
    """One site's /dev/shm: what it is now and the ops that make it `size`."""

    site: Site
    now: str  # "none", or "emptyDir (medium: Memory, sizeLimit 1Gi)"
    size: str
    ops: tuple[dict[str, Any], ...]

    def line(self) -> str:
        new = f"emptyDir (medium: Memory, sizeLimit {self.size})"
        return f"{self.site.describe()} {self.site.container_label}: {SHM}: {self.now} → {new}"


def shm_volume(site: Site) -> tuple[int, Mapping[str, Any]] | None:
    """The index and the volume mounted at /dev/shm in the site's container, if any."""
    mounts = as_list(site.container.get("volumeMounts"))
    name = next((text_at(m, "name") for m in mounts if text_at(m, "mountPath") == SHM), "")
    if not name:
        return None
    for index, volume in enumerate(as_list(site.pod_spec.get("volumes"))):
        if text_at(volume, "name") == name:
            return index, as_map(volume)
    return -1, {}


def plan_shm(site: Site, size: str, proposal_id: str) -> ShmChange:
    """The ops that give the site a /dev/shm of `size`; refused when it has one as large
    or one pitcrew should not touch."""
    found = shm_volume(site)
    pinned = [*site.guards]
    if found is None:
        volumes = [dict(as_map(v)) for v in as_list(site.pod_spec.get("volumes"))]
        mounts = [dict(as_map(m)) for m in as_list(site.container.get("volumeMounts"))]
        added = {"name": VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": size}}
        ops = pinned + set_ops(site.obj, f"{site.pod_spec_path}/volumes", [*volumes, added])
        ops += set_ops(
            site.obj,
            f"{site.container_path}/volumeMounts",
            [*mounts, {"name": VOLUME, "mountPath": SHM}],
        )
        now = "none (64Mi by default)"
    else:
        index, volume = found
        empty = as_map(volume.get("emptyDir"))
        if index < 0 or "emptyDir" not in volume or text_at(empty, "medium") != "Memory":
            raise ActionRefusedError(
                f"{site.container_label} mounts {SHM} from a volume that is not a "
                "memory-backed emptyDir: left as it is"
            )
        limit = quantity_text(empty.get("sizeLimit"))
        now = f"emptyDir (medium: Memory, sizeLimit {limit or 'none'})"
        if not limit or quantity.parse_bytes(limit) >= quantity.parse_bytes(size):
            raise ActionRefusedError(
                f"{site.container_label} already has {SHM} as {now}, not smaller than {size}"
            )
        path = f"{site.pod_spec_path}/volumes/{index}"
        ops = [*pinned, test_op(f"{path}/name", text_at(volume, "name"))]
        ops += set_ops(site.obj, f"{path}/emptyDir/sizeLimit", size)
    ops += annotation_ops(site.obj, PROPOSAL_ANNOTATION, proposal_id)
    return ShmChange(site, now, size, tuple(ops))


def shm_size(site: Site, wanted: str) -> str:
    """The playbook's size, else half the container's memory limit."""
    if wanted:
        return wanted
    limit = quantity_text(resolve(site.container, "/resources/limits/memory"))
    if not limit:
        raise ActionRefusedError(
            f"{site.container_label} has no memory limit to size {SHM} from, and the "
            "playbook names no size"
        )
    return quantity.format_bytes(quantity.parse_bytes(limit) // 2)


class AddShmExecutor(KubeExecutor):
    """Add (or grow) a memory-backed /dev/shm on a Ray group's template."""

    action = "k8s.add_shm"

    def plan(self, step: Step) -> list[ShmChange]:
        """The changes to make; none when this proposal has made them already."""
        p, proposal_id = self.validated(AddShm, step.params), step.proposal_id
        obj = self._get(p.kind, p.namespace, p.name)
        if proposal_id and proposal_of(obj) == proposal_id:
            return []
        sites = [
            site
            for kind, twin in self._twins(p.kind, obj)
            if (site := locate(kind, twin, p.group, p.container)) is not None
        ]
        if not sites:
            raise ActionRefusedError(
                f"{p.kind} {p.namespace}/{p.name} has no group {p.group} with container "
                f"{p.container or '(first)'}"
            )
        size = shm_size(sites[0], p.size)
        changes = [plan_shm(sites[0], size, proposal_id)]
        for twin in sites[1:]:
            try:
                changes.append(plan_shm(twin, size, proposal_id))
            except ActionRefusedError:
                continue  # the other copy already has it, or one of its own
        return changes

    def check(self, step: Step, plan: list[ShmChange]) -> LiveCheck:
        done = "" if plan else f"already applied by proposal {step.proposal_id}"
        lines = [c.line() for c in plan] or [done]
        diff = "\n".join([*lines, ACTION_SPECS[self.action].impact])
        return self.live(step, {FACT: True}, diff, done=done)

    def execute(self, step: Step, plan: list[ShmChange]) -> str:
        proposal_id, approver, changes = step.proposal_id, step.approver, plan
        if not changes:
            return f"already applied by proposal {proposal_id}"
        done: list[str] = []
        dry = ""
        for change in changes:
            try:
                dry = self._apply(change.site, list(change.ops), f"{SHM} was {change.now}") or dry
            except ActionRefusedError:
                if change is changes[0]:
                    raise
                done.append(f"{change.site.describe()} changed meanwhile: not updated")
                continue
            self._record(change.site.kind, change.site.obj, proposal_id, approver, change.line())
            done.append(change.line())
        return "\n".join([*done, dry, ACTION_SPECS[self.action].impact])

    def verified(self, params: Mapping[str, Any]) -> bool:
        p = AddShm.check(params)
        obj = self.api.get(BY_KIND[p.kind], p.namespace, p.name)
        live = self._twins(p.kind, obj)[0] if obj else None
        site = locate(live[0], live[1], p.group, p.container) if live else None
        found = shm_volume(site) if site else None
        if site is None or found is None or found[0] < 0:
            return False
        empty = as_map(found[1].get("emptyDir"))
        return text_at(empty, "medium") == "Memory" and "emptyDir" in found[1]
