"""The parameters of the catalogue's actions (`bot.core.actions.specs`): what a playbook
may set and an approved action runs with, each a pydantic model that checks them.

Why apart from the catalogue: pydantic is imported with these models, the first time an
action is offered, checked or run (`ActionSpec.params`), not by a `pitcrew diagnose`
that finds nothing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.core import quantity


class ActionParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


_K8S_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class BumpMemory(ActionParams):
    namespace: str = Field(pattern=_K8S_NAME)
    kind: Literal["RayCluster", "RayJob", "Deployment", "StatefulSet", "Job"]
    name: str = Field(pattern=_K8S_NAME)
    group: str = Field(default="", description="worker group name, or `head`")
    container: str = ""
    current: str = Field(default="", description="current memory limit, if known")
    factor: float = Field(default=1.5, gt=1.0, le=2.0)
    cap: str = "512Gi"
    limit: str = Field(default="", description="the new limit sized from observed usage")
    basis: str = Field(default="", description="where the new limit or the factor came from")

    @field_validator("current", "cap", "limit")
    @classmethod
    def _is_quantity(cls, value: str) -> str:
        if value:
            quantity.parse_bytes(value)
        return value


class RescheduleGpuPool(ActionParams):
    namespace: str = Field(pattern=_K8S_NAME)
    kind: Literal["RayCluster", "RayJob"]
    name: str = Field(pattern=_K8S_NAME)
    group: str = Field(min_length=1)
    label_key: str = "nvidia.com/gpu.product"
    label_value: str = "NVIDIA-A100-SXM4-80GB"


class AddShm(ActionParams):
    namespace: str = Field(pattern=_K8S_NAME)
    kind: Literal["RayCluster", "RayJob"]
    name: str = Field(pattern=_K8S_NAME)
    group: str = Field(min_length=1, description="worker group name, or `head`")
    container: str = ""
    size: str = Field(default="", description="sizeLimit; empty: half the memory limit")

    @field_validator("size")
    @classmethod
    def _is_quantity(cls, value: str) -> str:
        if value:
            quantity.parse_bytes(value)
        return value


class ScaleWorkerGroup(ActionParams):
    namespace: str = Field(pattern=_K8S_NAME)
    kind: Literal["RayCluster", "RayJob"]
    name: str = Field(pattern=_K8S_NAME)
    group: str = Field(min_length=1)
    add: int = Field(default=1, ge=1, le=64, description="workers to add, within maxReplicas")


class CordonNode(ActionParams):
    name: str = Field(pattern=_K8S_NAME)


class RecreateRayJob(ActionParams):
    namespace: str = Field(pattern=_K8S_NAME)
    name: str = Field(pattern=_K8S_NAME)
    naming: Literal["same", "retry"] = Field(
        default="same",
        description="same: delete, then create under the same name; "
        "retry: keep the old one, create `<name>-retry-N`",
    )
    override: str = Field(default="", description="an entrypoint argument `key=value` to set")


class DeletePod(ActionParams):
    namespace: str = Field(pattern=_K8S_NAME)
    name: str = Field(pattern=_K8S_NAME)


class KillActor(ActionParams):
    name: str = Field(min_length=1)
    namespace: str = Field(
        min_length=1,
        description="the namespace the clash message named; `None` (Ray prints the "
        "`.options()` argument) is the failing job's current one: the holder is "
        "resolved live, and only one in an explicit namespace is ever killed",
    )
    cluster: str = ""


class StopJob(ActionParams):
    submission_id: str = Field(min_length=1)
    cluster: str = ""


class ResubmitJob(ActionParams):
    submission_id: str = Field(min_length=1)
    cluster: str = ""
    max_retries: int = Field(default=2, ge=1, le=10)
    override: str = Field(default="", description="an entrypoint argument `key=value` to set")
