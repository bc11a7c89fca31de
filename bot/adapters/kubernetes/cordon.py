"""k8s.cordon_node: mark a node that reports a GPU fault unschedulable; never drain it.

Why this exists: a GPU with Xid errors or ECC faults keeps failing every new pod the
scheduler puts there (`gpu_fault`). Cordoning (`spec.unschedulable: true`) stops new
pods landing on it; what runs there keeps running (draining would kill training jobs
mid-step, so pitcrew never does it: a person decides). The preview lists the pods on
the node so the approver sees who shares it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.adapters.kubernetes.api import NODES, PODS
from bot.adapters.kubernetes.base import KubeExecutor
from bot.adapters.kubernetes.errors import CHECK_ERRORS, reason_of
from bot.adapters.kubernetes.templates import (
    PROPOSAL_ANNOTATION,
    Site,
    annotation_ops,
    proposal_of,
    set_ops,
    test_op,
)
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.params import CordonNode
from bot.core.actions.specs import ACTION_SPECS
from bot.core.actions.step import Step
from bot.core.errors import ActionRefusedError
from bot.core.inputs.values import as_list, as_map, text_at

FACT = "k8s.node_schedulable"
_SHOWN_PODS = 10


def node_site(node: Mapping[str, Any]) -> Site:
    name = text_at(node, "metadata", "name")
    return Site("Node", "", name, node, "", "node", 0, "", ())


def pod_text(pod: Mapping[str, Any]) -> str:
    metadata = as_map(pod.get("metadata"))
    owner = next(
        (
            f" ({text_at(r, 'kind')} {text_at(r, 'name')})"
            for r in as_list(metadata.get("ownerReferences"))
            if as_map(r).get("controller") is True
        ),
        "",
    )
    ray = text_at(metadata, "labels", "ray.io/cluster")
    owner = f" (RayCluster {ray})" if ray else owner
    return f"{text_at(metadata, 'namespace')}/{text_at(metadata, 'name')}{owner}"


class CordonNodeExecutor(KubeExecutor):
    """Cordon one node (`spec.unschedulable: true`); pods there keep running."""

    action = "k8s.cordon_node"

    def _node(self, name: str) -> dict[str, Any]:
        node = self.api.get(NODES, None, name)
        if node is None:
            raise ActionRefusedError(f"node {name} does not exist")
        return node

    def _running_on(self, name: str) -> list[str]:
        pods = self.api.list_all(PODS, field_selector=f"spec.nodeName={name}")
        return [
            pod_text(pod)
            for pod in pods
            if text_at(pod, "spec", "nodeName") == name
            and text_at(pod, "status", "phase") not in ("Succeeded", "Failed")
        ]

    def preview(self, name: str) -> str:
        running = self._running_on(name)
        shown = ", ".join(running[:_SHOWN_PODS]) + (
            f" and {len(running) - _SHOWN_PODS} more" if len(running) > _SHOWN_PODS else ""
        )
        lines = [
            ACTION_SPECS[self.action].preview(CordonNode(name=name)),
            f"running there ({len(running)} pods, they keep running): {shown or 'nothing'}",
            ACTION_SPECS[self.action].impact,
        ]
        return "\n".join(lines)

    def look(self, params: Mapping[str, Any]) -> tuple[dict[str, bool], str]:
        p = CordonNode.check(params)
        try:
            node = self._node(p.name)
            if as_map(node.get("spec")).get("unschedulable") is True:
                return {FACT: False}, f"withheld: node {p.name} is already cordoned"
            return {FACT: True}, self.preview(p.name)
        except ActionRefusedError as error:
            return {FACT: False}, f"withheld: {error}"
        except CHECK_ERRORS as error:
            return {FACT: False}, f"withheld: {reason_of(error)}"

    def check(self, step: Step, plan: Any) -> LiveCheck:
        """As every check; a node found cordoned is looked at again for this proposal's
        own mark (a run a failover cut short)."""
        facts, diff = plan
        if facts.get(FACT) is False and step.proposal_id:
            node = self.api.get(NODES, None, CordonNode.check(step.params).name)
            done = self.done_by(step, node) if node is not None else ""
            return self.live(step, facts, diff, done=done)
        return self.live(step, facts, diff)

    def execute(self, step: Step, plan: Any) -> str:
        params, proposal_id, approver = step.params, step.proposal_id, step.approver
        p = CordonNode.check(params)
        node = self._node(p.name)
        if proposal_of(node) == proposal_id:
            return f"already applied by proposal {proposal_id}"
        if as_map(node.get("spec")).get("unschedulable") is True:
            raise ActionRefusedError(f"node {p.name} is already cordoned; nothing was changed")
        site = node_site(node)
        ops = [test_op("/metadata/uid", text_at(node, "metadata", "uid"))]
        ops += set_ops(node, "/spec/unschedulable", True)
        ops += annotation_ops(node, PROPOSAL_ANNOTATION, proposal_id)
        dry = self._apply(site, ops, "spec.unschedulable was not set")
        what = f"node {p.name}: spec.unschedulable → true (not drained)"
        self._record("Node", node, proposal_id, approver, what)
        return "\n".join([what, dry, ACTION_SPECS[self.action].impact])

    def verified(self, params: Mapping[str, Any]) -> bool:
        p = CordonNode.check(params)
        node = self.api.get(NODES, None, p.name)
        return node is not None and as_map(node.get("spec")).get("unschedulable") is True
