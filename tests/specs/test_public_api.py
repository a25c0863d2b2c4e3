"""The public names of ``torchx_core.specs`` (TorchX's ``torchx.specs``) are all there.

The lists follow the TorchX specs reference page (its autoclass/autofunction
entries) and what users of the older edition rely on (``get_named_resources``).
"""

from __future__ import annotations

import importlib

import pytest

from torchx_core import specs
from torchx_core.specs import api

SPECS_NAMES = [
    "AppDef",
    "Role",
    "RetryPolicy",
    "Resource",
    "resource",
    "Workspace",
    "macros",
    "CfgVal",
    "runopts",
    "runopt",
    "AppStatus",
    "AppState",
    "ReplicaState",
    "AppDryRunInfo",
    "AppHandle",
    "parse_app_handle",
    "ParsedAppHandle",
    "parse_mounts",
    "BindMount",
    "VolumeMount",
    "DeviceMount",
    "named_resources",
    "get_named_resources",
    "RoleStatus",
    "ReplicaStatus",
    "StructuredOpts",
    "TorchXError",
    "AppStatusError",
    "InvalidRunConfigException",
    "MalformedAppHandleException",
    "UnknownAppException",
    "UnknownSchedulerException",
    "ComponentValidationException",
    "ComponentNotFoundException",
    "MISSING",
    "NONE",
    "NULL_RESOURCE",
    "ALL",
]

SUBMODULE_NAMES = {
    "torchx_core.specs.overlays": (
        "set_overlay get_overlay apply_overlay validate_overlay PUT JOIN DEL"
    ),
    "torchx_core.specs.file_linter": (
        "validate get_fn_docstring LinterMessage ComponentFunctionValidator"
    ),
    "torchx_core.specs.named_resources_generic": "NAMED_RESOURCES",
    "torchx_core.specs.named_resources_aws": "NAMED_RESOURCES",
    "torchx_core.specs.builders": "materialize_appdef parse_args",
    "torchx_core.specs.finder": "get_component get_components",
}


@pytest.mark.parametrize("name", SPECS_NAMES)
def test_reference_names_are_exported(name: str) -> None:
    assert name in specs.__all__
    assert getattr(specs, name) is not None


def test_all_lists_agree_and_resolve() -> None:
    assert set(api.__all__) <= set(specs.__all__)
    assert len(specs.__all__) == len(set(specs.__all__))
    # every exported name resolves to a real object, defined in our package or a builtin alias
    for name in specs.__all__:
        obj = getattr(specs, name)
        assert obj is not None, name
        module = getattr(obj, "__module__", None) or type(obj).__module__
        assert module.startswith(("torchx_core.specs", "builtins", "typing", "types")), (
            name,
            module,
        )
    for name in api.__all__:
        assert getattr(api, name) is getattr(specs, name), name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        specs.nope  # noqa: B018


@pytest.mark.parametrize("module", sorted(SUBMODULE_NAMES))
def test_submodule_names(module: str) -> None:
    mod = importlib.import_module(module)
    for name in SUBMODULE_NAMES[module].split():
        assert hasattr(mod, name), f"{module}.{name}"


def test_structured_opts_is_one_class() -> None:
    from torchx_core.schedulers.api import StructuredOpts

    assert StructuredOpts is specs.StructuredOpts
