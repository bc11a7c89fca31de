"""docs/failure-classes.md says what the playbooks and the taxonomy say: every class in
precedence order with its rung, every built-in playbook under its class with its sources,
remediation, runbook and actions, and the benign-noise list."""

from __future__ import annotations

import pytest

from bot.adapters.files.playbooks import builtin_dir, load_library
from bot.app.classes_doc import page
from bot.core.taxonomy import RANK, Category

LIBRARY = load_library([builtin_dir()])
PAGE = page(LIBRARY)


def section(category: str) -> str:
    return PAGE.split(f"### `{category}`\n")[1].split("\n### ")[0]


def test_every_class_has_a_section_in_precedence_order() -> None:
    headings = [line[5:-1] for line in PAGE.splitlines() if line.startswith("### `")]
    assert sorted(headings) == sorted(Category)
    assert [RANK[Category(h)] for h in headings] == sorted(RANK[Category(h)] for h in headings)


@pytest.mark.parametrize(
    ("category", "said"),
    [
        ("node_lost_preemption", "Rung 1.\n"),
        ("pod_oom_killed", "Rung 2.\n"),
        (
            "pod_oom_killed",
            "**`pod-oom-killed`**: Pod OOMKilled at its memory limit (severity critical)",
        ),
        (
            "pod_oom_killed",
            "- A symptom when found with: `node_lost_preemption`, `pod_eviction`, `probe_failure`",
        ),
        (
            "pod_oom_killed",
            "  - `k8s.bump_memory`, Raise the memory limit and request of the owning template: "
            "only as the root cause; when one of `pod_oom_killed`, `ray_memory_monitor_oom` is "
            "found too",
        ),
        ("named_actor_conflict", "Rung 19, usually an effect.\n"),
        ("named_actor_conflict", "**`stale-detached-actor`**"),
        ("pod_eviction", "when, checked live, the pod is still Failed or Evicted"),
    ],
)
def test_a_class_says_its_rung_playbooks_and_actions(category: str, said: str) -> None:
    assert said in section(category)


def test_each_playbook_says_where_its_signatures_look() -> None:
    for loaded in LIBRARY.playbooks:
        playbook = loaded.playbook
        shown = section(playbook.category).split(f"**`{playbook.id}`**")[1]
        assert f"- Its {len(playbook.match)} signatures look in: `" in shown, playbook.id


def test_the_precedence_and_the_noise_are_listed() -> None:
    assert "| 2 | `pod_oom_killed` |  |" in PAGE
    assert "| 23 | `application_error` | yes |" in PAGE
    assert PAGE.count("\n| `") == len(LIBRARY.noise)
