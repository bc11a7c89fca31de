"""Where the project's shared reference data (the real KubeRay CRDs) is: `shared/`
beside the checkout, as laid out for developers and CI."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def kuberay_crds() -> Path:
    """`../shared/kuberay/crds` next to the checkout (or /work/shared as a fallback)."""
    for base in (ROOT.parent / "shared", Path("/work/shared")):
        crds = base / "kuberay" / "crds"
        if (crds / "ray.io_rayjobs.yaml").is_file():
            return crds
    raise FileNotFoundError("the KubeRay CRDs (shared/kuberay/crds) are not beside the checkout")
