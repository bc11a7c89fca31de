"""How findings are grouped into incidents: the window a finding joins its workload's
incident in, the quiet period after which one resolves, and the caps on what one
incident remembers (`CorrelationConfig`, the config's `correlation` section; the
correlator, `bot.core.incidents.correlator`, applies it). Pure.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, model_validator


class CorrelationConfig(BaseModel):
    """How findings are grouped into incidents, and the memory caps per incident."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window: timedelta = Field(
        default=timedelta(minutes=10),
        description="a finding joins its workload's incident if the last one came this recently",
    )
    quiet_period: timedelta = Field(
        default=timedelta(minutes=30),
        description="an incident with no new finding for this long resolves",
    )
    max_objects: int = Field(
        default=5000, ge=1, description="distinct object names remembered per playbook"
    )
    max_evidence: int = Field(default=5, ge=1, description="evidence lines kept per playbook")
    max_keys: int = Field(default=8, ge=1, description="workload keys one incident answers to")
    max_notes: int = Field(default=20, ge=1, description="history notes kept per incident")
    max_labels: int = Field(default=16, ge=0, description="labels kept per incident")

    @model_validator(mode="after")
    def _positive(self) -> CorrelationConfig:
        if self.window <= timedelta(0):
            raise ValueError("window must be positive")
        if self.quiet_period < self.window:
            raise ValueError("quiet_period cannot be shorter than window")
        return self
