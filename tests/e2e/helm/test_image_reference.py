"""The chart installs as documented: no pitcrew image is published, so the image is the
one `make image` builds (localhost/pitcrew:<version>, scripts/image.sh), pushed to the
user's registry and named in image.repository. `helm install` with only the values of
docs/operations.md renders a reference a cluster can pull; without image.repository,
or with the builder's local name, the install is refused with what to do."""

from __future__ import annotations

import re
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from bot import __version__
from tests.e2e.helm.conftest import CHART, ROOT, TOKENS, render
from tests.e2e.helm.test_readme import readme_values

LOCAL = f"localhost/pitcrew:{__version__}"
REQUIRED = (
    f"image.repository is required: no pitcrew image is published. Build it with `make image` "
    f"({LOCAL}), push it to your registry (buildah push {LOCAL} "
    f"docker://REGISTRY/pitcrew:{__version__}) and set image.repository=REGISTRY/pitcrew"
)


def test_make_image_builds_the_local_name_the_chart_speaks_of() -> None:
    script = (ROOT / "scripts" / "image.sh").read_text()
    assert "IMAGE=${IMAGE:-localhost/pitcrew:$VERSION}" in script
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__


def test_the_documented_values_render_a_pullable_image(chart: helm.Chart) -> None:
    values = readme_values()
    chart.validate_schema(values)
    release = render(chart, values, image={})
    image = release.container()["image"]
    assert image == f"registry.example.com/ml-platform/pitcrew:{__version__}"
    assert not image.startswith("localhost/")
    assert f"The pod runs the image {image}: it must be in a registry" in release.notes
    assert release.notes.index("ImagePullBackOff") < release.notes.index("rollout status")


def test_an_install_without_an_image_is_refused_with_what_to_do(chart: helm.Chart) -> None:
    with pytest.raises(helm.HelmError) as refused:
        render(chart, TOKENS, image={})
    assert REQUIRED in str(refused.value)


def test_the_builders_local_name_is_refused(chart: helm.Chart) -> None:
    with pytest.raises(helm.HelmError) as refused:
        render(chart, TOKENS, image={"image": {"repository": "localhost/pitcrew"}})
    assert re.search(
        r"image.repository localhost/pitcrew is the name `make image` gives the image on the "
        r"machine that built it; a cluster cannot pull it",
        str(refused.value),
    )


def test_values_yaml_names_no_unpublished_default() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["repository"] == ""
    assert "make image" in (CHART / "values.yaml").read_text()
    assert Path(CHART / "values.schema.json").exists()
