"""What every section of the configuration is: a closed, frozen pydantic model.

Why this exists: an unknown key in the file must be an error naming it, and settings are
read by several threads, so every section model shares one base that forbids both.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
