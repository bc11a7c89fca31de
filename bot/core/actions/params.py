"""The parameters of the actions (`bot.core.actions.specs` names each model by its class):
what a playbook may set and an approved action runs with.

Each model is a frozen dataclass with its rules in its fields (`bot.core.validation`):
`check` makes one from a mapping (a playbook's rendered parameters, a proposal read
back from the store) and names every invalid field; pydantic is imported then, the
first time an action is offered, checked or run, not by a `pitcrew diagnose` that
finds nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Self

from bot.core import quantity
from bot.core.validation import STRICT, Check, validate


def _quantity(value: str) -> str:
    """Empty, or a memory quantity (`16Gi`, `500M`)."""
    if value:
        quantity.parse_bytes(value)
    return value


Quantity = Annotated[str, Check(_quantity)]
_K8S_NAME = {"pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"}
_GIVEN = {"min_length": 1}


@dataclass(frozen=True, kw_only=True)
class ActionParams:
    """What every action's parameters are: made by `check`, never half-valid."""

    __pydantic_config__ = STRICT

    @classmethod
    def check(cls, values: Mapping[str, Any]) -> Self:
        """The parameters in `values`; pydantic's `ValidationError` (a `ValueError`)
        names each one that is missing, unknown or invalid."""
        return validate(cls, dict(values))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameters this model takes, in the order it declares them."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class BumpMemory(ActionParams):
    namespace: str = field(metadata=_K8S_NAME)
    kind: Literal["RayCluster", "RayJob", "Deployment", "StatefulSet", "Job"]
    name: str = field(metadata=_K8S_NAME)
    group: str = field(default="", metadata={"description": "worker group name, or `head`"})
    container: str = ""
    current: Quantity = field(
        default="", metadata={"description": "current memory limit, if known"}
    )
    factor: float = field(default=1.5, metadata={"gt": 1.0, "le": 2.0})
    cap: Quantity = "512Gi"
    limit: Quantity = field(
        default="", metadata={"description": "the new limit sized from observed usage"}
    )
    basis: str = field(
        default="", metadata={"description": "where the new limit or the factor came from"}
    )


@dataclass(frozen=True, kw_only=True)
class RescheduleGpuPool(ActionParams):
    namespace: str = field(metadata=_K8S_NAME)
    kind: Literal["RayCluster", "RayJob"]
    name: str = field(metadata=_K8S_NAME)
    group: str = field(metadata=_GIVEN)
    label_key: str = "nvidia.com/gpu.product"
    label_value: str = "NVIDIA-A100-SXM4-80GB"


@dataclass(frozen=True, kw_only=True)
class AddShm(ActionParams):
    namespace: str = field(metadata=_K8S_NAME)
    kind: Literal["RayCluster", "RayJob"]
    name: str = field(metadata=_K8S_NAME)
    group: str = field(metadata={**_GIVEN, "description": "worker group name, or `head`"})
    container: str = ""
    size: Quantity = field(
        default="", metadata={"description": "sizeLimit; empty: half the memory limit"}
    )


@dataclass(frozen=True, kw_only=True)
class ScaleWorkerGroup(ActionParams):
    namespace: str = field(metadata=_K8S_NAME)
    kind: Literal["RayCluster", "RayJob"]
    name: str = field(metadata=_K8S_NAME)
    group: str = field(metadata=_GIVEN)
    add: int = field(
        default=1,
        metadata={"ge": 1, "le": 64, "description": "workers to add, within maxReplicas"},
    )


@dataclass(frozen=True, kw_only=True)
class ReplaceWorkerPods(ActionParams):
    namespace: str = field(metadata=_K8S_NAME)
    kind: Literal["RayCluster", "RayJob"]
    name: str = field(metadata=_K8S_NAME)
    group: str = field(
        metadata={**_GIVEN, "description": "the worker group whose pods are replaced"}
    )


@dataclass(frozen=True, kw_only=True)
class CordonNode(ActionParams):
    name: str = field(metadata=_K8S_NAME)


@dataclass(frozen=True, kw_only=True)
class RecreateRayJob(ActionParams):
    namespace: str = field(metadata=_K8S_NAME)
    name: str = field(metadata=_K8S_NAME)
    naming: Literal["same", "retry"] = field(
        default="same",
        metadata={
            "description": "same: delete, then create under the same name; "
            "retry: keep the old one, create `<name>-retry-N`"
        },
    )
    override: str = field(
        default="", metadata={"description": "an entrypoint argument `key=value` to set"}
    )


@dataclass(frozen=True, kw_only=True)
class DeletePod(ActionParams):
    namespace: str = field(metadata=_K8S_NAME)
    name: str = field(metadata=_K8S_NAME)


@dataclass(frozen=True, kw_only=True)
class KillActor(ActionParams):
    name: str = field(metadata=_GIVEN)
    namespace: str = field(
        metadata={
            **_GIVEN,
            "description": "the namespace the clash message named; `None` (Ray prints the "
            "`.options()` argument) is the failing job's current one: the holder is "
            "resolved live, and only one in an explicit namespace is ever killed",
        }
    )
    cluster: str = ""


@dataclass(frozen=True, kw_only=True)
class StopJob(ActionParams):
    submission_id: str = field(metadata=_GIVEN)
    cluster: str = ""


@dataclass(frozen=True, kw_only=True)
class ResubmitJob(ActionParams):
    submission_id: str = field(metadata=_GIVEN)
    cluster: str = ""
    max_retries: int = field(default=2, metadata={"ge": 1, "le": 10})
    override: str = field(
        default="", metadata={"description": "an entrypoint argument `key=value` to set"}
    )
