"""``utils.hydra`` (TorchX's builtin): its command line, and how it drives Hydra.

``hydra-core`` is optional and not in the dev environment: Hydra is replaced here by a small
recording stand-in (these are unit tests of our glue); TorchX's own ``hydra_test`` runs it
against the real package.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import pytest

from torchx_core import specs
from torchx_core.components import utils
from torchx_core.components._hydra import MACRO_RESOLVERS
from torchx_core.specs import ComponentArgumentError, MissingDependencyError, finder
from torchx_core.specs.builders import parse_args


def test_hydra_is_a_builtin_with_torchx_short_options() -> None:
    assert finder.get_component("utils.hydra").validation_errors == []
    ns = parse_args(utils.hydra, ["-cn", "train", "-cd", "/cfg", "role.num_replicas=2", "a=b"])
    assert (ns.config_name, ns.config_dir, ns.overrides) == (
        "train",
        "/cfg",
        ["role.num_replicas=2", "a=b"],
    )
    ns = parse_args(utils.hydra, ["--config_name", "train"])
    assert (ns.config_dir, ns.overrides) == (".torchx", [])


def test_annotated_option_names_are_extra_flags() -> None:
    """TorchX's component convention: ``Annotated[X, "-flag"]`` adds ``-flag`` to ``--name``."""

    def comp(x: Annotated[int, "-n", "not a flag"] = 1, h: str = "") -> specs.AppDef:
        """c

        Args:
            x: x
            h: h
        """
        raise NotImplementedError

    assert parse_args(comp, ["-n", "3"]).x == 3
    assert parse_args(comp, ["--x", "4", "-h", "y"]).h == "y"


def test_without_hydra_core_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "hydra", None)
    with pytest.raises(MissingDependencyError, match="pip install hydra-core"):
        utils.hydra(config_name="c")


class _Hydra:
    """Records what the component asks of Hydra and OmegaConf."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls: list[tuple[str, Any]] = []
        self.resolvers: dict[str, Any] = {}

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        hydra = types.ModuleType("hydra")
        hydra_utils = types.ModuleType("hydra.utils")
        omegaconf = types.ModuleType("omegaconf")

        @contextmanager
        def initialize_config_dir(config_dir: str, version_base: str) -> Iterator[None]:
            self.calls.append(("init", (config_dir, version_base)))
            yield
            self.calls.append(("cleared", None))

        def compose(config_name: str, overrides: list[str]) -> dict[str, Any]:
            self.calls.append(("compose", (config_name, overrides)))
            return {"app": {"_target_": "x"}} if self.app is not None else {"role": {}}

        def instantiate(cfg: Any, _convert_: str) -> Any:
            self.calls.append(("instantiate", (cfg, _convert_)))
            return self.app

        class OmegaConf:
            @staticmethod
            def register_new_resolver(name: str, fn: Any, replace: bool) -> None:
                assert replace
                self.resolvers[name] = fn

            @staticmethod
            def to_yaml(cfg: Any) -> str:
                return str(cfg)

        hydra.compose = compose  # type: ignore[attr-defined]
        hydra.initialize_config_dir = initialize_config_dir  # type: ignore[attr-defined]
        hydra_utils.instantiate = instantiate  # type: ignore[attr-defined]
        omegaconf.OmegaConf = OmegaConf  # type: ignore[attr-defined]
        for name, mod in (("hydra", hydra), ("hydra.utils", hydra_utils), ("omegaconf", omegaconf)):
            monkeypatch.setitem(sys.modules, name, mod)


def _app() -> specs.AppDef:
    return specs.AppDef("job", roles=[specs.Role("r", image="i", entrypoint="echo")])


def test_composes_in_the_absolute_config_dir_and_instantiates_app(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    app = _app()
    fake = _Hydra(app)
    fake.install(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert utils.hydra("role.num_replicas=2", config_name="train", config_dir="cfg") is app
    assert fake.calls == [
        ("init", (str(tmp_path / "cfg"), "1.3")),
        ("compose", ("train", ["role.num_replicas=2"])),
        ("cleared", None),  # Hydra's global state is left clean: the component can run again
        ("instantiate", ({"_target_": "x"}, "all")),
    ]
    # TorchX's resolver names and ours, each giving the macro escaped (kept literal)
    assert set(fake.resolvers) == set(MACRO_RESOLVERS)
    assert fake.resolvers["torchx.app_id"]() == "\\" + specs.macros.app_id
    assert fake.resolvers["torchx_core.img_root"]() == "\\" + specs.macros.img_root


def test_a_config_without_an_appdef_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _Hydra(None).install(monkeypatch)
    with pytest.raises(ComponentArgumentError, match="has no 'app' key"):
        utils.hydra(config_name="c", config_dir="/cfg")
    _Hydra({"name": "not an AppDef"}).install(monkeypatch)
    with pytest.raises(ComponentArgumentError, match="built a dict, not an AppDef"):
        utils.hydra(config_name="c", config_dir="/cfg")
