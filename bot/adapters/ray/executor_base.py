"""What the Ray executors share: the clusters they act on, the ids and metadata keys
that make each action idempotent per proposal, and the base every executor extends.
"""

from __future__ import annotations

import hashlib
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from bot.adapters.ray.client import (
    TERMINAL,
    RayClusterConfig,
    RayDashboard,
)
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.params import ActionParams
from bot.core.actions.step import Step
from bot.core.errors import ActionRefusedError
from bot.daemon.ports import Verification

PROTECTED = re.compile(r"_register_center$|WorkerDict")
"""verl's register center and WorkerDict workers: killed only once their job has finished."""
PROPOSAL_KEY = "pitcrew.proposal"
ACTION_KEY = "pitcrew.action"
RESUBMIT_OF_KEY = "pitcrew.resubmit_of"
ROOT_KEY = "pitcrew.root"
ATTEMPT_KEY = "pitcrew.attempt"
NAMESPACE_KEY = "pitcrew.namespace"


Facts = dict[str, bool]


class RayClusters:
    """The Ray clusters actions may act on, found by pitcrew's cluster name or RayCluster
    name; an empty name means the only one there is.

    `discovered` returns the live set of clusters found from RayCluster objects
    (`bot.adapters.kuberay.discovery.discovered_configs`), asked at each lookup: configured
    clusters first, then those. A discovered one is also found as `namespace/name`; a
    RayCluster name found in several namespaces is refused as ambiguous."""

    def __init__(
        self,
        configs: Sequence[RayClusterConfig],
        client_factory: Callable[[RayClusterConfig], RayDashboard] = RayDashboard.of,
        discovered: Callable[[], Sequence[RayClusterConfig]] | None = None,
    ) -> None:
        self.configs = tuple(configs)
        self.client_factory = client_factory
        self.discovered = discovered

    def live(self) -> tuple[RayClusterConfig, ...]:
        """The discovered clusters now (none without discovery)."""
        return tuple(self.discovered()) if self.discovered is not None else ()

    def config(self, name: str) -> RayClusterConfig:
        if not name:
            known = {c.name: c for c in (*self.configs, *self.live())}
            if len(known) == 1:
                return next(iter(known.values()))
            found = "configured or discovered" if self.discovered is not None else "configured"
            raise ActionRefusedError(
                f"the action names no Ray cluster and {len(known)} are {found}"
            )
        for config in self.configs:
            if name in (config.name, config.ray_cluster):
                return config
        matches: dict[tuple[str, str], RayClusterConfig] = {}
        for config in self.live():
            scoped = f"{config.k8s_namespace}/{config.ray_cluster}"
            if name in (config.name, config.ray_cluster, scoped):
                matches.setdefault((config.name, config.url), config)
        if len(matches) == 1:
            return next(iter(matches.values()))
        if matches:
            places = ", ".join(sorted(c.k8s_namespace or c.name for c in matches.values()))
            raise ActionRefusedError(
                f"Ray cluster {name!r} is ambiguous (RayClusters in {places}); "
                "name it as namespace/name"
            )
        if self.discovered is not None:
            raise ActionRefusedError(f"no Ray cluster {name!r} is configured or discovered")
        raise ActionRefusedError(f"no Ray cluster {name!r} is configured")

    @contextmanager
    def client(self, name: str) -> Iterator[tuple[RayClusterConfig, RayDashboard]]:
        """A fresh client per use: executors may run on several threads at once."""
        config = self.config(name)
        client = self.client_factory(config)
        try:
            yield config, client
        finally:
            client.close()


def remediation_id(kind: str, proposal_id: str) -> str:
    """A submission id derived from the proposal: the same proposal, the same job."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", proposal_id).strip("-")[:40] or "proposal"
    digest = hashlib.sha256(proposal_id.encode()).hexdigest()[:8]
    return f"pitcrew-{kind}-{safe}-{digest}"


# -- live facts --------------------------------------------------------------------------


def live_status(client: RayDashboard, submission_id: str) -> str:
    job = client.get_job(submission_id)
    return str(job.get("status") or "") if job else ""


# -- executors ---------------------------------------------------------------------------


class RayExecutor(ABC):
    """What every Ray executor shares: the clusters, its parameters validated, and the
    `bot.daemon.ports.Executor` calls. A Ray executor plans by `look` (the live
    facts and what the cluster shows) and re-checks inside `execute` what the
    playbooks already guard (defence in depth)."""

    action: ClassVar[str]
    params_model: ClassVar[type[ActionParams]]

    def __init__(self, clusters: RayClusters) -> None:
        self.clusters = clusters

    def params(self, params: Mapping[str, Any] | ActionParams) -> Any:
        if isinstance(params, self.params_model):
            return params
        values = params.as_dict() if isinstance(params, ActionParams) else params
        try:
            return self.params_model.check(values)
        except ValueError as error:  # pydantic's ValidationError
            raise ActionRefusedError(f"{self.action}: invalid parameters: {error}") from None

    def plan(self, step: Step) -> tuple[Facts, str]:
        return self.look(step.params)

    def check(self, step: Step, plan: tuple[Facts, str]) -> LiveCheck:
        """The facts; no preview to compare (the live one is the diff)."""
        facts, diff = plan
        return LiveCheck(facts=facts, preview=None, diff=diff)

    def verify(self, step: Step) -> Verification:
        ok = self.verified(step.params)
        return Verification(ok, "verified on the cluster" if ok else "not in effect yet")

    @abstractmethod
    def look(self, params: Mapping[str, Any] | ActionParams) -> tuple[Facts, str]:
        """The live facts the action's guards name, and what the cluster shows."""

    @abstractmethod
    def execute(self, step: Step, plan: Any) -> str:
        """Act once per proposal id; returns what was done."""

    @abstractmethod
    def verified(self, params: Mapping[str, Any] | ActionParams) -> bool:
        """Whether the change is in place."""


def wait_terminal(
    client: RayDashboard, submission_id: str, timeout: float, every: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while True:
        job = client.get_job(submission_id) or {}
        if str(job.get("status") or "") in TERMINAL or time.monotonic() >= deadline:
            return job
        time.sleep(every)


def until(condition: Callable[[], bool], timeout: float, every: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)


def metadata_of(job: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in as_mapping(job.get("metadata")).items()}


def as_mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return clip(lines[-1], 300) if lines else ""
