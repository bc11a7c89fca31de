"""Which cluster a pitcrew answers for: `cluster.name`, else the kubeconfig context it
reads Kubernetes through; a pitcrew that reads no Kubernetes and has no name has none."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.app.factories import cluster_name, kube_cluster_name
from bot.app.settings.sections import ClusterSettings, Settings
from bot.app.settings.sources import KubernetesSourceSettings, SourceSettings


def kubeconfig(path: Path) -> Path:
    context = {"cluster": "c", "user": "u"}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": n, "context": context} for n in ("gpu-eu", "gpu-us")],
                "current-context": "gpu-eu",
            }
        )
    )
    return path


def settings(name: str = "", *, kube: bool = True, context: str = "", config: Path) -> Settings:
    source = KubernetesSourceSettings(enabled=kube, kubeconfig=config, context=context)
    return Settings(cluster=ClusterSettings(name=name), sources=SourceSettings(kubernetes=source))


def test_the_configured_name_wins(tmp_path: Path) -> None:
    chosen = settings("eu-a", context="gpu-us", config=kubeconfig(tmp_path / "kc"))
    assert (cluster_name(chosen), kube_cluster_name(chosen)) == ("eu-a", "eu-a")


def test_without_a_name_the_kubeconfig_context_names_the_cluster(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "kc")
    assert cluster_name(settings(config=config)) == "gpu-eu"  # the current context
    assert cluster_name(settings(context="gpu-us", config=config)) == "gpu-us"


def test_a_pitcrew_that_reads_no_kubernetes_is_named_only_by_its_config(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "kc")
    assert cluster_name(settings(kube=False, config=config)) == ""
    named = settings("lab", kube=False, config=config)
    assert (cluster_name(named), kube_cluster_name(named)) == ("lab", "")
