"""values.schema.json rejects bad values before anything is rendered, naming the key and
the reason: wrong types, unknown keys in closed sections (pitcrew's own config included),
negative sizes and counts, malformed names."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest

from tests.e2e.helm.conftest import (
    CHART,
    NAMESPACE,
    SHARED,
    TOKENS,
    VALUE_SETS,
    merged,
    render,
)

BAD: list[tuple[str, dict[str, Any], str]] = [
    # wrong types
    ("replicas as text", {"replicaCount": "one"}, "at '/replicaCount': got string, want integer"),
    (
        "read-only as text",
        {"actions": {"enabled": "no"}},
        "at '/actions/enabled': got string, want boolean",
    ),
    (
        "namespaces as a string",
        {"watchNamespaces": "ml-train"},
        "at '/watchNamespaces': got string, want array",
    ),
    ("port as text", {"service": {"port": "http"}}, "at '/service/port': got string, want integer"),
    (
        "tokens as a number",
        {"slack": {"botToken": 5}},
        "at '/slack/botToken': got number, want string",
    ),
    (
        "a playbook that is not text",
        {"extraPlaybooks": {"a.yaml": {"id": "a"}}},
        "at '/extraPlaybooks/a.yaml': got object, want string",
    ),
    # unknown keys where closed
    ("misspelt top-level key", {"replicas": 1}, "additional properties 'replicas' not allowed"),
    (
        "misspelt persistence key",
        {"persistence": {"sise": "1Gi"}},
        "at '/persistence': additional properties 'sise' not allowed",
    ),
    (
        "misspelt network policy key",
        {"networkPolicy": {"egress": {"slak": {}}}},
        "at '/networkPolicy/egress': additional properties 'slak' not allowed",
    ),
    (
        "misspelt pitcrew key",
        {"config": {"store": {"retension": "30d"}}},
        "at '/config/store': additional properties 'retension' not allowed",
    ),
    (
        "unknown pitcrew section",
        {"config": {"alerting": {}}},
        "at '/config': additional properties 'alerting' not allowed",
    ),
    (
        "a key the chart sets: http.port",
        {"config": {"http": {"port": 8080}}},
        "at '/config/http': additional properties 'port' not allowed",
    ),
    (
        "a key the chart sets: store.path",
        {"config": {"store": {"path": "/data/x.db"}}},
        "at '/config/store': additional properties 'path' not allowed",
    ),
    (
        "a key the chart sets: namespaces",
        {"config": {"sources": {"kubernetes": {"namespaces": ["a"]}}}},
        "at '/config/sources/kubernetes': additional properties 'namespaces' not allowed",
    ),
    (
        "a key the chart sets: actions.enabled",
        {"config": {"actions": {"enabled": False}}},
        "at '/config/actions': additional properties 'enabled' not allowed",
    ),
    (
        "a key the chart sets: playbooks",
        {"config": {"playbooks": {"dirs": ["/x"]}}},
        "at '/config': additional properties 'playbooks' not allowed",
    ),
    # negative or out-of-range sizes and counts
    (
        "negative volume size",
        {"persistence": {"size": "-1Gi"}},
        "at '/persistence/size': '-1Gi' does not match pattern",
    ),
    (
        "negative memory limit",
        {"resources": {"limits": {"memory": "-512Mi"}}},
        "at '/resources/limits/memory': '-512Mi' does not match pattern",
    ),
    (
        "negative cpu request",
        {"resources": {"requests": {"cpu": -1}}},
        "at '/resources/requests/cpu': minimum: got -1, want 0",
    ),
    (
        "negative tmp size",
        {"tmpSizeLimit": "-5Mi"},
        "at '/tmpSizeLimit': '-5Mi' does not match pattern",
    ),
    ("negative replicas", {"replicaCount": -1}, "at '/replicaCount': minimum: got -1, want 0"),
    (
        "two writers on one SQLite file",
        {"replicaCount": 2},
        "at '/replicaCount': maximum: got 2, want 1",
    ),
    (
        "three writers on one SQLite file, its volume off",
        {"replicaCount": 3, "persistence": {"enabled": False}},
        "at '/replicaCount': maximum: got 3, want 1",
    ),
    (
        "a password in the store's URL (it would be in a ConfigMap)",
        {"store": {"url": "postgresql://pitcrew:s3cret@db:5432/pitcrew"}},
        "at '/store/url': 'postgresql://pitcrew:s3cret@db:5432/pitcrew' does not match pattern",
    ),
    (
        "a store that is not PostgreSQL",
        {"store": {"url": "mysql://pitcrew@db/pitcrew"}, "replicaCount": 2},
        "at '/store/url': 'mysql://pitcrew@db/pitcrew' does not match pattern",
    ),
    (
        "a key the chart sets: store.url",
        {"config": {"store": {"url": "postgresql://pitcrew@db/pitcrew"}}},
        "at '/config/store': additional properties 'url' not allowed",
    ),
    (
        "negative grace period",
        {"terminationGracePeriodSeconds": -1},
        "at '/terminationGracePeriodSeconds': minimum: got -1, want 0",
    ),
    (
        "port out of range",
        {"service": {"port": 70000}},
        "at '/service/port': maximum: got 70,000, want 65,535",
    ),
    (
        "negative pitcrew queue",
        {"config": {"pipeline": {"queue_size": -5}}},
        "at '/config/pipeline/queue_size': minimum: got -5, want 1",
    ),
    # malformed values
    (
        "a namespace that is not a DNS label",
        {"watchNamespaces": ["ML_Train"]},
        "at '/watchNamespaces/0': 'ML_Train' does not match pattern",
    ),
    (
        "a duration pitcrew cannot read",
        {"config": {"notify": {"group_wait": "soon"}}},
        "at '/config/notify/group_wait': 'soon' does not match pattern",
    ),
    (
        "a chat pitcrew does not have",
        {"config": {"chat": {"kind": "teams"}}},
        "at '/config/chat/kind': value must be one of 'auto', 'console', 'slack'",
    ),
    (
        "a playbook file name",
        {"extraPlaybooks": {"notes.txt": "x"}},
        "invalid propertyName 'notes.txt'",
    ),
    (
        "an image digest",
        {"image": {"digest": "latest"}},
        "at '/image/digest': 'latest' does not match pattern",
    ),
    (
        "a pull policy",
        {"image": {"pullPolicy": "Sometimes"}},
        "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'",
    ),
    (
        "a Prometheus interval",
        {"serviceMonitor": {"interval": "30 seconds"}},
        "at '/serviceMonitor/interval': '30 seconds' does not match pattern",
    ),
]


@pytest.mark.parametrize(("values", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_values_are_rejected_with_the_key_and_reason(
    chart: helm.Chart, values: dict[str, Any], message: str
):
    with pytest.raises(helm.HelmValuesError) as rejected:
        chart.validate_schema(merged(TOKENS, values))
    assert message in str(rejected.value)
    with pytest.raises(helm.HelmValuesError) as at_install:  # `helm install` checks the same
        render(chart, merged(TOKENS, values))
    assert message in str(at_install.value)


def test_lint_refuses_two_replicas_on_sqlite_and_passes_them_on_postgresql():
    report = helm.lint(CHART, {"replicaCount": 2}, strict=True, namespace=NAMESPACE)
    assert any("at '/replicaCount': maximum: got 2, want 1" in e for e in report["errors"])
    shared = helm.lint(CHART, merged(TOKENS, SHARED), strict=True, namespace=NAMESPACE)
    assert shared["errors"] == []


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_value_set_is_accepted(chart: helm.Chart, name: str):
    chart.validate_schema(VALUE_SETS[name])


def test_null_removes_a_default_map_entry(chart: helm.Chart):
    values = merged(TOKENS, {"config": {"actions": {"executors": {"ray.*": None}}}})
    chart.validate_schema(values)
    executors = render(chart, values).config()["actions"]["executors"]
    assert executors == {"k8s.*": "kubernetes"}


def test_the_schema_is_closed_wherever_the_chart_owns_the_shape(chart: helm.Chart):
    """Every object of the schema is closed, except the Kubernetes API objects passed
    through as they are (the API server validates those)."""
    schema = chart.schema
    assert schema is not None
    passthrough = {
        "/properties/podSecurityContext",
        "/properties/securityContext",
        "/properties/affinity",
        "/properties/tolerations/items",
        "/properties/extraEnv/items/properties/valueFrom",
        "/properties/networkPolicy/properties/ingress/properties/from/items",
        "/properties/networkPolicy/properties/egress/properties/extra/items",
        "/properties/networkPolicy/properties/egress/properties/rayDashboards/properties/namespaceSelector",
        "/properties/networkPolicy/properties/egress/properties/rayDashboards/properties/podSelector",
        "/properties/networkPolicy/properties/egress/properties/dns/properties/namespaceSelector",
        "/properties/networkPolicy/properties/egress/properties/dns/properties/podSelector",
    }
    open_objects = []

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
        if is_object and "additionalProperties" not in node and "$ref" not in node:
            open_objects.append(path)
        for key, value in node.items():
            if key in ("properties", "definitions"):
                for sub, child in value.items():
                    walk(child, f"{path}/{key}/{sub}")
            elif isinstance(value, dict):
                walk(value, f"{path}/{key}")

    walk(schema, "")
    assert sorted(open_objects) == sorted(passthrough)
