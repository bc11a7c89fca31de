"""A bad playbook fails at load with file, line, field and reason; a good one loads whole."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.adapters.files.playbooks import builtin_dir, load_builtin, load_library
from bot.core.actions.specs import ACTION_SPECS, FACTS
from bot.core.errors import PlaybookError
from bot.core.playbooks import library as playbooks
from bot.core.playbooks.schema import json_schema_text
from bot.core.validation import validate
from tests.support.playbooks import PLAYBOOK_TEXT

ACTION = """\
actions:
  - action: ray.kill_actor
    params: {name: '{{ captures.name }}', namespace: x}
    guards:
"""


def _check(tmp_path: Path, text: str) -> str:
    (tmp_path / "p.yaml").write_text(text)
    with pytest.raises(PlaybookError) as raised:
        load_library([tmp_path])
    return str(raised.value).replace(str(tmp_path) + "/", "")


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            ("severity: error", "severity: fatal"),
            "p.yaml:4: severity: Input should be 'info', 'warning', 'error' or 'critical'",
        ),
        (("title: My playbook", "title: Fine\ncolour: red"), "p.yaml:3: colour: unknown key"),
        (("title: My playbook\n", ""), "p.yaml:1: title: required key is missing"),
        (
            ("'CUDA out of memory'", "'CUDA (out of memory'"),
            "p.yaml:7: match[0].regex: regex does not compile: "
            "missing ), unterminated subpattern at position 5",
        ),
        (
            ("'GPU memory ran out.'", "'GPU {{ memory ran out'"),
            "p.yaml:8: diagnosis: template line 1: "
            "expected token 'end of print statement', got 'ran'",
        ),
        (
            ("    regex: 'CUDA out of memory'", "    ignore_case: true"),
            "p.yaml:6: match[0]: a signature needs at least one of reason, fields, regex, alert",
        ),
        (
            ("    regex: 'CUDA out of memory'", "    regex: x\n  - name: one\n    regex: y"),
            "p.yaml:5: match: signature name 'one' is used twice",
        ),
        (
            ("category: cuda_oom", "category: [1]"),
            "p.yaml:3: category: Input should be 'named_actor_conflict', 'named_actor_missing', 'pod_oom_killed', 'ray_memory_monitor_oom', 'cuda_oom', 'worker_died_system_error', 'gcs_unreachable', 'failed_scheduling_insufficient', 'image_pull_backoff', 'dependency_runtime_env', 'nccl_error_timeout', 'shm_too_small', 'node_lost_preemption', 'pod_eviction', 'crash_loop_backoff', 'probe_failure', 'ray_resources_infeasible', 'object_store_full', 'port_conflict', 'ray_version_mismatch', 'rayjob_cr_failure', 'job_deadline_timeout', 'process_limits_exhausted', 'gpu_fault', 'application_error', 'pod_config_error', 'container_start_failure', 'volume_mount_failure', 'gpu_unavailable', 'queue_admission_pending' or 'alert_firing'",
        ),
        (
            ("id: my-playbook", "id: My Playbook"),
            "p.yaml:1: id: String should match pattern '^[a-z0-9][a-z0-9-]*[a-z0-9]$'",
        ),
    ],
)
def test_schema_errors_name_file_line_field_and_reason(
    tmp_path: Path, change: tuple[str, str], error: str
) -> None:
    assert _check(tmp_path, PLAYBOOK_TEXT.replace(*change)) == error


@pytest.mark.parametrize(
    ("actions", "error"),
    [
        (
            ACTION.replace("ray.kill_actor", "ray.explode") + "      - primary: true\n",
            "p.yaml:14: actions[0].action: unknown action 'ray.explode'; known: "
            + ", ".join(sorted(ACTION_SPECS)),
        ),
        (
            ACTION.replace("namespace: x", "namespace: x, colour: red") + "      - primary: true\n",
            "p.yaml:14: actions[0]: ray.kill_actor has no parameter colour; "
            "it takes name, namespace, cluster",
        ),
        (
            ACTION + "      - {frobnicate: 1}\n",
            "p.yaml:17: actions[0].guards[0]: "
            "a guard is one of primary, evidence_of, no_evidence_of, capture, fact",
        ),
        (
            ACTION + "      - {capture: ns, not_matches: '^None$', reason: anonymous}\n",
            "p.yaml:17: actions[0].guards[0].capture: 'ns' is not a named group "
            "or field of any signature",
        ),
        (
            ACTION + "      - {capture: ns, reason: anonymous}\n",
            "p.yaml:17: actions[0].guards[0]: "
            "a capture guard needs exactly one of matches, not_matches",
        ),
        (
            ACTION + "      - {fact: ray.moon_phase}\n",
            "p.yaml:17: actions[0].guards[0].fact: unknown fact 'ray.moon_phase'; known: "
            + ", ".join(sorted(FACTS)),
        ),
        (
            ACTION.replace("'{{ captures.name }}'", "'{{ captures.name'")
            + "      - primary: true\n",
            "p.yaml:15: actions[0].params.name: template: unexpected end of template, "
            "expected 'end of print statement'.",
        ),
    ],
)
def test_action_errors_name_the_action_guard_or_parameter(
    tmp_path: Path, actions: str, error: str
) -> None:
    assert _check(tmp_path, PLAYBOOK_TEXT + actions) == error


def test_several_problems_are_all_reported_one_per_line(tmp_path: Path) -> None:
    text = PLAYBOOK_TEXT.replace("title: My playbook", "titel: My playbook").replace(
        "severity: error", "severity: loud"
    )
    assert _check(tmp_path, text).splitlines() == [
        "p.yaml:1: title: required key is missing",
        "p.yaml:4: severity: Input should be 'info', 'warning', 'error' or 'critical'",
        "p.yaml:2: titel: unknown key",
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("id: a\n  b: [\n", "p.yaml:2: invalid YAML: mapping values are not allowed here"),
        ("- just\n- a list\n", "p.yaml:1: expected exactly one YAML mapping"),
        (
            "id: a\ntitle: t\nid: b\n",
            "p.yaml:3: invalid YAML: duplicate key 'id' (lines 1 and 3)",
        ),
        (PLAYBOOK_TEXT + "---\n" + PLAYBOOK_TEXT, "p.yaml:1: expected exactly one YAML mapping"),
    ],
)
def test_malformed_yaml_is_reported_with_its_line(tmp_path: Path, text: str, error: str) -> None:
    assert _check(tmp_path, text) == error


def test_duplicate_ids_across_files_name_both_files(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "one.yaml").write_text(PLAYBOOK_TEXT)
    (second / "two.yaml").write_text(PLAYBOOK_TEXT)
    with pytest.raises(PlaybookError) as raised:
        load_library([first, second])
    assert (
        str(raised.value)
        == f"{second}/two.yaml:1: id: 'my-playbook' is already defined in {first}/one.yaml"
    )


def test_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PlaybookError, match="not a directory"):
        load_library([tmp_path / "nope"])


def test_builtin_library_covers_every_taxonomy_category() -> None:
    from bot.core.taxonomy import Category

    library = load_builtin()
    covered = {p.playbook.category for p in library.playbooks}
    assert set(Category) - covered == set()


def test_every_builtin_playbook_has_positive_and_negative_examples_in_several_shapes() -> None:
    for loaded in load_builtin().playbooks:
        examples = loaded.playbook.examples
        assert len(examples) >= 3, loaded.playbook.id
        assert any(e.expect.match for e in examples), loaded.playbook.id
        assert any(not e.expect.match for e in examples), loaded.playbook.id


def test_published_json_schema_is_current() -> None:
    published = builtin_dir() / "schema.json"
    assert published.read_text() == json_schema_text(), (
        "run: pitcrew playbooks schema --write playbooks/schema.json"
    )
    assert json.loads(published.read_text())["additionalProperties"] is False


PARTS = [
    kind
    for kind in vars(playbooks).values()
    if isinstance(kind, type)
    and dataclasses.is_dataclass(kind)
    and kind.__module__ == playbooks.__name__
    and kind not in (playbooks.LoadedPlaybook, playbooks.Library)  # made by pitcrew, not read
]


@pytest.mark.parametrize("kind", PARTS, ids=lambda kind: kind.__name__)
def test_each_part_of_a_playbook_file_refuses_a_key_it_does_not_have(kind: type) -> None:
    with pytest.raises(ValidationError) as refused:
        validate(kind, {"colour": "red"})
    assert ("colour",) in [problem["loc"] for problem in refused.value.errors()]


def test_a_library_read_from_its_files_holds_plain_values_only() -> None:
    library = load_library([builtin_dir()])
    kinds = {type(v).__module__ for v in _values_in(library)}
    assert kinds <= {"bot.core.playbooks.library", "bot.core.model", "bot.core.taxonomy"} | {
        "builtins"
    }


def _values_in(value: object) -> list[object]:
    found: list[object] = [value]
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            found += _values_in(getattr(value, f.name))
    elif isinstance(value, list | tuple):
        for item in value:
            found += _values_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            found += _values_in(item)
    return found
