"""Rendering the Helm chart in-process with helm-python-sdk (Helm's own Go code through a
C library; no helm binary), and the value sets the chart tests share."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from kubernetes_validate import utils as kube_validate

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "helm" / "pitcrew"
RELEASE = "pitcrew"
NAMESPACE = "pitcrew"
KUBE_VERSION = kube_validate.latest_version()  # the newest Kubernetes kubernetes-validate knows

TOKENS: dict[str, Any] = {"slack": {"botToken": "xoxb-test", "appToken": "xapp-test"}}
PLAYBOOK = """\
id: team-disk-full
title: Scratch disk full
category: application_error
severity: error
match:
  - name: no-space
    sources: [driver_log, worker_log]
    regex: 'OSError: \\[Errno 28\\] No space left on device'
diagnosis: The job's scratch disk is full.
examples:
  - name: a full disk
    input: "OSError: [Errno 28] No space left on device\\n"
    expect: {match: true, primary: application_error}
"""


def merged(*parts: dict[str, Any]) -> dict[str, Any]:
    """Deep merge of value dicts, later wins (like several `-f` files)."""
    out: dict[str, Any] = {}
    for part in parts:
        _merge(out, copy.deepcopy(part))
    return out


def _merge(into: dict[str, Any], part: dict[str, Any]) -> None:
    for key, value in part.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


# The shared store: two replicas on PostgreSQL, its password in a Secret of the user's.
POSTGRES_URL = "postgresql://pitcrew@pitcrew-db.databases.svc:5432/pitcrew"
SHARED: dict[str, Any] = {
    "store": {"url": POSTGRES_URL, "passwordSecret": "pitcrew-db", "passwordKey": "pw"},
    "replicaCount": 2,
}

# The value sets every chart test runs over: name -> values.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "slack-tokens": TOKENS,
    "namespaced": merged(TOKENS, {"watchNamespaces": ["ml-train", "ml-serve"]}),
    "read-only": merged(TOKENS, {"actions": {"enabled": False}}),
    "namespaced-read-only": merged(
        TOKENS, {"watchNamespaces": ["ml-train"], "actions": {"enabled": False}}
    ),
    "existing-secret": {"slack": {"existingSecret": "pitcrew-slack"}},
    "http-mode": {
        "slack": {"existingSecret": "pitcrew-slack"},
        "config": {"chat": {"kind": "slack", "slack": {"socket_mode": False}}},
    },
    "ingest-token": merged(
        TOKENS,
        {
            "ingest": {"tokenSecret": "pitcrew-ingest", "tokenKey": "bearer"},
            "config": {"http": {"ingest": True}},
        },
    ),
    "alertmanager-token": merged(
        TOKENS,
        {
            "alertmanager": {"tokenSecret": "pitcrew-alertmanager", "tokenKey": "credentials"},
            "config": {"alertmanager": {"enabled": True, "url": "https://am.example.com"}},
        },
    ),
    "persistence-off": merged(TOKENS, {"persistence": {"enabled": False}}),
    "postgresql": merged(TOKENS, SHARED),
    "postgresql-namespaced-read-only": merged(
        TOKENS,
        SHARED,
        {
            "store": {"passwordSecret": ""},
            "watchNamespaces": ["ml-train", NAMESPACE],
            "actions": {"enabled": False},
        },
    ),
    "existing-claim": merged(TOKENS, {"persistence": {"existingClaim": "pitcrew-store"}}),
    "network-policy": merged(
        TOKENS, {"networkPolicy": {"enabled": True}, "watchNamespaces": ["ml-train"]}
    ),
    "network-policy-cluster": merged(
        TOKENS,
        {
            "networkPolicy": {
                "enabled": True,
                "ingress": {"from": [{"namespaceSelector": {"matchLabels": {"name": "mon"}}}]},
                "egress": {
                    "apiServer": {"cidrs": ["10.0.0.1/32"]},
                    "slack": {
                        "cidrs": ["0.0.0.0/0", "::/0"],
                        "except": ["10.0.0.0/8", "fd00::/8"],
                    },
                    "extra": [{"to": [{"ipBlock": {"cidr": "192.168.7.0/24"}}]}],
                },
            }
        },
    ),
    "service-monitor": merged(
        TOKENS, {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}
    ),
    "extra-playbooks": merged(
        TOKENS,
        {
            "extraPlaybooks": {"team-disk-full.yaml": PLAYBOOK},
            "extraPlaybooksConfigMap": "team-playbooks",
        },
    ),
    "everything": merged(
        TOKENS,
        {
            "image": {"digest": "sha256:" + "a" * 64},
            "imagePullSecrets": [{"name": "regcred"}],
            "fullnameOverride": "crew",
            "commonLabels": {"team": "ml-platform"},
            "watchNamespaces": ["ml-train"],
            "serviceAccount": {"annotations": {"example.com/role": "pitcrew"}},
            "config": {
                "chat": {"kind": "slack"},
                "notify": {"default_channel": "ml-alerts", "group_wait": "1m"},
                "approvals": {
                    "teams": ["T0123ABC"],
                    "approvers": [{"users": ["U012ABC"], "namespaces": ["ml-*"]}],
                    "ttl": "30m",
                },
                "sources": {
                    "ray": [
                        {
                            "name": "verl",
                            "address": "http://verl-head-svc.ml-train.svc:8265",
                            "namespace": "ml-train",
                            "poll_interval": "15s",
                        }
                    ],
                    "kubernetes": {"resources": ["events", "pods", "rayjobs"]},
                },
                "actions": {"bump_memory": {"factor": 1.25, "cap": "256Gi"}},
                "store": {"retention": "30d"},
                "http": {"ingest": True},
            },
            "persistence": {"storageClass": "-", "size": "5Gi"},
            "service": {"port": 8080},
            "serviceMonitor": {"enabled": True},
            "networkPolicy": {"enabled": True},
            "extraPlaybooks": {"team-disk-full.yaml": PLAYBOOK},
            "extraEnv": [
                {
                    "name": "RAY_AUTH_TOKEN",
                    "valueFrom": {"secretKeyRef": {"name": "ray-token", "key": "token"}},
                }
            ],
            "podAnnotations": {"example.com/scrape": "true"},
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ops"}],
            "priorityClassName": "system-cluster-critical",
            "terminationGracePeriodSeconds": 60,
        },
    ),
}


@dataclass
class Rendered:
    """One release's rendered manifests (template path kept) and NOTES.txt."""

    manifests: list[tuple[str, dict[str, Any]]]
    notes: str

    @property
    def objects(self) -> list[dict[str, Any]]:
        return [obj for _, obj in self.manifests]

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return [obj for obj in self.objects if obj["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [o for o in self.kind(kind) if name is None or o["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
        return found[0]

    def container(self) -> dict[str, Any]:
        pod = self.one("Deployment")["spec"]["template"]["spec"]
        assert len(pod["containers"]) == 1
        container: dict[str, Any] = pod["containers"][0]
        return container

    def env(self) -> dict[str, str]:
        return {e["name"]: e.get("value", "") for e in self.container().get("env", [])}

    def config_text(self) -> str:
        text: str = self.one("ConfigMap", self.one("Deployment")["metadata"]["name"])["data"][
            "config.yaml"
        ]
        return text

    def config(self) -> dict[str, Any]:
        data: dict[str, Any] = yaml.safe_load(self.config_text())
        return data


# The image as docs/operations.md names it (none is published: every install names one).
DOCUMENTED_IMAGE: dict[str, Any] = {
    "image": {"repository": "registry.example.com/ml-platform/pitcrew"}
}


def render(
    chart: helm.Chart,
    values: dict[str, Any],
    namespace: str = NAMESPACE,
    name: str = RELEASE,
    *,
    image: dict[str, Any] = DOCUMENTED_IMAGE,
) -> Rendered:
    """`helm install` with `values` (and the documented image unless they name one)."""
    out = chart.render(merged(image, values), name=name, namespace=namespace, is_install=True)
    manifests = []
    notes = ""
    for template, text in sorted(out.items()):
        if template.endswith("NOTES.txt"):
            notes = text
            continue
        for obj in yaml.safe_load_all(text):
            if obj:
                manifests.append((template, obj))
    return Rendered(manifests, notes)


@pytest.fixture(scope="session")
def chart() -> Iterator[helm.Chart]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def rendered(chart: helm.Chart) -> dict[str, Rendered]:
    """Every value set, rendered once per session."""
    return {name: render(chart, values) for name, values in VALUE_SETS.items()}
