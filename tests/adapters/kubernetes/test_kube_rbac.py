"""docs/rbac.md grants exactly what the Kubernetes source and executors declare they need."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from bot.adapters.kuberay.rerun import RBAC as KUBERAY_ACTIONS
from bot.adapters.kuberay.rerun import RERUN_EXECUTORS
from bot.adapters.kubernetes.executors import EXECUTORS as K8S_EXECUTORS
from bot.adapters.kubernetes.executors import RBAC as K8S_ACTIONS
from bot.adapters.kubernetes.lease import RULES as LEASE
from bot.adapters.kubernetes.source import RBAC as SOURCE
from bot.core.actions.specs import ACTION_SPECS

ACTIONS = (*K8S_ACTIONS, *KUBERAY_ACTIONS)
EXECUTORS = {**K8S_EXECUTORS, **RERUN_EXECUTORS}
DOC = Path(__file__).resolve().parents[3] / "docs" / "rbac.md"


def grants(rules: object) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules  # type: ignore[attr-defined]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_documented_cluster_role_is_what_the_code_declares() -> None:
    block = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    role = yaml.safe_load(block.group(1))
    declared = {
        (rule.group, resource, verb)
        for rule in (*SOURCE, *ACTIONS)
        for resource in rule.resources
        for verb in rule.verbs
    }
    assert grants(role["rules"]) == declared


def test_every_executor_is_in_the_doc_and_its_spec_declares_an_event_write() -> None:
    text = DOC.read_text()
    for action in EXECUTORS:
        assert action in text
        rbac = ACTION_SPECS[action].rbac
        assert any(r.resources == ("events",) and "create" in r.verbs for r in rbac)


def _table(section: str) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of the table under `## <section>` in docs/rbac.md."""
    match = re.search(rf"^## {section}\b.*?\n(\|.*?)(?:\n\n|\Z)", DOC.read_text(), re.S | re.M)
    assert match is not None
    found = set()
    for row in match.group(1).splitlines()[2:]:
        group, resources, verbs = (c.strip() for c in row.strip().strip("|").split("|")[:3])
        for resource in re.findall(r"`([^`]*)`", resources):
            for verb in verbs.split(","):
                found.add((re.findall(r"`([^`]*)`", group)[0].strip('"'), resource, verb.strip()))
    return found


def test_the_read_and_write_tables_are_what_the_code_declares() -> None:
    declared = {
        (rule.group, resource, verb)
        for rule in (*SOURCE, *ACTIONS)
        for resource in rule.resources
        for verb in rule.verbs
    }
    read, write = _table("Read"), _table("Write")
    assert read | write == declared
    assert all(verb in ("get", "list", "watch") for _, _, verb in read)
    assert all(verb in ("create", "patch", "delete") for _, _, verb in write)


def test_the_leader_election_table_is_what_the_lease_needs() -> None:
    declared = {(r.group, res, verb) for r in LEASE for res in r.resources for verb in r.verbs}
    assert _table("Leader election") == declared


ACTIONS_DOC = DOC.parent / "actions.md"


def test_the_readme_action_table_lists_every_action() -> None:
    match = re.search(r"^## Actions\n(.*?)(?=^## |\Z)", ACTIONS_DOC.read_text(), re.S | re.M)
    assert match is not None
    listed = re.findall(r"^\| `([a-z0-9_.]+)` \|", match.group(1), re.M)
    assert sorted(listed) == sorted(ACTION_SPECS)
