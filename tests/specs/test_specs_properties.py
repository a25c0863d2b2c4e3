"""Property tests: bad input only ever raises our typed errors, naming the bad value.

Covers parse_app_handle, runopts.cfg_from_str, runopts.cfg_from_json_repr, parse_mounts,
resource(h=...) and component argv parsing.
"""

from __future__ import annotations

import json

from components_fixture import echo, required  # type: ignore[import-not-found]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchx_core.specs import (
    AppDef,
    ComponentArgumentError,
    InvalidMountError,
    InvalidRunConfigException,
    MalformedAppHandleException,
    Resource,
    UnknownNamedResourceError,
    make_app_handle,
    parse_app_handle,
    parse_mounts,
    resource,
    runopts,
)
from torchx_core.specs.builders import materialize_appdef

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# text that is likely to hit the parsers' delimiters
DELIMS = st.text(alphabet="ab_Z09=,;:/. -\\x\n", max_size=40)
ANY_TEXT = st.one_of(DELIMS, st.text(max_size=40))
VALID_HINTS = ("write", "use", "valid", "Valid", "separate", "expected", "must", "needs", "form")


def _names_value_and_fix(msg: str, value: str) -> None:
    assert repr(value) in msg, msg
    assert any(h in msg for h in VALID_HINTS), msg


@SETTINGS
@given(ANY_TEXT)
def test_parse_app_handle_only_typed_errors(handle: str) -> None:
    try:
        parsed = parse_app_handle(handle)
    except MalformedAppHandleException as e:
        _names_value_and_fix(str(e), handle)
        assert isinstance(e, ValueError)
    else:
        assert make_app_handle(*parsed) == handle


@SETTINGS
@given(
    st.from_regex(r"[A-Za-z0-9_.\-]{1,12}", fullmatch=True),
    st.text(max_size=12),
    st.text(min_size=1, max_size=20).filter(lambda s: "/" not in s),
)
def test_app_handle_round_trip(scheduler: str, session: str, app_id: str) -> None:
    assert parse_app_handle(make_app_handle(scheduler, session, app_id)) == (
        scheduler,
        session,
        app_id,
    )


def _opts() -> runopts:
    opts = runopts()
    opts.add("s", type_=str, help="a str")
    opts.add("i", type_=int, help="an int")
    opts.add("f", type_=float, help="a float")
    opts.add("b", type_=bool, help="a bool")
    opts.add("l", type_=list[str], help="a list")
    opts.add("d", type_=dict[str, str], help="a dict")
    return opts


CFG_TEXT = st.one_of(
    DELIMS,
    st.lists(
        st.tuples(st.sampled_from(["s", "i", "f", "b", "l", "d", "x", "camelCase", ""]), DELIMS),
        max_size=4,
    ).map(lambda kvs: ",".join(f"{k}={v}" for k, v in kvs)),
)


@SETTINGS
@given(CFG_TEXT)
def test_cfg_from_str_only_typed_errors(text: str) -> None:
    opts = _opts()
    try:
        cfg = opts.cfg_from_str(text)
    except InvalidRunConfigException as e:
        _names_value_and_fix(str(e), text)
    else:
        for key, val in cfg.items():
            assert runopts.is_type(val, opts.get(key).opt_type)  # type: ignore[union-attr]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@SETTINGS
@given(
    st.one_of(
        st.dictionaries(st.sampled_from(["s", "i", "f", "b", "l", "d", "zz"]), JSON_VALUES).map(
            json.dumps
        ),
        ANY_TEXT,
    )
)
def test_cfg_from_json_repr_only_typed_errors(text: str) -> None:
    opts = _opts()
    try:
        cfg = opts.cfg_from_json_repr(text)
    except InvalidRunConfigException as e:
        _names_value_and_fix(str(e), text)
    else:
        for key, val in cfg.items():
            assert val is None or runopts.is_type(val, opts.get(key).opt_type)  # type: ignore[union-attr]


MOUNT_PARTS = st.lists(
    st.one_of(
        st.sampled_from(
            ["type=bind", "type=volume", "type=device", "type=nfs", "readonly", "perm=rw", "perm=x"]
        ),
        st.builds(
            lambda k, v: f"{k}={v}",
            st.sampled_from(["src", "dst", "perm", "type", "other"]),
            DELIMS,
        ),
        DELIMS,
    ),
    max_size=6,
)


@SETTINGS
@given(MOUNT_PARTS)
def test_parse_mounts_only_typed_errors(opts: list[str]) -> None:
    try:
        mounts = parse_mounts(opts)
    except InvalidMountError as e:
        msg = str(e)
        assert isinstance(e, ValueError)
        parts = {part.strip() for o in opts for part in o.split(",")}
        tokens = parts | {t.strip() for part in parts for t in part.split("=", 1)}
        assert any(t and (t in msg or repr(t)[1:-1] in msg) for t in tokens), msg  # names the input
        assert any(
            h in msg for h in ("Valid", "valid", "use", "write", "must", "needs", "given twice")
        ), msg
    else:
        assert all(m.dst_path for m in mounts)


@SETTINGS
@given(ANY_TEXT)
def test_resource_h_only_typed_errors(h: str) -> None:
    try:
        res = resource(h=h)
    except UnknownNamedResourceError as e:
        msg = str(e)
        assert f"`{h}`" in msg and "Registered named resources:" in msg and "gpu.small" in msg
        assert isinstance(e, KeyError)
    else:
        assert isinstance(res, Resource)
        assert h == "" or res.get_resource_name() == h


ARGV = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "--msg",
                "-n",
                "--n",
                "--ratio",
                "--debug",
                "--tags",
                "--env",
                "--ports",
                "-j",
                "--",
                "--script",
            ]
        ),
        DELIMS.filter(lambda s: not s.startswith("-h") and "--h" not in s),
    ),
    max_size=6,
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ARGV)
def test_component_argv_only_typed_errors(argv: list[str]) -> None:
    for fn in (echo, required):
        try:
            app = materialize_appdef(fn, argv)
        except ComponentArgumentError as e:
            msg = str(e)
            assert "Usage:" in msg or "Valid arguments" in msg, msg
        else:
            assert isinstance(app, AppDef)
