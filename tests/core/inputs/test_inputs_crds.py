"""The RayJob and RayCluster objects the input tests use are valid KubeRay objects.

Each is checked against the real `ray.io/v1` CRD schema (the openAPIV3Schema of
version v1 in KubeRay's CRDs beside the checkout, `tests/support/kuberay_crds.py`), so
the parsers are tested on shapes KubeRay really produces, not on what we imagine it does.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.inputs import DATA
from tests.support.kuberay_crds import crd_validator


def kuberay_objects() -> list[Any]:
    """Every RayJob and RayCluster in the JSON and YAML fixtures, with where it is from."""
    found: list[Any] = []
    for path in sorted(DATA.iterdir()):
        if path.suffix == ".json":
            documents = [json.loads(path.read_text())]
        elif path.suffix == ".yaml":
            documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
        else:
            continue
        for index, document in enumerate(documents):
            if isinstance(document, dict) and document.get("kind") in ("RayJob", "RayCluster"):
                found.append(pytest.param(document, id=f"{path.name}#{index}"))
    return found


def test_the_fixtures_hold_both_kinds() -> None:
    kinds = {param.values[0]["kind"] for param in kuberay_objects()}
    assert kinds == {"RayJob", "RayCluster"}


@pytest.mark.slow
@pytest.mark.parametrize("obj", kuberay_objects())
def test_fixture_objects_are_valid_against_the_crd(obj: dict[str, Any]) -> None:
    assert obj["apiVersion"] == "ray.io/v1"
    crd_validator(obj["kind"]).validate(obj)


def test_the_inline_rayjob_without_status_is_valid_too() -> None:
    """test_inputs_robustness uses a bare RayJob; KubeRay's schema allows it."""
    bare = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"}}
    crd_validator("RayJob").validate(bare)


def test_the_schema_check_does_reject_a_wrong_type() -> None:
    bad = {"apiVersion": "ray.io/v1", "kind": "RayJob", "status": {"failed": "one"}}
    with pytest.raises(jsonschema.ValidationError):
        crd_validator("RayJob").validate(bad)
