"""docs/operations.md, "Run it in your cluster": the values, secret, error message and playbook it
shows are the ones that work with this chart and this pitcrew."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from bot.adapters.files.playbooks import builtin_dir, load_library
from bot.core.diagnosis.engine import Engine
from bot.core.quality.examples import run_examples
from tests.e2e.helm.conftest import ROOT, merged, render

README = ROOT / "docs" / "operations.md"


def section() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## Run it in your cluster\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, "docs/operations.md has no 'Run it in your cluster' section"
    return match.group(1)


def blocks(language: str) -> list[str]:
    found = re.findall(rf"^( *)```{language}\n(.*?)^\1```", section(), re.S | re.M)
    return [re.sub(rf"(?m)^{indent}", "", body) for indent, body in found]


def block_starting(language: str, first_line: str) -> str:
    matching = [b for b in blocks(language) if b.startswith(first_line)]
    assert len(matching) == 1, f"one ```{language} block starting {first_line!r}"
    return matching[0]


def readme_values() -> dict[str, Any]:
    first = yaml.safe_load(block_starting("yaml", "# my-values.yaml\n"))
    more = yaml.safe_load(block_starting("yaml", "# my-values.yaml, continued\n"))
    return merged(first, more)


def test_the_readme_values_install(chart: helm.Chart, tmp_path: Path):
    from bot.app.settings import loading as config

    values = readme_values()
    chart.validate_schema(values)
    release = render(chart, values)
    volume = next(
        v
        for v in release.one("Deployment")["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "slack"
    )
    secret = values["slack"]["existingSecret"]
    assert volume["secret"]["secretName"] == secret
    file = tmp_path / "config.yaml"
    file.write_text(release.config_text(), encoding="utf-8")
    environ = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
    settings = config.load(file, environ)
    assert settings.approvals.approvers
    assert settings.sources.kubernetes.namespaces == tuple(values["watchNamespaces"])
    # The secret the README creates has exactly the keys the pod mounts.
    command = next(c for c in blocks("console") if "create secret generic" in c)
    words = shlex.split(command.replace("\\\n", " ").replace("$ ", ""))
    assert secret in words
    keys = {w.split("=", 1)[1].split("=")[0] for w in words if w.startswith("--from-literal=")}
    assert keys == {item["key"] for item in volume["secret"]["items"]}


def test_the_readme_error_message_is_helms(chart: helm.Chart):
    quoted = block_starting("text", "pitcrew:\n")
    values = merged(readme_values(), {"config": {"notify": {"group_wiat": "1m"}}})
    with pytest.raises(helm.HelmValuesError) as rejected:
        chart.validate_schema(values)
    assert quoted.strip() in str(rejected.value)


@pytest.mark.slow
def test_the_readme_playbook_loads_and_passes_its_examples(tmp_path: Path):
    text = block_starting("yaml", "# my-playbooks/wandb-no-api-key.yaml\n")
    directory = tmp_path / "my-playbooks"
    directory.mkdir()
    (directory / "wandb-no-api-key.yaml").write_text(text, encoding="utf-8")
    library = load_library([builtin_dir(), directory])
    assert "wandb-no-api-key" in library.by_id
    results = [r for r in run_examples(Engine(library)) if r.playbook == "wandb-no-api-key"]
    assert len(results) == 2
    assert [r.problems for r in results if not r.passed] == []


def test_the_readme_set_file_key_names_one_playbook_file(chart: helm.Chart):
    command = next(c for c in blocks("console") if "--set-file" in c)
    argument = shlex.split(command.replace("\\\n", " "))[-1]
    key, _, path = argument.partition("=")
    assert helm.parse_set_string(f"{key}=x") == {"extraPlaybooks": {Path(path).name: "x"}}
    # The file arrives verbatim: its Jinja2 (`{{ … }}`) is the playbook's, not Helm's.
    text = block_starting("yaml", "# my-playbooks/wandb-no-api-key.yaml\n")
    values = merged(readme_values(), {"extraPlaybooks": {Path(path).name: text}})
    shipped = render(chart, values).one("ConfigMap", "pitcrew-playbooks")
    assert shipped["data"] == {Path(path).name: text}


def test_the_two_replica_values_install_with_the_documented_secret(chart: helm.Chart):
    values = merged(
        readme_values(),
        yaml.safe_load(block_starting("yaml", "# my-values.yaml, for two replicas\n")),
    )
    chart.validate_schema(values)
    release = render(chart, values)
    spec = release.one("Deployment")["spec"]
    assert (spec["replicas"], spec["strategy"]["type"]) == (2, "RollingUpdate")
    assert release.one("PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    assert release.config()["store"]["url"] == values["store"]["url"]
    volume = next(v for v in spec["template"]["spec"]["volumes"] if v["name"] == "store-password")
    command = next(c for c in blocks("console") if "create secret generic pitcrew-db" in c)
    words = shlex.split(command.replace("$ ", ""))
    keys = {w.split("=", 1)[1].split("=")[0] for w in words if w.startswith("--from-literal=")}
    assert volume["secret"]["secretName"] in words
    assert keys == {item["key"] for item in volume["secret"]["items"]}
    status = next(c for c in blocks("console") if "pitcrew status | head -1" in c)
    assert f"store: PostgreSQL {values['store']['url']}: answers" in status


def test_the_documented_refusal_of_two_replicas_on_sqlite_is_helms(chart: helm.Chart):
    quoted = re.search(r"answer `(at '/replicaCount': [^`]*)`", section())
    assert quoted
    with pytest.raises(helm.HelmValuesError) as refused:
        chart.validate_schema(merged(readme_values(), {"replicaCount": 2}))
    assert quoted.group(1) in str(refused.value)
