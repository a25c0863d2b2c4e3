"""Unit tests for the exception tree (torchx_core/specs/errors.py)."""

from __future__ import annotations

import pytest

from torchx_core.specs import errors
from torchx_core.specs.errors import (
    AppStatusError,
    ComponentNotFoundException,
    InvalidRunConfigException,
    MalformedAppHandleException,
    MissingDependencyError,
    TorchXError,
    UnknownAppException,
    UnknownNamedResourceError,
    UnknownSchedulerException,
    did_you_mean,
    extra_install_hint,
    import_optional,
)

BUILTIN_MIXINS = {
    "InvalidRunConfigException": ValueError,
    "MalformedAppHandleException": ValueError,
    "UnknownSchedulerException": ValueError,
    "UnknownAppException": LookupError,
    "UnknownNamedResourceError": KeyError,
    "InvalidResourceError": ValueError,
    "InvalidMountError": ValueError,
    "InvalidWorkspaceError": ValueError,
    "InvalidOverlayError": ValueError,
    "OverlayTypeError": TypeError,
    "ComponentValidationException": ValueError,
    "ComponentArgumentError": ValueError,
    "ComponentNotFoundException": LookupError,
    "AppDefSerializationError": ValueError,
    "MissingDependencyError": ImportError,
    "RunOptDefinitionError": ValueError,
}


def test_every_public_error_is_a_torchx_error() -> None:
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert issubclass(obj, TorchXError), name


@pytest.mark.parametrize("name, builtin", sorted(BUILTIN_MIXINS.items()))
def test_builtin_mixins(name: str, builtin: type[Exception]) -> None:
    assert issubclass(getattr(errors, name), builtin)


def test_public_names_are_reexported_from_specs() -> None:
    from torchx_core import specs
    from torchx_core.specs import api

    for name in (
        "TorchXError",
        "AppStatusError",
        "InvalidRunConfigException",
        "MalformedAppHandleException",
        "UnknownSchedulerException",
        "UnknownAppException",
        "MissingDependencyError",
    ):
        assert getattr(specs, name) is getattr(errors, name) is getattr(api, name)


def test_messages() -> None:
    e = UnknownSchedulerException("slurn", known=["slurm", "local_cwd"])
    assert (
        "'slurn'" in str(e) and "Did you mean: 'slurm'" in str(e) and "local_cwd, slurm" in str(e)
    )
    assert e.scheduler_backend == "slurn"
    assert "Unknown app = local://s/x" in str(UnknownAppException("local://s/x"))
    cfg_err = InvalidRunConfigException("bad", "k", {"k": 1})
    assert str(cfg_err) == "bad. Given: {'k': 1}" and cfg_err.cfg_key == "k"
    assert str(InvalidRunConfigException("bad", "k", {})) == "bad. Given: <EMPTY>"
    assert str(UnknownNamedResourceError("x", ["a"])).startswith("No named resource found for `x`.")
    assert "'foo'" in str(MalformedAppHandleException("foo"))
    status = object()
    assert AppStatusError(status, "msg").app_status is status  # type: ignore[arg-type]
    assert isinstance(ComponentNotFoundException("x"), LookupError)


def test_missing_dependency_names_the_extra() -> None:
    e = MissingDependencyError("kubernetes", "kubernetes", "the kubernetes scheduler")
    assert extra_install_hint("kubernetes") in str(e)
    assert e.name == "kubernetes" and e.extra == "kubernetes"
    with pytest.raises(MissingDependencyError) as info:
        import_optional("no_such_module_xyz.sub", "aws", "a test")
    assert info.value.module == "no_such_module_xyz"
    assert extra_install_hint("aws") in str(info.value) and "a test" in str(info.value)
    assert isinstance(info.value.__cause__, ImportError)
    assert import_optional("json", "all").dumps([1]) == "[1]"


def test_did_you_mean() -> None:
    assert did_you_mean("slurn", ["slurm", "local"]) == " Did you mean: 'slurm'?"
    assert did_you_mean("zzz", ["slurm"]) == ""


def test_permanent_errors_are_those_a_retry_cannot_fix() -> None:
    from torchx_core.runner.lifecycle import AppFailedError, InvalidTaskArgumentError
    from torchx_core.schedulers.api import AppValidationError, SchedulerError
    from torchx_core.specs.errors import is_permanent_error

    permanent = [
        InvalidRunConfigException("bad", "k", {"k": 1}),
        UnknownSchedulerException("slurn"),
        ComponentNotFoundException("x"),
        AppValidationError("no roles"),
        InvalidTaskArgumentError("poll_interval must be > 0"),
    ]
    transient = [SchedulerError("squeue timed out"), TimeoutError(), RuntimeError("boom")]
    assert [is_permanent_error(e) for e in permanent] == [True] * len(permanent)
    assert [is_permanent_error(e) for e in transient] == [False] * len(transient)
    # an engine's own wrapper of a permanent error is permanent; of a transient one, not
    for cause, expected in ((permanent[0], True), (transient[0], False)):
        try:
            try:
                raise cause
            except Exception as e:
                raise RuntimeError("task failed") from e
        except RuntimeError as wrapped:
            assert is_permanent_error(wrapped) is expected
    # a cause cycle ends
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert is_permanent_error(a) is False
    assert AppFailedError.permanent is False
