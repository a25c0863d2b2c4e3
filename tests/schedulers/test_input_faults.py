"""Fault injection, group "bad input": a typed error before anything starts, on every scheduler.

One shared validation (``Scheduler._validate``) refuses, at dry run: more replicas than
``$TORCHX_MAX_REPLICAS`` (before one request per replica is built), NUL bytes in arguments or
environment values, and environment names that are empty or hold ``=`` or NUL.
"""

from __future__ import annotations

import math
import time

import pytest
import yaml

from torchx_core import specs
from torchx_core.components.dist import ddp
from torchx_core.schedulers import get_scheduler_factories
from torchx_core.schedulers.api import AppValidationError
from torchx_core.schedulers.slurm._script import shell_word
from torchx_core.specs.errors import ComponentArgumentError, MissingDependencyError, TorchXError
from torchx_core.specs.limits import DEFAULT_MAX_REPLICAS, MAX_REPLICAS_ENV
from torchx_core.util.yaml_emitter import dump_yaml

SCHEDULERS = sorted(get_scheduler_factories())


def _app(
    num_replicas: int = 1, args: list[str] | None = None, env: dict[str, str] | None = None
) -> specs.AppDef:
    role = specs.Role(
        "r", image="busybox", entrypoint="echo", args=args or ["hi"], env=env or {},
        num_replicas=num_replicas, resource=specs.Resource(cpu=1, gpu=0, memMB=256),
    )  # fmt: skip
    return specs.AppDef("bad", roles=[role])


def _dryrun(name: str, app: specs.AppDef) -> None:
    sched = get_scheduler_factories()[name]("t")
    samples = {str: "x", int: 1, float: 1.0, bool: False}
    cfg = {k: samples.get(o.opt_type, "x") for k, o in sched.run_opts() if o.is_required}
    sched.submit_dryrun(app, cfg)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", SCHEDULERS)
def test_replica_limit_is_checked_before_expansion_on_every_scheduler(name: str) -> None:
    start = time.monotonic()
    with pytest.raises(
        AppValidationError,
        match=rf"100000000 replicas, more than the limit of {DEFAULT_MAX_REPLICAS}",
    ):
        _dryrun(name, _app(num_replicas=100_000_000))
    assert time.monotonic() - start < 60  # it returns (the expansion would take hours)


def test_replica_limit_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_REPLICAS_ENV, "3")
    with pytest.raises(AppValidationError, match="4 replicas, more than the limit of 3"):
        _dryrun("local_cwd", _app(num_replicas=4))
    _dryrun("local_cwd", _app(num_replicas=3))


def test_ddp_j_above_the_limit_is_a_component_error() -> None:
    with pytest.raises(ComponentArgumentError, match="more than the limit"):
        ddp(script="t.py", j="99999999999999999999x1")


BAD_INPUT = {
    "NUL in an arg": {"args": ["a\x00b"]},
    "NUL in an env value": {"env": {"A": "x\x00y"}},
    "= in an env name": {"env": {"A=B": "1"}},
    "NUL in an env name": {"env": {"A\x00B": "1"}},
    "empty env name": {"env": {"": "1"}},
}


@pytest.mark.parametrize("name", SCHEDULERS)
@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_unstartable_args_and_env_are_refused_at_dryrun(name: str, case: str) -> None:
    with pytest.raises(AppValidationError, match=r"NUL|not valid") as err:
        _dryrun(name, _app(**BAD_INPUT[case]))  # type: ignore[arg-type]
    assert isinstance(err.value, TorchXError)


def test_slurm_carriage_return_is_encoded_not_written_raw() -> None:
    word = shell_word("a\r\nb")
    assert "\r" not in word  # sbatch refuses a script holding "\r\n" ("DOS line breaks")
    import subprocess

    out = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True)
    assert out.stdout == b"a\r\nb"


def test_dump_yaml_round_trips_inf_and_nan() -> None:
    data = {"a": math.inf, "b": -math.inf, "c": [math.nan, 1.5]}
    back = yaml.safe_load(dump_yaml(data))
    assert back["a"] == math.inf and back["b"] == -math.inf
    assert math.isnan(back["c"][0]) and back["c"][1] == 1.5


def test_overlay_url_of_a_missing_filesystem_is_a_typed_error() -> None:
    pytest.importorskip("fsspec")
    try:
        import s3fs  # noqa: F401 - only checks it is missing

        pytest.fail("s3fs is installed: this test needs a protocol whose package is missing")
    except ImportError:
        pass
    from torchx_core.specs.overlays import get_overlay

    role = specs.Role("r", image="x", metadata={"ns": "s3://bucket/overlay.yaml"})
    with pytest.raises(MissingDependencyError, match=r"s3fs.*pip install s3fs"):
        get_overlay(role, "ns", "k")
