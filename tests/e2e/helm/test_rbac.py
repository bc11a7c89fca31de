"""The chart grants exactly the permissions docs/rbac.md lists, never a wildcard; a read-only
install gets no write verb; watched namespaces get Roles, and only what is cluster-scoped
stays in the ClusterRole."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.e2e.helm.conftest import NAMESPACE, ROOT, VALUE_SETS, Rendered

DOC = ROOT / "docs" / "rbac.md"
Grant = tuple[str, str, str]  # (API group, resource, verb)
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
ESCALATING_VERBS = {"escalate", "bind", "impersonate", "approve", "sign"}
CLUSTER_SCOPED = {("", "nodes")}
CLUSTER_WIDE_EVEN_WHEN_NAMESPACED = {("", "pods", "list")}  # k8s.reschedule_gpu_pool


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]*)`", cell) or [cell]


def _table(section: str) -> set[Grant]:
    """The grants of the first table under the `## <section>` heading of docs/rbac.md."""
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"^## {section}\b.*?\n(\|.*?)(?:\n\n|\Z)", text, re.S | re.M)
    assert match, f"docs/rbac.md has no table under '## {section}'"
    header, _, *rows = match.group(1).splitlines()
    columns = [c.lower() for c in _cells(header)]
    assert columns[:3] == ["api group", "resource", "verbs"], columns
    grants = set()
    for row in rows:
        group_cell, resource_cell, verb_cell = _cells(row)[:3]
        group = _names(group_cell)[0].strip('"')  # `""` (core) is the empty group
        for resource in _names(resource_cell):
            for verb in verb_cell.split(","):
                grants.add((group, resource, verb.strip()))
    return grants


READ = _table("Read")
WRITE = _table("Write")
LEASE = _table("Leader election")


def grants(rules: list[dict[str, Any]]) -> set[Grant]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_doc_tables_are_parsed_as_its_cluster_role_example():
    """The tables are what this file parses; the YAML example under them must agree (so
    the parser reads the tables right, and the doc does not contradict itself)."""
    block = re.search(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block is not None
    example = yaml.safe_load(block.group(1))
    assert grants(example["rules"]) == READ | WRITE
    assert READ
    assert WRITE
    assert not READ & WRITE
    assert {verb for _, _, verb in WRITE} <= WRITE_VERBS
    assert not {verb for _, _, verb in READ} & WRITE_VERBS


def _rules(release: Rendered) -> list[dict[str, Any]]:
    return [
        rule for kind in ("ClusterRole", "Role") for r in release.kind(kind) for rule in r["rules"]
    ]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_no_wildcards_and_nothing_beyond_the_doc(name: str, rendered: dict[str, Rendered]):
    rules = _rules(rendered[name])
    assert rules
    for rule in rules:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule  # no resourceNames, URLs
        for field in ("apiGroups", "resources", "verbs"):
            assert not any("*" in item for item in rule[field]), rule
    granted = grants(rules)
    shared = bool(VALUE_SETS[name].get("store", {}).get("url"))
    assert granted <= READ | WRITE | (LEASE if shared else set())
    assert (granted & LEASE == LEASE) is shared  # the Lease only for replicas sharing a store
    assert not {verb for _, _, verb in granted} & ESCALATING_VERBS


def test_whole_cluster_is_one_cluster_role_with_exactly_the_doc(rendered: dict[str, Rendered]):
    release = rendered["slack-tokens"]
    assert not release.kind("Role")
    assert not release.kind("RoleBinding")
    assert grants(release.one("ClusterRole")["rules"]) == READ | WRITE


@pytest.mark.parametrize("name", ["read-only", "namespaced-read-only"])
def test_read_only_install_has_no_write_verb(name: str, rendered: dict[str, Rendered]):
    granted = grants(_rules(rendered[name]))
    assert granted == READ
    assert not {verb for _, _, verb in granted} & WRITE_VERBS
    assert rendered[name].config()["actions"]["enabled"] is False


def test_namespaced_install_uses_a_role_per_namespace(rendered: dict[str, Rendered]):
    release = rendered["namespaced"]
    namespaces = VALUE_SETS["namespaced"]["watchNamespaces"]
    roles = {r["metadata"]["namespace"]: r for r in release.kind("Role")}
    assert sorted(roles) == sorted(namespaces)
    namespaced = {g for g in READ | WRITE if g[:2] not in CLUSTER_SCOPED}
    for role in roles.values():
        assert grants(role["rules"]) == namespaced
    cluster = grants(release.one("ClusterRole")["rules"])
    cluster_scoped = {g for g in READ | WRITE if g[:2] in CLUSTER_SCOPED}
    assert cluster == cluster_scoped | CLUSTER_WIDE_EVEN_WHEN_NAMESPACED
    assert grants(_rules(release)) == READ | WRITE
    assert release.config()["sources"]["kubernetes"]["namespaces"] == namespaces


def test_namespaced_read_only_keeps_only_nodes_cluster_wide(rendered: dict[str, Rendered]):
    release = rendered["namespaced-read-only"]
    cluster = grants(release.one("ClusterRole")["rules"])
    assert cluster == {g for g in READ if g[:2] in CLUSTER_SCOPED}
    (role,) = release.kind("Role")
    assert grants(role["rules"]) == {g for g in READ if g[:2] not in CLUSTER_SCOPED}


@pytest.mark.parametrize("name", VALUE_SETS)
def test_bindings_bind_the_pods_service_account(name: str, rendered: dict[str, Rendered]):
    release = rendered[name]
    account = release.one("ServiceAccount")["metadata"]["name"]
    assert release.one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == account
    roles = {
        (r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"])
        for r in release.kind("ClusterRole") + release.kind("Role")
    }
    bindings = release.kind("ClusterRoleBinding") + release.kind("RoleBinding")
    assert len(bindings) == len(roles)
    for binding in bindings:
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        assert (ref["kind"], namespace, ref["name"]) in roles
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
        ]
