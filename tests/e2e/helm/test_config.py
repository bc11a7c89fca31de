"""The config file the chart renders is one pitcrew accepts, with the pod's environment:
the settings model loads it, `pitcrew config check` passes it, and what the chart sets
(store on the volume, HTTP port, in-cluster credentials, watched namespaces, the actions
switch, the playbook directory) is what the Deployment provides."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.app.cli_app import app
from bot.app.settings import loading as config
from bot.app.settings.sections import Settings
from tests.e2e.helm.conftest import VALUE_SETS, Rendered, merged


def _environment(release: Rendered, tmp_path: Path) -> dict[str, str]:
    """The container's environment, with each `*_FILE` secret written under tmp_path (as
    the mounted Secret would provide it)."""
    environ = {}
    for name, value in release.env().items():
        if name.endswith("_FILE"):
            token = tmp_path / PurePosixPath(value).name
            token.write_text(f"{name.lower()}-value\n", encoding="utf-8")
            environ[name] = str(token)
        elif name not in ("PITCREW_CONFIG", "PITCREW_CACHE_DIR", "HOME"):
            environ[name] = value
    return environ


def _load(release: Rendered, tmp_path: Path) -> tuple[Settings, Path, dict[str, str]]:
    file = tmp_path / "config.yaml"
    file.write_text(release.config_text(), encoding="utf-8")
    environ = _environment(release, tmp_path)
    return config.load(file, environ), file, environ


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_rendered_config_loads_with_the_pods_environment(
    name: str, rendered: dict[str, Rendered], tmp_path: Path
):
    release = rendered[name]
    values: dict[str, Any] = merged(
        {
            "watchNamespaces": [],
            "actions": {"enabled": True},
            "persistence": {"mountPath": "/var/lib/pitcrew"},
            "service": {"port": 9464},
        },
        VALUE_SETS[name],
    )
    settings, _, _ = _load(release, tmp_path)
    assert settings.store.path == Path(values["persistence"]["mountPath"]) / "pitcrew.db"
    assert settings.http.port == values["service"]["port"]
    assert settings.http.host == "0.0.0.0"
    assert settings.actions.enabled is values["actions"]["enabled"]
    kube = settings.sources.kubernetes
    assert kube.enabled
    assert kube.in_cluster
    assert kube.namespaces == tuple(values["watchNamespaces"])
    assert kube.kubeconfig is None
    assert kube.context == ""
    assert settings.chat_kind == ("slack" if "SLACK_BOT_TOKEN_FILE" in release.env() else "console")
    if values.get("extraPlaybooks") or values.get("extraPlaybooksConfigMap"):
        assert settings.playbooks.dirs == (Path("/etc/pitcrew/playbooks"),)
    else:
        assert settings.playbooks.dirs == ()


def test_values_reach_the_config(rendered: dict[str, Rendered], tmp_path: Path):
    settings, _, _ = _load(rendered["everything"], tmp_path)
    assert settings.notify.default_channel == "ml-alerts"
    assert settings.notify.group_wait.total_seconds() == 60
    assert settings.approvals.teams == ("T0123ABC",)
    assert settings.approvals.approvers[0].users == ("U012ABC",)
    assert settings.approvals.ttl.total_seconds() == 1800
    (ray,) = settings.sources.ray
    assert (ray.name, ray.namespace, ray.poll_interval.total_seconds()) == ("verl", "ml-train", 15)
    assert settings.sources.kubernetes.resources == ("events", "pods", "rayjobs")
    assert settings.actions.bump_memory.factor == 1.25
    assert settings.actions.executor_for("k8s.bump_memory") == "kubernetes"
    assert settings.actions.executor_for("ray.stop_job") == "ray"
    assert settings.store.retention.days == 30
    assert settings.http.ingest is True
    assert settings.http.port == 8080


def test_ingest_is_off_unless_asked_for(rendered: dict[str, Rendered], tmp_path: Path):
    settings, _, _ = _load(rendered["slack-tokens"], tmp_path)
    assert settings.http.ingest is False


@pytest.mark.parametrize("name", ["defaults", "slack-tokens", "http-mode", "everything"])
def test_pitcrew_config_check_passes_the_rendered_config(
    name: str, rendered: dict[str, Rendered], tmp_path: Path
):
    _, file, environ = _load(rendered[name], tmp_path)
    unset: dict[str, str | None] = {config.CONFIG_ENV: None}
    for variable in config.SECRET_ENV.values():  # only what the pod has, not this shell's
        unset |= {variable: None, f"{variable}_FILE": None}
    result = CliRunner().invoke(app, ["config", "check", str(file)], env={**unset, **environ})
    assert result.exit_code == 0, result.output
    assert f"{file}: OK" in result.output
