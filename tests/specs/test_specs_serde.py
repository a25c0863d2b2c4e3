"""The AppDef dict/JSON form round-trips every field (torchx_core/specs/_serde.py)."""

from __future__ import annotations

import json

import pytest

from torchx_core.specs import (
    AppDef,
    AppDefSerializationError,
    BindMount,
    DeviceMount,
    Resource,
    RetryPolicy,
    Role,
    VolumeMount,
    Workspace,
    appdef_from_dict,
    appdef_from_json,
    appdef_to_dict,
    appdef_to_json,
    resource,
)
from torchx_core.specs.register import named_resource, named_resources


def _full_app() -> AppDef:
    return AppDef(
        name="train",
        roles=[
            Role(
                name="trainer",
                image="img:1",
                min_replicas=1,
                entrypoint="python",
                args=["-m", "train", "--lr", "0.1"],
                env={"A": "1"},
                num_replicas=2,
                max_retries=3,
                retry_policy=RetryPolicy.ROLE,
                resource=Resource(
                    cpu=4,
                    gpu=1,
                    memMB=1024,
                    capabilities={"k": "v", "n": 2},
                    devices={"vpc.amazonaws.com/efa": 1},
                    tags={"team": "x"},
                ),
                port_map={"tb": 6006},
                metadata={"kubernetes": {"V1Pod": {"spec": {"a": [1, 2]}}}},
                mounts=[
                    BindMount("/a", "/b", True),
                    VolumeMount("vol", "/v"),
                    DeviceMount("/dev/fuse", "/dev/fuse", "rw"),
                ],
                workspace=Workspace({"~/proj": "proj"}),
                overrides={"entrypoint": "python3"},
                base_image="base",
            ),
            Role("ps", "img:2", resource=resource(h="aws_p4d.24xlarge")),
        ],
        metadata={"owner": "me"},
    )


def test_round_trip_through_json() -> None:
    app = _full_app()
    text = json.dumps(app.to_dict())
    back = AppDef.from_dict(json.loads(text))
    assert back == app
    assert back.roles[0].base_image == "base"
    assert back.roles[0].entrypoint == "python3"
    assert back.roles[1].resource.get_resource_name() == "aws_p4d.24xlarge"
    assert appdef_from_json(appdef_to_json(app)) == app
    assert appdef_from_dict(appdef_to_dict(app)) == app


def test_fractional_flag_round_trips() -> None:
    named_resource("serde_host", Resource(8, 4, 4096), fractionals=[2], clobber=True)
    try:
        app = AppDef("a", [Role("r", "i", resource=named_resources["serde_host/2"])])
        res = AppDef.from_dict(json.loads(json.dumps(app.to_dict()))).roles[0].resource
        assert res.get_resource_name() == "serde_host/2" and res.is_fractional()
    finally:
        named_resources._unregister("serde_host")
        named_resources._unregister("serde_host/2")


def test_non_json_overrides_are_resolved_then_dropped() -> None:
    async def image() -> str:
        return "built"

    app = AppDef("a", [Role("r", "img", overrides={"image": image()})])
    data = app.to_dict()
    json.dumps(data)
    assert data["roles"][0]["image"] == "built"


@pytest.mark.parametrize(
    "data, needle",
    [
        ({}, "'name'"),
        ({"name": "a", "roles": [{"image": "i"}]}, "app.roles[0]: missing required key 'name'"),
        (
            {"name": "a", "roles": [{"name": "r", "image": "i", "retry_policy": "SOMETIMES"}]},
            "SOMETIMES",
        ),
        (
            {
                "name": "a",
                "roles": [
                    {"name": "r", "image": "i", "resource": {"cpu": "x", "gpu": 0, "memMB": 1}}
                ],
            },
            "resource.cpu: expected int, got 'x' (str)",
        ),
        ({"name": 1}, "app.name: expected str, got 1 (int)"),
        (
            {"name": "a", "roles": [{"name": "r", "image": "i", "mounts": [{"type": "nfs"}]}]},
            "'nfs'",
        ),
        ({"name": "a", "version": 99}, "newer"),
        ([], "expected an object"),
    ],
)
def test_malformed_dicts_raise_typed_errors(data: object, needle: str) -> None:
    with pytest.raises(AppDefSerializationError) as e:
        appdef_from_dict(data)  # type: ignore[arg-type]
    assert needle in str(e.value)


def test_bad_json_text() -> None:
    with pytest.raises(
        AppDefSerializationError, match=r"'\{nope' is not valid JSON .*appdef_to_json"
    ):
        appdef_from_json("{nope")
