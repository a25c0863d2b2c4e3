"""Unit tests for torchx_core.specs.finder."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from torchx_core.specs import ComponentNotFoundException, ComponentValidationException, finder

FIXTURE = Path(__file__).parent / "components_fixture.py"


@pytest.fixture
def fake_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A builtin package ``fakecomps`` with dist.py and utils/echo.py, plus one plugin package."""
    pkg = tmp_path / "fakecomps"
    (pkg / "utils").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "utils" / "__init__.py").write_text("")
    body = (
        "from torchx_core.specs import AppDef, Role\n"
        "def {name}(msg: str = 'x') -> AppDef:\n"
        "    '''{doc}\n\n    Args:\n        msg: m\n    '''\n"
        "    return AppDef('{name}', [Role('r', image='i', args=[msg])])\n"
        "def _private() -> AppDef:\n    '''p'''\n    return AppDef('p')\n"
        "def helper(x: int) -> int:\n    return x\n"
    )
    (pkg / "dist.py").write_text(body.format(name="ddp", doc="Distributed data parallel."))
    (pkg / "utils" / "echo.py").write_text(body.format(name="echo", doc="Echo."))
    plugin = tmp_path / "myplugin"
    plugin.mkdir()
    (plugin / "__init__.py").write_text(body.format(name="train", doc="Plugin trainer."))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(finder, "BUILTINS_PACKAGE", "fakecomps")
    eps = [
        EntryPoint("team", "myplugin", finder.ENTRY_POINT_GROUP),
        EntryPoint("broken", "no_such_pkg_xyz", finder.ENTRY_POINT_GROUP),
        EntryPoint("_0", "myplugin", finder.ENTRY_POINT_GROUP),
    ]
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: iter(eps))
    finder._registry.clear()
    yield tmp_path
    finder._registry.clear()


def test_builtins_and_entry_points(fake_tree: Path) -> None:
    comps = finder.get_components()
    # migration break 2: as TorchX, a `_`-prefixed entry point adds its components unprefixed
    assert set(comps) == {"dist.ddp", "utils.echo.echo", "team.train", "train"}
    ddp = finder.get_component("dist.ddp")
    assert ddp.description == "Distributed data parallel." and ddp.fn_name == "ddp"
    assert ddp.validation_errors == []
    assert ddp.fn().name == "ddp"
    assert finder.get_component("team.train").fn().name == "train"


def test_unknown_component_suggests(fake_tree: Path) -> None:
    with pytest.raises(ComponentNotFoundException) as e:
        finder.get_component("dist.dpp")
    msg = str(e.value)
    assert "dist.dpp" in msg and "Did you mean: 'dist.ddp'" in msg and "torchx builtins" in msg


def test_file_component() -> None:
    comp = finder.get_component(f"{FIXTURE}:echo")
    assert comp.fn_name == "echo" and comp.description.startswith("Echoes a message.")
    assert comp.fn().name == "echo"


def test_module_component() -> None:
    comp = finder.get_component("components_fixture:required")
    assert comp.fn_name == "required" and comp.validation_errors == []
    with pytest.raises(ComponentValidationException, match="Supported return annotation: AppDef"):
        finder.get_component("torchx_core.specs.finder:get_components")


def test_invalid_file_component_raises_validation() -> None:
    with pytest.raises(ComponentValidationException, match="no_docs"):
        finder.get_component(f"{FIXTURE}:no_docs")


@pytest.mark.parametrize(
    "name, needle",
    [
        ("/no/such/file.py:fn", "does not exist"),
        (f"{FIXTURE}:ech", "Did you mean: 'echo'"),
        ("no_such_module_xyz:fn", "cannot import module"),
        (":fn", "not of the form"),
        ("", "non-empty"),
    ],
)
def test_component_lookup_errors(name: str, needle: str) -> None:
    with pytest.raises(ComponentNotFoundException, match=needle):
        finder.get_component(name)


def test_builtin_source(fake_tree: Path) -> None:
    assert "def ddp(" in finder.get_builtin_source("dist.ddp")


def test_real_builtins_are_valid_components() -> None:
    finder._registry.clear()
    for name, comp in finder.get_components().items():
        assert comp.validation_errors == [], f"builtin component {name}: {comp.validation_errors}"


def test_typed_component_without_docstring_runs_as_in_torchx() -> None:
    """Migration break 1: accepted, with the tip as its description."""
    comp = finder.get_component(f"{FIXTURE}:typed_no_docs")
    assert comp.validation_errors == []
    assert comp.description.startswith("typed_no_docs") and "TIP" in comp.description
    assert comp.fn("x", 2).roles[0].args == ["x", "x"]


def test_torchx_finder_classes_and_module_helpers(tmp_path: Path) -> None:
    """TorchX's public finder names: ``module_relname``, ``is_package``,
    ``is_namespace_package``, ``ModuleComponentsFinder`` and ``CustomComponentsFinder``."""
    import torchx_core.components as comps
    import torchx_core.components.dist as dist
    from torchx_core.specs import finder

    assert finder.module_relname(dist, relative_to=comps) == "dist"
    assert finder.module_relname(comps, relative_to=comps) == ""
    with pytest.raises(ValueError, match="is not a submodule of"):
        finder.module_relname(comps, relative_to=dist)
    assert finder.is_package(comps) and not finder.is_package(dist)
    assert not finder.is_namespace_package(comps)
    names = [c.name for c in finder.ModuleComponentsFinder(comps, group="g").find(None)]
    assert "g.dist.ddp" in names and "g.utils.echo" in names
    src = tmp_path / "mine.py"
    src.write_text(
        "import torchx_core.specs as specs\n\n"
        "def comp(msg: str = 'hi') -> specs.AppDef:\n"
        '    """Says hi."""\n'
        "    return specs.AppDef('a', roles=[specs.Role('r', 'img', entrypoint='echo')])\n"
    )
    (found,) = finder.CustomComponentsFinder(str(src), "comp").find(None)
    assert (found.name, found.fn_name, found.description) == (f"{src}:comp", "comp", "Says hi.")
    assert found.validation_errors == []


def test_builtin_source_runs_as_a_component_of_ones_own(tmp_path: Path) -> None:
    """TorchX: ``get_builtin_source`` (``torchx builtins --print``) includes the module's imports
    before the function, so the copy is a working component file."""
    from torchx_core.specs.builders import materialize_appdef

    src = finder.get_builtin_source("utils.echo")
    assert src.index("from torchx_core.components import IMAGE") < src.index("def echo(")
    copy = tmp_path / "copy.py"
    copy.write_text(src)
    comp = finder.get_component(f"{copy}:echo")
    assert comp.validation_errors == []
    app = materialize_appdef(comp.fn, ["--msg", "hi"])
    assert app.roles[0].entrypoint == "echo" and app.roles[0].args == ["hi"]


def test_builtin_source_copies_the_helpers_the_component_uses(tmp_path: Path) -> None:
    """``utils.booth`` calls a module helper: the printed copy holds it, so the copy runs (as the
    copy of a TorchX builtin does)."""
    from torchx_core.components import utils
    from torchx_core.specs.builders import materialize_appdef

    src = finder.get_builtin_source("utils.booth")
    assert src.index("def _run_app_module(") < src.index("def booth(")
    assert "def copy(" not in src  # only what booth uses
    copy = tmp_path / "booth_copy.py"
    copy.write_text(src)
    comp = finder.get_component(f"{copy}:booth")
    app = materialize_appdef(comp.fn, ["--x1", "1", "--x2", "3"])
    assert app.roles[0].args == utils.booth(1.0, 3.0).roles[0].args


def test_load_components_discovers_now_with_the_given_validators() -> None:
    """TorchX's ``finder._load_components(validators)``: every component, linted by
    ``validators`` (the default checks if None), without the lookup cache."""
    import ast

    from torchx_core.specs.file_linter import ComponentFunctionValidator, LinterMessage

    class Refuse(ComponentFunctionValidator):
        def validate(self, app_specs_func_def: ast.FunctionDef) -> list[LinterMessage]:
            return [self._gen_linter_message("refused", app_specs_func_def.lineno)]

    comps = finder._load_components(None)
    assert comps["utils.echo"].fn_name == "echo" and comps["utils.echo"].validation_errors == []
    assert comps.keys() == finder.get_components().keys()
    refused = finder._load_components([Refuse()])
    assert refused["utils.echo"].validation_errors == ["refused"]
    assert finder.get_components()["utils.echo"].validation_errors == []  # the cache is apart


def test_builtin_echo_is_described_as_in_torchx() -> None:
    """``torchx builtins`` lists ``utils.echo`` with TorchX's description."""
    description = finder.get_component("utils.echo").description
    assert description == "Echos a message to stdout (calls echo)"


def test_setting_components_to_none_rediscovers(
    fake_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TorchX's cache is the module attribute ``finder._components``: its users' tests set it to
    None to have the next lookup discover the components again."""
    import importlib.metadata

    assert "team.train" in finder.get_components()
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: iter([]))
    assert "team.train" in finder.get_components()  # discovered once, then cached
    assert finder._components is not None and "team.train" in finder._components
    finder._components = None
    assert "team.train" not in finder.get_components()
    assert "dist.ddp" in finder.get_components()
