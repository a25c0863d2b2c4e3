"""Unit tests for torchx_core.specs.overlays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchx_core.specs import AppDef, InvalidOverlayError, OverlayTypeError, Role
from torchx_core.specs.overlays import (
    DEL,
    JOIN,
    PUT,
    apply_overlay,
    get_overlay,
    set_overlay,
    validate_overlay,
)


def _role() -> Role:
    return Role(name="trainer", image="my-image", entrypoint="train.py")


def test_default_merge_rules() -> None:
    base = {"spec": {"cpu": "500m"}, "tags": ["prod"], "replicas": 1, "n": None}
    apply_overlay(
        base, {"spec": {"memory": "1Gi"}, "tags": ["gpu"], "replicas": 3, "new": {"a": 1}}
    )
    assert base == {
        "spec": {"cpu": "500m", "memory": "1Gi"},
        "tags": ["prod", "gpu"],
        "replicas": 3,
        "n": None,
        "new": {"a": 1},
    }


def test_none_vs_del_vs_missing() -> None:
    base = {"a": 1, "b": 2, "c": 3}
    apply_overlay(base, {"a": None, DEL("b"): None})
    assert base == {"a": None, "c": 3}
    apply_overlay(base, {DEL("zzz"): None})  # deleting a missing key is a no-op
    assert base == {"a": None, "c": 3}


def test_put_replaces_dicts_and_lists() -> None:
    base = {"d": {"x": 1}, "l": [1, 2]}
    apply_overlay(base, {PUT("d"): {"y": 2}, PUT("l"): [3]})
    assert base == {"d": {"y": 2}, "l": [3]}


def test_join_merges_by_key_and_appends() -> None:
    base = {"containers": [{"name": "main", "image": "v1", "cpu": "1"}]}
    apply_overlay(
        base,
        {
            JOIN("containers", on="name"): [
                {"name": "main", "memory": "1Gi"},
                {"name": "sidecar", "image": "proxy"},
            ]
        },
    )
    assert base == {
        "containers": [
            {"name": "main", "image": "v1", "cpu": "1", "memory": "1Gi"},
            {"name": "sidecar", "image": "proxy"},
        ]
    }
    empty: dict[str, object] = {}
    apply_overlay(empty, {JOIN("c", on="name"): [{"name": "a"}]})
    assert empty == {"c": [{"name": "a"}]}


def test_join_merges_matched_items_recursively() -> None:
    """A matched item merges like a dict overlay: nested dicts merge, lists append, operators
    act."""
    base = {
        "containers": [
            {
                "name": "main",
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                "ports": [{"containerPort": 80}],
                "env": [{"name": "A", "value": "1"}],
                "args": ["--x"],
            }
        ]
    }
    apply_overlay(
        base,
        {
            JOIN("containers", on="name"): [
                {
                    "name": "main",
                    "resources": {"limits": {"cpu": "2"}},
                    "ports": [{"containerPort": 443}],
                    JOIN("env", on="name"): [
                        {"name": "A", "value": "2"},
                        {"name": "B", "value": "3"},
                    ],
                    PUT("args"): ["--y"],
                }
            ]
        },
    )
    assert base == {
        "containers": [
            {
                "name": "main",
                "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
                "ports": [{"containerPort": 80}, {"containerPort": 443}],
                "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}],
                "args": ["--y"],
            }
        ]
    }


def test_join_item_without_the_key_field_is_appended() -> None:
    base = {"c": [{"name": "a", "v": 1}]}
    apply_overlay(base, {JOIN("c", on="name"): [{"v": 2}]})
    assert base == {"c": [{"name": "a", "v": 1}, {"v": 2}]}


def test_join_on_non_dict_items_is_type_error() -> None:
    with pytest.raises(TypeError) as e:
        apply_overlay({"c": ["str-item"]}, {JOIN("c", on="name"): [{"name": "a"}]})
    assert isinstance(e.value, OverlayTypeError) and "'str-item'" in str(e.value)


def test_nested_operators_resolve() -> None:
    base = {"spec": {"containers": [{"name": "a"}], "hostNetwork": True}}
    apply_overlay(base, {"spec": {PUT("containers"): [{"name": "b"}], DEL("hostNetwork"): None}})
    assert base == {"spec": {"containers": [{"name": "b"}]}}


def test_set_overlay_accumulates_and_get_returns_it() -> None:
    role = _role()
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {"nodeSelector": {"accelerator": "a100"}}})
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {"tolerations": [{"key": "gpu"}]}})
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {"tolerations": [{"key": "b"}]}})
    assert get_overlay(role, "kubernetes", "V1Pod") == {
        "spec": {
            "nodeSelector": {"accelerator": "a100"},
            "tolerations": [{"key": "gpu"}, {"key": "b"}],
        }
    }
    assert get_overlay(role, "slurm", "Job") == {}
    json.dumps(role.metadata)  # operator keys are plain strings: JSON serializable


def test_set_overlay_operators_last_call_wins() -> None:
    role = _role()
    set_overlay(role, "k", "Pod", {PUT("containers"): [{"name": "only"}]})
    base = {"containers": [{"name": "old"}], "hostNetwork": True}
    apply_overlay(base, get_overlay(role, "k", "Pod"))
    assert base["containers"] == [{"name": "only"}]
    set_overlay(role, "k", "Pod", {DEL("containers"): None})  # replaces the PUT
    base = {"containers": [{"name": "old"}]}
    apply_overlay(base, get_overlay(role, "k", "Pod"))
    assert base == {}
    set_overlay(role, "k", "Pod", {"containers": [{"name": "extra"}]})  # replaces the DEL
    base = {"containers": [{"name": "old"}]}
    apply_overlay(base, get_overlay(role, "k", "Pod"))
    assert base == {"containers": [{"name": "old"}, {"name": "extra"}]}


def test_get_overlay_backwards_compat_flat_namespace(caplog: pytest.LogCaptureFixture) -> None:
    app = AppDef("a", metadata={"kubernetes": {"spec": {"x": 1}}})  # type: ignore[dict-item]
    with caplog.at_level("WARNING", logger="torchx_core.specs.overlays"):
        assert get_overlay(app, "kubernetes", "V1Pod") == {"spec": {"x": 1}}
    assert "V1Pod" in caplog.text and "flat overlay" in caplog.text


@pytest.mark.parametrize(
    "suffix, text",
    [(".json", '{"V1Pod": {"spec": {"a": 1}}}'), (".yaml", "V1Pod:\n  spec:\n    a: 1\n")],
)
def test_get_overlay_from_file_uri(tmp_path: Path, suffix: str, text: str) -> None:
    path = tmp_path / f"overlay{suffix}"
    path.write_text(text)
    role = _role()
    role.metadata["kubernetes"] = f"file://{path}"
    assert get_overlay(role, "kubernetes", "V1Pod") == {"spec": {"a": 1}}


def test_get_overlay_bad_file(tmp_path: Path) -> None:
    role = _role()
    role.metadata["kubernetes"] = str(tmp_path / "missing.json")
    with pytest.raises(InvalidOverlayError, match=r"missing\.json"):
        get_overlay(role, "kubernetes", "V1Pod")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    role.metadata["kubernetes"] = str(bad)
    with pytest.raises(InvalidOverlayError, match="not valid JSON"):
        get_overlay(role, "kubernetes", "V1Pod")


def test_validate_overlay() -> None:
    validate_overlay({"nodeSelector": {}}, blocklist=["env"])
    with pytest.raises(ValueError) as e:
        validate_overlay(
            {PUT("env"): {}, "command": ["x"], "ok": 1},
            blocklist=["env", "command"],
            overlay_name="PodSpec",
        )
    assert "`PodSpec.command`, `PodSpec.env`" in str(e.value)
    with pytest.raises(InvalidOverlayError) as e2:
        validate_overlay(
            {"replicas": 2},
            forbidden_keys={"replicas"},
            overlay_name="PodSpec",
            suggestion="use the V1Job overlay",
        )
    assert "'replicas'" in str(e2.value) and "use the V1Job overlay" in str(e2.value)


def test_operator_constructors_validate() -> None:
    assert PUT("a") != JOIN("a", on="n") != DEL("a")
    with pytest.raises(InvalidOverlayError):
        PUT("")
    with pytest.raises(InvalidOverlayError):
        JOIN("a", on="")


def test_apply_overlay_rejects_non_dicts() -> None:
    with pytest.raises(OverlayTypeError):
        apply_overlay([], {})  # type: ignore[arg-type]


def test_overlay_spec_declares_namespace_kind_and_blocklist() -> None:
    from torchx_core.specs import InvalidOverlayError, Role
    from torchx_core.specs.overlays import OverlaySpec

    v1pod = OverlaySpec("kubernetes", "V1Pod", blocklist=("command", "env"))
    role = Role(name="t", image="img", entrypoint="train.py")
    assert v1pod.get(role) == {}
    v1pod.set(role, {"spec": {"nodeSelector": {"gpu": "true"}}})
    v1pod.set(role, {"spec": {"tolerations": [{"key": "gpu"}]}})
    assert v1pod.get(role) == {
        "spec": {"nodeSelector": {"gpu": "true"}, "tolerations": [{"key": "gpu"}]}
    }
    with pytest.raises(InvalidOverlayError, match=r"V1Pod\.env"):
        v1pod.set(role, {"env": {"A": "b"}})
    # a flat namespace dict written for another kind is not read as this kind
    other = Role(name="o", image="i", entrypoint="e", metadata={"kubernetes": {"spec": {}}})
    assert v1pod.get(other) == {}
    assert v1pod == OverlaySpec("kubernetes", "V1Pod", ("command", "env"))
