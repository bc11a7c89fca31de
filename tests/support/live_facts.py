"""Live facts asked at once, for tests that check what the executors' checks find.

The daemon asks the same checks off the pipeline thread (`bot.daemon.live_checks`), and
`pitcrew diagnose --kube/--ray-job` through `live_checks.decide`; these ask them on the
caller's thread and hand back the facts (or the diagnosis with refused offers settled),
so a test can assert on them directly.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.adapters.ray.executor_base import RayExecutor
from bot.adapters.ray.on_demand import ray_checks
from bot.core.actions.facts import FactAnswer, awaiting, settle, to_confirm
from bot.core.model import Diagnosis
from bot.daemon import live_checks
from bot.daemon.executor import Registry


def live_facts(diagnosis: Diagnosis, registry: Registry) -> dict[str, bool]:
    """The facts the actions `diagnosis` withholds only for want of one, from each
    action's executor; a fact two checks disagree on is false (the cautious reading); an
    action without an executor, or whose check fails, stays withheld."""
    checks = live_checks.executor_checks(registry)
    return dict(live_checks.ask(awaiting(diagnosis), checks).answer.facts)


def check_offers(diagnosis: Diagnosis, registry: Registry) -> Diagnosis:
    """The diagnosis with every offered action whose preconditions its executor finds
    false now shown as withheld, with the executor's reason."""
    checks = live_checks.executor_checks(registry)
    answer = live_checks.ask(to_confirm(diagnosis), checks).answer
    return settle(diagnosis, FactAnswer(refused=answer.refused))


def ray_facts(diagnosis: Diagnosis, executors: Mapping[str, RayExecutor]) -> dict[str, bool]:
    """`live_facts` for the Ray executors alone, as `pitcrew diagnose --ray-job` asks them."""
    return dict(live_checks.ask(awaiting(diagnosis), ray_checks(executors)).answer.facts)
