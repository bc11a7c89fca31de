"""The chart renders, lints strictly and yields valid Kubernetes objects for every value set;
the Deployment is hardened and its mounts, environment and ports agree with the config."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from tests.e2e.helm.conftest import (
    CHART,
    KUBE_VERSION,
    NAMESPACE,
    POSTGRES_URL,
    RELEASE,
    TOKENS,
    VALUE_SETS,
    Rendered,
    merged,
    render,
)

# CRDs kubernetes-validate has no schema for; each is checked structurally instead.
CRD_KINDS = {"ServiceMonitor": "monitoring.coreos.com/v1"}
EXPECTED_KINDS = {
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Secret",
    "ConfigMap",
    "PersistentVolumeClaim",
    "PodDisruptionBudget",
    "Deployment",
    "Service",
    "NetworkPolicy",
    *CRD_KINDS,
}


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_manifest_validates_against_kubernetes(name: str, rendered: dict[str, Rendered]):
    release = rendered[name]
    assert release.objects, "nothing rendered"
    for template, obj in release.manifests:
        assert obj["kind"] in EXPECTED_KINDS, f"{template}: unexpected kind {obj['kind']}"
        if obj["kind"] in CRD_KINDS:
            # kubernetes-validate ships only the built-in API's schemas; a CRD's is checked
            # by test_service_monitor_selects_the_service instead.
            assert obj["apiVersion"] == CRD_KINDS[obj["kind"]]
            continue
        try:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(p) for p in error.path)
            pytest.fail(f"{name}: {template}: {obj['kind']}: {path}: {error.message}")


@pytest.mark.parametrize("name", VALUE_SETS)
def test_lint_is_clean_in_strict_mode(name: str):
    report = helm.lint(
        CHART, VALUE_SETS[name], strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}"
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # warnings and errors
    assert report["errors"] == [], report
    assert problems == []
    assert report["total_charts_linted"] == 1


def test_names_and_namespaces(rendered: dict[str, Rendered]):
    release = rendered["slack-tokens"]
    for obj in release.objects:
        meta = obj["metadata"]
        assert meta["labels"]["app.kubernetes.io/instance"] == RELEASE
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            assert "namespace" not in meta
        elif obj["kind"] not in ("Role", "RoleBinding"):
            assert meta["namespace"] == NAMESPACE


def test_cluster_scoped_names_differ_between_two_installs(chart: helm.Chart):
    staging = render(chart, TOKENS, namespace="pitcrew-staging")
    production = render(chart, TOKENS, namespace="pitcrew-prod")
    assert (
        staging.one("ClusterRole")["metadata"]["name"]
        != (production.one("ClusterRole")["metadata"]["name"])
    )


def test_the_deployment_is_hardened(rendered: dict[str, Rendered]):
    release = rendered["slack-tokens"]
    deployment = release.one("Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    container = release.container()
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}  # SQLite: one writer at a time
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security.get("privileged", False) is False
    resources = container["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"])
    assert "memory" in resources["limits"]
    assert pod["automountServiceAccountToken"] is True
    assert pod["serviceAccountName"] == release.one("ServiceAccount")["metadata"]["name"]
    assert container.get("command") is None
    assert container.get("args") is None


def test_probes_ports_and_the_service_agree_with_the_config(rendered: dict[str, Rendered]):
    for name in ("slack-tokens", "everything"):
        release = rendered[name]
        config = release.config()
        container = release.container()
        port = {p["name"]: p["containerPort"] for p in container["ports"]}["http"]
        assert port == config["http"]["port"]
        assert config["http"]["host"] == "0.0.0.0"
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
        service = release.one("Service")
        assert service["spec"]["publishNotReadyAddresses"] is True  # metrics while unready
        assert service["spec"]["ports"] == [
            {"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}
        ]
        template_labels = release.one("Deployment")["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= template_labels.items()


def test_graceful_termination_outlasts_the_drain(rendered: dict[str, Rendered]):
    from bot.core.durations import parse_duration

    release = rendered["slack-tokens"]
    pipeline = release.config().get("pipeline", {})
    drain = parse_duration(str(pipeline.get("drain_timeout", "10s")))
    flush = parse_duration(str(pipeline.get("flush_timeout", "5s")))
    grace = release.one("Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > (drain + flush).total_seconds()


def _mounts(release: Rendered) -> dict[str, dict[str, Any]]:
    """mountPath -> the volume mounted there."""
    pod = release.one("Deployment")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {}
    for mount in release.container()["volumeMounts"]:
        assert mount["name"] in volumes, f"no volume {mount['name']}"
        assert "subPath" not in mount
        mounts[mount["mountPath"]] = {**volumes[mount["name"]], "readOnly": mount.get("readOnly")}
    return mounts


def _volume_at(release: Rendered, path: str) -> dict[str, Any]:
    """The volume holding `path` (the deepest mount above it)."""
    mounts = _mounts(release)
    above = [m for m in mounts if PurePosixPath(path).is_relative_to(m)]
    assert above, f"{path} is on the read-only root filesystem"
    return mounts[max(above, key=len)]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_path_pitcrew_uses_is_mounted(name: str, rendered: dict[str, Rendered]):
    release = rendered[name]
    env = release.env()
    config = release.config()
    config_volume = _volume_at(release, env["PITCREW_CONFIG"])
    assert config_volume["configMap"]["name"] == release.one("Deployment")["metadata"]["name"]
    assert PurePosixPath(env["PITCREW_CONFIG"]).name == "config.yaml"
    store = _volume_at(release, config["store"]["path"])
    assert store["readOnly"] is not True
    values = merged({"persistence": {"enabled": True, "existingClaim": ""}}, VALUE_SETS[name])
    if values.get("store", {}).get("url"):  # PostgreSQL: the volume is scratch
        assert store["emptyDir"]["sizeLimit"]
        assert not release.kind("PersistentVolumeClaim")
    elif values["persistence"]["enabled"]:
        claim = store["persistentVolumeClaim"]["claimName"]
        if values["persistence"]["existingClaim"]:
            assert claim == values["persistence"]["existingClaim"]
            assert not release.kind("PersistentVolumeClaim")
        else:
            assert claim == release.one("PersistentVolumeClaim")["metadata"]["name"]
    else:
        assert "emptyDir" in store
        assert not release.kind("PersistentVolumeClaim")
    for writable in (env["PITCREW_CACHE_DIR"], "/tmp"):
        volume = _volume_at(release, writable)
        assert "emptyDir" in volume
        assert volume["emptyDir"]["sizeLimit"]
    for variable, path in env.items():
        if variable.endswith("_FILE"):
            secret = _volume_at(release, path)["secret"]
            assert PurePosixPath(path).name in [item["path"] for item in secret["items"]]
    for directory in config.get("playbooks", {}).get("dirs", []):
        assert "projected" in _volume_at(release, directory)


def test_slack_tokens_become_a_secret_mounted_as_files(rendered: dict[str, Rendered]):
    release = rendered["slack-tokens"]
    secret = release.one("Secret")
    assert set(secret["data"]) == {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"}
    env = release.env()
    assert {k for k in env if k.startswith("SLACK_")} == {
        "SLACK_BOT_TOKEN_FILE",
        "SLACK_APP_TOKEN_FILE",
    }
    volume = _volume_at(release, env["SLACK_BOT_TOKEN_FILE"])
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert volume["readOnly"] is True
    assert "xoxb-test" not in yaml.safe_dump(release.one("Deployment"))


def test_the_ingest_token_comes_from_its_secret_as_a_file(rendered: dict[str, Rendered]):
    release = rendered["ingest-token"]
    env = release.env()
    assert env["PITCREW_INGEST_TOKEN_FILE"] == "/var/run/secrets/pitcrew/ingest/token"
    volume = _volume_at(release, env["PITCREW_INGEST_TOKEN_FILE"])
    assert volume["secret"]["secretName"] == "pitcrew-ingest"
    assert volume["secret"]["items"] == [{"key": "bearer", "path": "token"}]
    assert volume["readOnly"] is True
    assert "PITCREW_INGEST_TOKEN_FILE" not in rendered["slack-tokens"].env()


def test_the_alertmanager_token_comes_from_its_secret_as_a_file(rendered: dict[str, Rendered]):
    release = rendered["alertmanager-token"]
    env = release.env()
    assert env["PITCREW_ALERTMANAGER_TOKEN_FILE"] == "/var/run/secrets/pitcrew/alertmanager/token"
    volume = _volume_at(release, env["PITCREW_ALERTMANAGER_TOKEN_FILE"])
    assert volume["secret"]["secretName"] == "pitcrew-alertmanager"
    assert volume["secret"]["items"] == [{"key": "credentials", "path": "token"}]
    assert volume["readOnly"] is True
    assert "PITCREW_ALERTMANAGER_TOKEN_FILE" not in rendered["slack-tokens"].env()


def test_an_existing_secret_is_used_and_none_is_created(rendered: dict[str, Rendered]):
    release = rendered["existing-secret"]
    assert not release.kind("Secret")
    env = release.env()
    volume = _volume_at(release, env["SLACK_BOT_TOKEN_FILE"])
    assert volume["secret"]["secretName"] == "pitcrew-slack"
    assert [i["key"] for i in volume["secret"]["items"]] == ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"]


def test_http_mode_needs_the_signing_secret_not_the_app_token(rendered: dict[str, Rendered]):
    env = rendered["http-mode"].env()
    assert "SLACK_SIGNING_SECRET_FILE" in env
    assert "SLACK_APP_TOKEN_FILE" not in env


def test_without_tokens_the_console_chat_runs(rendered: dict[str, Rendered]):
    release = rendered["defaults"]
    assert not release.kind("Secret")
    assert not any(k.startswith("SLACK_") for k in release.env())
    assert release.config()["chat"]["kind"] == "auto"
    assert "console chat" in release.notes
    assert "pitcrew approve" in release.notes


@pytest.mark.parametrize(
    ("values", "missing"),
    [
        ({"config": {"chat": {"kind": "slack"}}}, "slack.botToken and slack.appToken"),
        (
            {"config": {"chat": {"kind": "slack"}}, "slack": {"botToken": "xoxb-1"}},
            "slack.appToken",
        ),
        (
            {
                "config": {"chat": {"kind": "slack", "slack": {"socket_mode": False}}},
                "slack": {"botToken": "xoxb-1"},
            },
            "slack.signingSecret",
        ),
    ],
)
def test_the_slack_chat_without_its_tokens_fails_saying_what_to_set(
    chart: helm.Chart, values: dict[str, Any], missing: str
):
    with pytest.raises(helm.HelmError) as failure:
        render(chart, values)
    message = str(failure.value)
    assert f"the Slack chat needs its tokens: set {missing}" in message
    assert "slack.existingSecret" in message


def test_persistence_off_is_an_empty_dir_with_a_warning(rendered: dict[str, Rendered]):
    release = rendered["persistence-off"]
    assert "WARNING: persistence is off" in release.notes
    assert "LOST" in release.notes
    assert "WARNING" not in rendered["slack-tokens"].notes


def test_storage_class_dash_means_no_class(rendered: dict[str, Rendered]):
    claim = rendered["everything"].one("PersistentVolumeClaim")
    assert claim["spec"]["storageClassName"] == ""
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert "storageClassName" not in rendered["slack-tokens"].one("PersistentVolumeClaim")["spec"]


def test_notes_say_how_to_check_the_bot(rendered: dict[str, Rendered]):
    notes = rendered["slack-tokens"].notes
    assert "/pitcrew status" in notes
    assert f"kubectl -n {NAMESPACE} rollout status deployment/{RELEASE}" in notes
    assert "/readyz" in notes
    assert "Nobody can approve" in notes
    assert "Nobody can approve" not in rendered["everything"].notes
    assert "#ml-alerts" in rendered["everything"].notes
    assert "Read-only install" in rendered["read-only"].notes


def test_a_config_change_restarts_the_pod(chart: helm.Chart):
    def checksum(values: dict[str, Any]) -> str:
        pod = render(chart, values).one("Deployment")["spec"]["template"]
        annotation: str = pod["metadata"]["annotations"]["checksum/config"]
        return annotation

    before = checksum(TOKENS)
    after = checksum(merged(TOKENS, {"config": {"notify": {"default_channel": "elsewhere"}}}))
    assert before != after
    assert checksum(TOKENS) == before


def test_the_image_is_the_app_version_or_a_digest(rendered: dict[str, Rendered]):
    assert rendered["slack-tokens"].container()["image"].endswith(":0.1.0")
    assert rendered["everything"].container()["image"].endswith("@sha256:" + "a" * 64)


def test_network_policy_allows_only_what_pitcrew_needs(rendered: dict[str, Rendered]):
    policy = rendered["network-policy"].one("NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert (
        policy["podSelector"]["matchLabels"]
        == (rendered["network-policy"].one("Service")["spec"]["selector"])
    )
    assert policy["ingress"] == [{"ports": [{"port": "http", "protocol": "TCP"}]}]
    dns, api, slack, ray = policy["egress"]
    assert {(p["port"], p["protocol"]) for p in dns["ports"]} == {(53, "UDP"), (53, "TCP")}
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert [p["port"] for p in api["ports"]] == [443, 6443]
    assert "to" not in api  # any address, on the API server's ports only
    assert [p["port"] for p in slack["ports"]] == [443]
    assert slack["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0"
    assert "10.0.0.0/8" in slack["to"][0]["ipBlock"]["except"]
    assert [p["port"] for p in ray["ports"]] == [8265]
    peer = ray["to"][0]
    assert peer["podSelector"] == {"matchLabels": {"ray.io/node-type": "head"}}
    assert peer["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml-train"]}
    ]


def test_network_policy_options(rendered: dict[str, Rendered]):
    policy = rendered["network-policy-cluster"].one("NetworkPolicy")["spec"]
    assert policy["ingress"][0]["from"] == [{"namespaceSelector": {"matchLabels": {"name": "mon"}}}]
    _, api, slack, ray, extra = policy["egress"]
    assert api["to"] == [{"ipBlock": {"cidr": "10.0.0.1/32"}}]
    assert slack["to"] == [  # an exception must lie inside its block: same address family
        {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}},
        {"ipBlock": {"cidr": "::/0", "except": ["fd00::/8"]}},
    ]
    assert ray["to"][0]["namespaceSelector"] == {}  # the whole cluster is watched
    assert extra == {"to": [{"ipBlock": {"cidr": "192.168.7.0/24"}}]}
    assert not rendered["slack-tokens"].kind("NetworkPolicy")


def test_service_monitor_selects_the_service(rendered: dict[str, Rendered]):
    release = rendered["service-monitor"]
    monitor = release.one("ServiceMonitor")
    service = release.one("Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    spec = monitor["spec"]
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert set(spec) == {"selector", "namespaceSelector", "endpoints"}
    (endpoint,) = spec["endpoints"]
    assert endpoint["port"] in [p["name"] for p in service["spec"]["ports"]]
    assert endpoint["path"] == "/metrics"
    assert set(endpoint) == {"port", "path", "interval", "scrapeTimeout"}
    assert not rendered["slack-tokens"].kind("ServiceMonitor")


def test_extra_playbooks_are_one_directory(rendered: dict[str, Rendered]):
    release = rendered["extra-playbooks"]
    config = release.config()
    (directory,) = config["playbooks"]["dirs"]
    volume = _volume_at(release, directory)
    sources = [s["configMap"]["name"] for s in volume["projected"]["sources"]]
    shipped = release.one("ConfigMap", f"{RELEASE}-playbooks")
    assert sources == [shipped["metadata"]["name"], "team-playbooks"]
    assert list(shipped["data"]) == ["team-disk-full.yaml"]
    assert "playbooks" not in rendered["slack-tokens"].config()


# -- the two stores: SQLite (one replica) and PostgreSQL (replicas share it) ------------------


@pytest.mark.parametrize("name", [n for n in VALUE_SETS if not n.startswith("postgresql")])
def test_sqlite_is_one_replica_recreated_on_its_volume(name: str, rendered: dict[str, Rendered]):
    release = rendered[name]
    spec = release.one("Deployment")["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    assert not release.kind("PodDisruptionBudget")
    assert not any(r["metadata"]["name"].endswith("-leader-election") for r in release.kind("Role"))
    assert "url" not in release.config()["store"]
    assert "leader_election" not in release.config()  # one replica, no Lease
    assert "PITCREW_STORE_PASSWORD_FILE" not in release.env()


@pytest.mark.parametrize("name", ["postgresql", "postgresql-namespaced-read-only"])
def test_postgresql_is_two_replicas_rolled_under_a_budget(name: str, rendered: dict[str, Rendered]):
    release = rendered[name]
    deployment = release.one("Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    budget = release.one("PodDisruptionBudget")
    assert budget["metadata"]["namespace"] == NAMESPACE
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"] == spec["selector"]
    assert release.config()["store"]["url"] == POSTGRES_URL
    fullname = deployment["metadata"]["name"]
    assert release.config()["leader_election"] == {
        "enabled": True,
        "namespace": NAMESPACE,
        "name": fullname,  # the Lease the chart's Role lets the replicas get and update
    }
    assert not release.kind("PersistentVolumeClaim")
    assert "postgresql://pitcrew@pitcrew-db.databases.svc:5432/pitcrew" in release.notes
    assert "shared by 2 replica(s)" in release.notes


def test_the_postgresql_password_is_a_file_from_the_users_secret(rendered: dict[str, Rendered]):
    release = rendered["postgresql"]
    env = release.env()
    assert env["PITCREW_STORE_PASSWORD_FILE"] == "/var/run/secrets/pitcrew/store/password"
    volume = _volume_at(release, env["PITCREW_STORE_PASSWORD_FILE"])
    assert volume["secret"] == {
        "secretName": "pitcrew-db",
        "defaultMode": 288,
        "items": [{"key": "pw", "path": "password"}],
    }
    assert "PITCREW_STORE_PASSWORD_FILE" not in rendered["postgresql-namespaced-read-only"].env()


@pytest.mark.parametrize("name", ["postgresql", "postgresql-namespaced-read-only"])
def test_postgresql_grants_the_leases_in_the_release_namespace(
    name: str, rendered: dict[str, Rendered]
):
    release = rendered[name]
    role = release.one("Role", f"{RELEASE}-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        }
    ]
    binding = release.one("RoleBinding", f"{RELEASE}-leader-election")
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
