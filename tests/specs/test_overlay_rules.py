"""Overlay operators, accumulation, file overlays and their errors, value by value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchx_core.specs import Role
from torchx_core.specs.errors import InvalidOverlayError, OverlayTypeError
from torchx_core.specs.overlays import (
    DEL,
    JOIN,
    PUT,
    apply_overlay,
    get_overlay,
    set_overlay,
    validate_overlay,
)


def test_operator_keys_are_stable_strings() -> None:
    # they are stored in metadata (and files), so their spelling is part of the format
    # (TorchX HEAD's spelling: overlays stored by one are read by the other)
    assert (PUT("env"), DEL("env"), JOIN("containers", on="name")) == (
        "__put__:env",
        "__del__:env",
        "__join__:containers:name",
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: PUT(""), "PUT(key) needs a non-empty str field name, got ''"),
        (lambda: DEL(3), "DEL(key) needs a non-empty str field name, got 3"),
        (lambda: JOIN("", on="name"), "JOIN(key) needs a non-empty str field name, got ''"),
        (
            lambda: JOIN("c", on=""),
            "JOIN('c', on=...) needs a field name for on= (and a key without ':'), got ''",
        ),
        (
            lambda: JOIN("a:b", on="n"),
            "JOIN('a:b', on=...) needs a field name for on= (and a key without ':'), got 'n'",
        ),
        (
            lambda: JOIN("c", on=None),
            "JOIN('c', on=...) needs a field name for on= (and a key without ':'), got None",
        ),
    ],
)
def test_operator_misuse_is_refused(make: object, message: str) -> None:
    with pytest.raises(InvalidOverlayError) as e:
        make()  # type: ignore[operator]
    assert str(e.value) == message


def test_keys_that_look_like_operators_but_are_not_stay_plain() -> None:
    base: dict[str, object] = {}
    apply_overlay(base, {"__x": 1, "__put__": 2, "__PUT__:c": 3})
    assert base == {"__x": 1, "__put__": 2, "__PUT__:c": 3}


def test_apply_overlay_type_errors() -> None:
    with pytest.raises(OverlayTypeError) as e:
        apply_overlay([], {})  # type: ignore[arg-type]
    assert (
        str(e.value)
        == "apply_overlay merges a dict overlay into a dict base; got base=list, overlay=dict"
    )
    with pytest.raises(OverlayTypeError, match="needs a list value, got 'x'"):
        apply_overlay({}, {JOIN("c", on="n"): "x"})
    with pytest.raises(
        OverlayTypeError, match=r"JOIN\('c', on='n'\): the base value is str, not a list"
    ):
        apply_overlay({"c": "s"}, {JOIN("c", on="n"): []})


def test_overlay_values_are_copied_not_shared() -> None:
    overlay = {"spec": {"tags": ["a"]}, "new": {"x": [1]}}
    base: dict[str, object] = {"spec": {}}
    apply_overlay(base, overlay)
    base["spec"]["tags"].append("b")  # type: ignore[index]
    base["new"]["x"].append(2)  # type: ignore[index]
    assert overlay == {"spec": {"tags": ["a"]}, "new": {"x": [1]}}


def test_nested_operators_in_new_values_are_resolved() -> None:
    base: dict[str, object] = {}
    apply_overlay(base, {"spec": {PUT("a"): [1], DEL("b"): None}, "items": [{PUT("k"): 1}]})
    assert base == {"spec": {"a": [1]}, "items": [{"k": 1}]}


def test_accumulation_last_call_wins_per_field() -> None:
    """TorchX HEAD's rule: a key replaces every other key about the same field (plain or
    operator); the same key again accumulates."""
    role = Role(name="r", image="i")
    set_overlay(role, "k8s", "Pod", {"tags": ["a"]})
    set_overlay(role, "k8s", "Pod", {PUT("tags"): ["b"]})  # replaces the plain append
    set_overlay(role, "k8s", "Pod", {PUT("tags"): ["c"]})  # the same PUT again: accumulates
    assert get_overlay(role, "k8s", "Pod") == {PUT("tags"): ["b", "c"]}
    set_overlay(role, "k8s", "Pod", {DEL("tags"): None})
    assert get_overlay(role, "k8s", "Pod") == {DEL("tags"): None}
    set_overlay(role, "k8s", "Pod", {"tags": ["d"]})  # a plain key after DEL: plain wins
    assert get_overlay(role, "k8s", "Pod") == {"tags": ["d"]}
    set_overlay(role, "k8s", "Pod", {JOIN("c", on="n"): [{"n": 1}]})
    set_overlay(role, "k8s", "Pod", {JOIN("c", on="n"): [{"n": 2}]})
    set_overlay(role, "k8s", "Pod", {"spec": {"a": 1}})
    set_overlay(role, "k8s", "Pod", {"spec": {"b": 2}, "n": 1})
    set_overlay(role, "k8s", "Pod", {"n": 2})
    assert get_overlay(role, "k8s", "Pod") == {
        "tags": ["d"],
        JOIN("c", on="n"): [{"n": 1}, {"n": 2}],
        "spec": {"a": 1, "b": 2},
        "n": 2,
    }
    request = {"tags": ["x"], "spec": {"c": 3}, "c": [{"n": 1, "v": 0}]}
    apply_overlay(request, get_overlay(role, "k8s", "Pod"))
    assert request == {
        "tags": ["x", "d"],
        "spec": {"c": 3, "a": 1, "b": 2},
        "c": [{"n": 1, "v": 0}, {"n": 2}],
        "n": 2,
    }


def test_tuples_replace_and_structural_mismatch_is_a_type_error() -> None:
    base = {"containers": [{"name": "old"}], "spec": {"a": 1}}
    apply_overlay(base, {"containers": ({"name": "new"},), "items": (1, 2)})
    assert base == {"containers": [{"name": "new"}], "spec": {"a": 1}, "items": [1, 2]}
    with pytest.raises(OverlayTypeError, match=r"type mismatch for attr: `spec`\. dict != str"):
        apply_overlay(base, {"spec": "x"})
    with pytest.raises(OverlayTypeError, match="list != str"):
        apply_overlay({"a": [1]}, {"a": "b"})
    base2 = {"priority": 1}
    apply_overlay(base2, {"priority": "HIGH"})  # primitives of other types overwrite
    assert base2 == {"priority": "HIGH"}


def test_set_overlay_errors(caplog: pytest.LogCaptureFixture) -> None:
    role = Role(name="r", image="i", metadata={"k8s": {"Pod": [1]}, "bad": 3})
    with pytest.raises(InvalidOverlayError) as e:
        set_overlay(role, "k8s", "Job", [])  # type: ignore[arg-type]
    assert str(e.value) == "an overlay must be a dict, got []"
    with pytest.raises(InvalidOverlayError) as e:
        set_overlay(role, "k8s", "Pod", {"a": 1})
    assert str(e.value) == "metadata['k8s']['Pod'] must be a dict overlay, got [1]"
    with pytest.raises(InvalidOverlayError) as e:
        get_overlay(role, "k8s", "Pod")
    assert str(e.value) == "metadata['k8s']['Pod'] must be a dict overlay, got [1]"
    # a namespace that is neither a dict nor a file: no overlay (TorchX), but said
    with caplog.at_level("WARNING", logger="torchx_core.specs.overlays"):
        assert get_overlay(role, "bad", "Pod") == {}
    assert "metadata['bad'] is a int, not a dict of overlays or a file URI" in caplog.text
    with pytest.raises(InvalidOverlayError, match="reserved"):
        set_overlay(role, "k8s", "__torchx_overlays__", {})
    with pytest.raises(InvalidOverlayError, match="reserved"):
        get_overlay(role, "k8s", "__torchx_overlays__")
    set_overlay(role, "bad", "Pod", {"a": 1})  # replaced, with a warning
    assert role.metadata["bad"] == {"__torchx_overlays__": True, "Pod": {"a": 1}}
    assert "replacing the int in metadata['bad']" in caplog.text


def test_flat_namespace_warns_with_how_to_store_it(caplog: pytest.LogCaptureFixture) -> None:
    role = Role(name="r", image="i", metadata={"k8s": {"hostNetwork": True}})
    with caplog.at_level("WARNING", logger="torchx_core.specs.overlays"):
        assert get_overlay(role, "k8s", "V1Pod") == {"hostNetwork": True}
    assert "treating metadata['k8s'] as a flat overlay" in caplog.text
    assert "set_overlay(target, 'k8s', 'V1Pod', overlay)" in caplog.text
    assert get_overlay(role, "k8s", "V1Pod", flat_fallback=False) == {}
    assert get_overlay(Role(name="r", image="i", metadata={"k8s": {}}), "k8s", "V1Pod") == {}
    # several dict values look nested: no fallback (TorchX)
    nested = Role(name="r", image="i", metadata={"k8s": {"A": {"x": 1}, "B": {"y": 2}}})
    assert get_overlay(nested, "k8s", "V1Pod") == {}
    # a namespace written by set_overlay is nested-only
    marked = Role(name="r", image="i")
    set_overlay(marked, "k8s", "A", {"x": 1})
    assert get_overlay(marked, "k8s", "V1Pod") == {}


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("o.json", json.dumps({"V1Pod": {"a": [1]}})),
        ("o.yaml", "V1Pod:\n  a: [1]\n"),
        ("o.yml", "V1Pod: {a: [1]}\n"),
        ("o.txt", "V1Pod: {a: [1]}\n"),  # neither extension: JSON first, then YAML
    ],
)
def test_overlays_from_files(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    role = Role(name="r", image="i", metadata={"k8s": str(path)})
    assert get_overlay(role, "k8s", "V1Pod") == {"a": [1]}
    set_overlay(role, "k8s", "V1Pod", {"a": [2]})  # the file's content is loaded, then extended
    assert role.metadata["k8s"] == {"V1Pod": {"a": [1, 2]}, "__torchx_overlays__": True}


def test_empty_overlay_file_is_no_overlay(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("")
    assert (
        get_overlay(
            Role(name="r", image="i", metadata={"k8s": str(tmp_path / "empty.yaml")}),
            "k8s",
            "V1Pod",
        )
        == {}
    )


def test_overlay_file_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{nope")
    (tmp_path / "bad.txt").write_text("a: [unclosed")
    missing = tmp_path / "missing.json"

    def load(path: Path) -> object:
        return get_overlay(Role(name="r", image="i", metadata={"k8s": str(path)}), "k8s", "Pod")

    with pytest.raises(InvalidOverlayError) as e:
        load(tmp_path / "bad.json")
    assert str(e.value) == f"overlay file {str(tmp_path / 'bad.json')!r} is not valid JSON"
    with pytest.raises(InvalidOverlayError) as e:
        load(tmp_path / "bad.txt")
    assert str(e.value).startswith(
        f"overlay file {str(tmp_path / 'bad.txt')!r} is neither valid JSON nor YAML: "
    )
    with pytest.raises(InvalidOverlayError) as e:
        load(missing)
    assert str(e.value).startswith(f"cannot read overlay file {str(missing)!r}: ")


def test_validate_overlay_messages() -> None:
    with pytest.raises(InvalidOverlayError) as e:
        validate_overlay(
            {PUT("env"): [], "command": [], "ok": 1},
            blocklist=["env", "command"],
            overlay_name="PodSpec",
        )
    assert str(e.value) == (
        "PodSpec overlay sets `PodSpec.command`, `PodSpec.env`, which must be set via the"
        " Role/AppDef attributes instead (not allowed in overlays: command, env)"
    )
    with pytest.raises(InvalidOverlayError) as e:
        validate_overlay(
            {"containers": [], "env": 1},
            blocklist=["env"],
            forbidden_keys={"containers"},
            suggestion="use the V1Container overlay",
        )
    assert str(e.value) == (
        "overlay overlay sets `overlay.env`, which must be set via the Role/AppDef attributes"
        " instead"
        " (not allowed in overlays: env); overlay overlay contains 'containers', which belong to"
        " a different overlay type. use the V1Container overlay"
    )
    with pytest.raises(InvalidOverlayError) as e:
        validate_overlay({"containers": []}, forbidden_keys={"containers"})
    assert (
        str(e.value)
        == "overlay overlay contains 'containers', which belong to a different overlay type"
    )
    with pytest.raises(InvalidOverlayError) as e:
        validate_overlay([], overlay_name="V1Pod")  # type: ignore[arg-type]
    assert str(e.value) == "V1Pod overlay must be a dict, got []"
    validate_overlay({"env": 1})  # nothing blocked: fine


def test_overlay_file_on_a_filesystem_that_is_not_installed_names_the_package() -> None:
    from torchx_core.specs.errors import MissingDependencyError

    role = Role(name="r", image="i", metadata={"k8s": "s3://bucket/o.yaml"})
    with pytest.raises(MissingDependencyError) as e:
        get_overlay(role, "k8s", "Pod")
    assert str(e.value) == (
        "Optional dependency 's3fs' is not installed (needed by reading the overlay file"
        " s3://bucket/o.yaml (s3://)). Install it with: pip install s3fs"
    )
    with pytest.raises(InvalidOverlayError, match="Protocol not known: nosuchproto"):
        get_overlay(
            Role(name="r", image="i", metadata={"k8s": "nosuchproto://b/o.yaml"}), "k8s", "Pod"
        )


def test_overlay_spec_refuses_blocked_keys_both_ways() -> None:
    from torchx_core.specs.overlays import OverlaySpec

    spec = OverlaySpec("kubernetes", "V1Pod", blocklist=("env",))
    role = Role(name="r", image="i")
    with pytest.raises(InvalidOverlayError) as e:
        spec.set(role, {PUT("env"): []})
    assert str(e.value) == (
        "V1Pod overlay sets `V1Pod.env`, which must be set via the Role/AppDef attributes instead"
        " (not allowed in overlays: env)"
    )
    assert role.metadata == {}
    set_overlay(role, "kubernetes", "V1Pod", {"env": []})  # stored around the spec
    with pytest.raises(InvalidOverlayError, match=r"^V1Pod overlay sets `V1Pod\.env`"):
        spec.get(role)
    bad = Role(name="r", image="i", metadata={"kubernetes": {"V1Pod": [1]}})
    with pytest.raises(InvalidOverlayError) as e:
        spec.get(bad)
    assert str(e.value) == "metadata['kubernetes']['V1Pod'] must be a dict overlay, got [1]"
    # a flat namespace written for another kind is never read as this kind
    assert spec.get(Role(name="r", image="i", metadata={"kubernetes": {"hostNetwork": True}})) == {}
