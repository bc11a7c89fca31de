"""The `actions` section: which executor runs each action and how far actions may go.

Why this exists: playbooks say which action fits a failure; how far to go (the memory
factor and cap, the GPU pool, the resubmission bound) and which executor kind runs it
are the operator's call, validated here against the action specs (bot.core.actions.specs).
"""

from __future__ import annotations

import re
from datetime import timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from bot.app.settings.base import Closed
from bot.core import quantity
from bot.core.actions.specs import ACTION_SPECS
from bot.core.actions.tuning import Overrides


class BumpMemorySettings(Closed):
    factor: float = Field(default=1.5, gt=1.0, le=2.0)
    cap: str = Field(default="512Gi", description="never raise a limit above this")
    headroom: float = Field(
        default=1.25, gt=1.0, le=2.0, description="over the group's observed peak (Prometheus)"
    )

    @field_validator("cap")
    @classmethod
    def _quantity(cls, value: str) -> str:
        quantity.parse_bytes(value)
        return value


class GpuPoolSettings(Closed):
    label_key: str = Field(default="nvidia.com/gpu.product", min_length=1)
    label_value: str = Field(default="NVIDIA-A100-SXM4-80GB", min_length=1)


class ResubmitSettings(Closed):
    max_retries: int = Field(default=2, ge=1, le=10)


class RecreateRayJobSettings(Closed):
    naming: Literal["same", "retry"] = Field(
        default="same",
        description="same: the rerun takes the failed RayJob's name (it is deleted first); "
        "retry: the failed one stays and the rerun is `<name>-retry-N`",
    )


class EchoSettings(Closed):
    """The built-in `echo` executor: runs nothing, records each execution (tests, demos)."""

    record: Path | None = Field(default=None, description="append one line per execution")
    delay: timedelta = Field(default=timedelta(0), ge=timedelta(0))


def _action_pattern(pattern: str) -> str:
    if not any(fnmatchcase(action, pattern) for action in ACTION_SPECS):
        raise ValueError(f"{pattern!r} names no action (known: {', '.join(sorted(ACTION_SPECS))})")
    return pattern


def _executor_kind(kind: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", kind):
        raise ValueError(f"{kind!r} is not an executor kind (a lowercase name such as echo)")
    return kind


ActionPattern = Annotated[str, AfterValidator(_action_pattern)]
ExecutorKind = Annotated[str, AfterValidator(_executor_kind)]


class ActionSettings(Closed):
    enabled: bool = Field(default=True, description="false: diagnose and notify only")
    executors: dict[ActionPattern, ExecutorKind] = Field(
        default_factory=dict,
        description="action id (or pattern) -> executor kind (echo, kubernetes, ray, ...)",
    )
    bump_memory: BumpMemorySettings = BumpMemorySettings()
    gpu_pool: GpuPoolSettings = GpuPoolSettings()
    resubmit: ResubmitSettings = ResubmitSettings()
    recreate_rayjob: RecreateRayJobSettings = RecreateRayJobSettings()
    echo: EchoSettings = EchoSettings()

    def overrides(self) -> Overrides:
        """The parameter values these settings impose on offered actions."""
        return {
            "k8s.bump_memory": {"factor": self.bump_memory.factor, "cap": self.bump_memory.cap},
            "k8s.reschedule_gpu_pool": {
                "label_key": self.gpu_pool.label_key,
                "label_value": self.gpu_pool.label_value,
            },
            "ray.resubmit_job": {"max_retries": self.resubmit.max_retries},
            "kuberay.recreate_rayjob": {"naming": self.recreate_rayjob.naming},
        }

    def executor_for(self, action: str) -> str | None:
        """The executor kind configured for `action` (exact id first, then patterns)."""
        if action in self.executors:
            return self.executors[action]
        return next((k for p, k in self.executors.items() if fnmatchcase(action, p)), None)
