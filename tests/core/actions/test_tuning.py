"""The operator's action settings reach the offers, and the previews say so."""

from __future__ import annotations

from bot.app.settings.actions import ActionSettings, BumpMemorySettings
from bot.core.actions.tuning import tune
from bot.core.model import ActionOffer, Diagnosis, frozen_map

BUMP = ActionOffer(
    action="k8s.bump_memory",
    params=frozen_map(
        {"namespace": "ml", "kind": "RayCluster", "name": "rc", "group": "g", "current": "16Gi"}
    ),
    offered=True,
    reason="Raise the memory limit (pod_oom_killed)",
    playbook="pod-oom-killed",
    preview="RayCluster ml/rc …: 16Gi → 24Gi",
)


def test_the_configured_factor_and_cap_are_in_the_offer_and_its_preview() -> None:
    values = ActionSettings(bump_memory=BumpMemorySettings(factor=1.25, cap="18Gi")).overrides()
    (offer,) = tune(Diagnosis((), (BUMP,), ""), values).actions
    assert (offer.params["factor"], offer.params["cap"]) == (1.25, "18Gi")
    assert offer.preview.endswith("16Gi → 18Gi (× 1.25: no memory metrics)")


def test_withheld_offers_and_unknown_settings_are_left_alone() -> None:
    withheld = ActionOffer("k8s.bump_memory", BUMP.params, False, "no OOM evidence", "x")
    diagnosis = Diagnosis((), (withheld,), "")
    assert tune(diagnosis, ActionSettings().overrides()) is diagnosis
