"""What this pitcrew can carry out: an offer is made only when it can finish.

Why this exists: an offer nobody can run is a button that ends in a refusal. With the
`kubernetes` executor kind configured and the `kuberay` kind not (a cautious start),
the seed's plan "bump, then recreate the RayJob" was offered, approved, half run and
refused at step 2; with approvers scoped to `k8s.*`, nothing on the card could be
approved at all, though the bump alone could have been. So before an action is
offered, each step is held to what is configured: an executor for it
(`actions.executors`), actions enabled at all (`actions.enabled`), and an approver the
policy lets approve it on this workload (`approvals.approvers`, two where
`approvals.two_approvers` says so). What fails that is withheld naming the setting
(`ActionOffer.lacks`), so the card says what to configure, and the part of a plan that
can run alone is offered alone (`bot.core.actions.order.remains` says what completes it).

Pure: the configuration comes in as values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from bot.core.actions.policy import ApprovalPolicy
from bot.core.actions.specs import ACTION_SPECS
from bot.core.model import ActionOffer, Diagnosis


@dataclass(frozen=True)
class Reach:
    """The actions this pitcrew has an executor for, whether it may act at all, and who
    may approve what (`policy`)."""

    executors: frozenset[str]
    policy: ApprovalPolicy
    enabled: bool = True

    @classmethod
    def of(cls, executors: Iterable[str], policy: ApprovalPolicy, enabled: bool = True) -> Reach:
        return cls(frozenset(executors), policy, enabled)

    def lacks(self, action: str, namespace: str, workload: str = "") -> tuple[str, str]:
        """(why `action` cannot finish here, the setting that would let it) or ("", "")."""
        if not self.enabled:
            return (
                "actions are disabled in this pitcrew's config",
                "actions.enabled: true",
            )
        if action not in self.executors:
            spec = ACTION_SPECS.get(action)
            kind = spec.executor if spec is not None and spec.executor else "its"
            return (
                f"no executor is configured for {action}",
                f'the `{kind}` executor kind in actions.executors ("{action}": {kind})',
            )
        return self._approver_gap(action, namespace, workload)

    def _approver_gap(self, action: str, namespace: str, workload: str) -> tuple[str, str]:
        rules = [r for r in self.policy.approvers if r.covers(namespace, action, workload)]
        users = {u for r in rules for u in r.users}
        groups = any(r.groups for r in rules)
        where = f" in {namespace}" if namespace else ""
        if not users and not groups:
            return (
                f"no approver may approve {action}{where}",
                f"an approver for {action}{where} in approvals.approvers",
            )
        two = any(s.covers(namespace, action, workload) for s in self.policy.two_approvers)
        if two and len(users) < 2 and not groups:
            (only,) = users
            return (
                f"{action}{where} needs two approvers and only {only} may approve it",
                f"a second approver for {action}{where} in approvals.approvers",
            )
        return "", ""


def within_reach(
    diagnosis: Diagnosis, reach: Reach | None, namespace: str, workload: str = ""
) -> Diagnosis:
    """The diagnosis with each offer this pitcrew could not finish withheld, naming the
    setting it lacks; an offer waiting on a live fact is withheld too (nothing would
    run it once the fact is known). Without a `reach` (nothing configured is known:
    `pitcrew diagnose` of a file), the diagnosis as it is."""
    if reach is None:
        return diagnosis
    offers = tuple(_reached(o, reach, namespace, workload) for o in diagnosis.actions)
    if offers == diagnosis.actions:
        return diagnosis
    return dataclasses.replace(diagnosis, actions=offers)


def _reached(offer: ActionOffer, reach: Reach, namespace: str, workload: str) -> ActionOffer:
    if not offer.offered and not offer.pending_fact:
        return offer
    where = namespace or str(offer.params.get("namespace") or "")
    why, setting = reach.lacks(offer.action, where, workload)
    if not why:
        return offer
    return dataclasses.replace(
        offer, offered=False, reason=f"{why}: needs {setting}", pending_fact="", lacks=setting
    )
