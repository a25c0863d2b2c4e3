"""Unit tests for StructuredOpts (torchx_core/specs/structured_opts.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

import pytest

from torchx_core.specs import InvalidRunConfigException, StructuredOpts, runopts


@dataclass
class K8sOpts(StructuredOpts):
    context: str | None = None
    """kube context to use"""

    namespace: str = "default"
    """namespace to submit to"""


@dataclass
class MyOpts(StructuredOpts):
    cluster_name: str
    """Name of the cluster to submit to."""

    num_retries: int = 3
    """Number of retry attempts."""

    priority: float = 1
    tags: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict, metadata={"help": "pod labels"})
    debug: bool = False
    k8s: K8sOpts = field(default_factory=K8sOpts)


def test_as_runopts() -> None:
    opts = MyOpts.as_runopts()
    assert isinstance(opts, runopts)
    assert [k for k, _ in opts] == [
        "cluster_name",
        "num_retries",
        "priority",
        "tags",
        "labels",
        "debug",
        "k8s.context",
        "k8s.namespace",
    ]
    assert opts.get("cluster_name").is_required
    assert opts.get("cluster_name").help == "Name of the cluster to submit to."
    assert opts.get("num_retries").help == "Number of retry attempts."
    assert opts.get("labels").help == "pod labels"
    assert opts.get("priority").default == 1.0
    assert opts.get("k8s.namespace").default == "default"
    assert opts.get("k8s.context").help == "kube context to use"
    assert opts.get("tags").default == []


def test_from_cfg_types_and_aliases() -> None:
    opts = MyOpts.from_cfg(
        {
            "clusterName": "c1",
            "numRetries": "5",
            "tags": "a,b",
            "labels": "x:1",
            "debug": "true",
            "k8s.context": "ctx",
            "priority": 2,
        }
    )
    assert opts == MyOpts(
        cluster_name="c1",
        num_retries=5,
        priority=2.0,
        tags=["a", "b"],
        labels={"x": "1"},
        debug=True,
        k8s=K8sOpts(context="ctx"),
    )


def test_from_cfg_accepts_resolved_cfg() -> None:
    cfg = MyOpts.as_runopts().resolve({"cluster_name": "c"})
    assert MyOpts.from_cfg(cfg) == MyOpts(cluster_name="c")


def test_from_cfg_unknown_key_did_you_mean() -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        MyOpts.from_cfg({"cluster_name": "c", "num_retry": 1, "k8s.contxt": "x"})
    msg = str(e.value)
    assert "num_retry" in msg and "Did you mean: 'num_retries'" in msg
    assert "k8s.contxt" in msg and "'context'" in msg


def test_from_cfg_missing_and_wrong_type() -> None:
    with pytest.raises(InvalidRunConfigException) as e:
        MyOpts.from_cfg({"num_retries": [1]})
    msg = str(e.value)
    assert "Required run option: cluster_name" in msg
    assert "num_retries" in msg and "[1]" in msg


def test_mapping_interface() -> None:
    opts = MyOpts(cluster_name="c", k8s=K8sOpts(context="x"))
    assert opts["cluster_name"] == "c"
    assert opts.get("clusterName") == "c"
    assert opts["k8s.context"] == "x"
    assert opts.get("missing", 7) == 7
    # nested options are flattened, as TorchX HEAD iterates them
    assert list(opts) == [
        "cluster_name",
        "num_retries",
        "priority",
        "tags",
        "labels",
        "debug",
        "k8s.context",
        "k8s.namespace",
    ]
    assert len(opts) == 8 and "debug" in opts and "k8s.namespace" in opts
    assert "k8s.missing" not in opts


def test_docstrings_via_get_docstrings() -> None:
    docs = MyOpts.get_docstrings()
    assert docs["num_retries"] == "Number of retry attempts."
    assert docs["priority"] == "priority"  # no docstring: the name
    assert docs["k8s.context"] == "kube context to use"  # nested, flattened (TorchX HEAD)


def test_unset_optional_group_has_no_options() -> None:
    @dataclass
    class WithOptional(StructuredOpts):
        name: str = "n"
        k8s: K8sOpts | None = None

    opts = WithOptional()
    assert list(opts) == ["name"] and len(opts) == 1
    assert opts.get("k8s.context") is None


def test_cfg_key_names_an_option_that_cannot_be_a_field_name() -> None:
    @dataclass
    class Kebab(StructuredOpts):
        mail_user: str | None = field(default=None, metadata={"cfg_key": "mail-user"})
        """User to mail on job end."""

    opts = Kebab.from_cfg({"mail-user": "me@x"})
    assert opts.mail_user == "me@x" and opts["mail-user"] == "me@x" and list(opts) == ["mail-user"]
    opt = Kebab.as_runopts().get("mail-user")
    assert opt is not None and opt.help == "User to mail on job end."
    with pytest.raises(InvalidRunConfigException, match="mail-user"):
        Kebab.from_cfg({"mail-usr": "x"})


def test_or_merges_two_opts_into_a_cfg_dict() -> None:
    @dataclass
    class Other(StructuredOpts):
        num_retries: int = 9
        extra: str | None = None

    merged = MyOpts(cluster_name="c", k8s=K8sOpts(context="x")) | Other()
    assert isinstance(merged, dict)
    assert merged["cluster_name"] == "c" and merged["k8s.context"] == "x"
    assert merged["num_retries"] == 9 and "extra" in merged and merged["extra"] is None


def test_not_a_dataclass_is_definition_error() -> None:
    class Plain(StructuredOpts):
        pass

    with pytest.raises(TypeError, match="@dataclass"):
        Plain.as_runopts()


def test_importable_from_schedulers_api() -> None:
    from torchx_core.schedulers.api import StructuredOpts as Reexported

    assert Reexported is StructuredOpts


class Color(Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class ChoiceOpts(StructuredOpts):
    mode: Literal["fast", "safe"] = "safe"
    color: Color = Color.RED
    level: Literal[1, 2] | None = None


def test_literal_and_enum_options() -> None:
    opts = ChoiceOpts.as_runopts()
    assert opts.get("mode").default == "safe"
    assert ChoiceOpts.from_cfg({"mode": "fast", "color": "blue", "level": "2"}) == ChoiceOpts(
        mode="fast", color=Color.BLUE, level=2
    )
    assert ChoiceOpts.from_cfg({"color": "BLUE"}).color is Color.BLUE
    with pytest.raises(InvalidRunConfigException) as e:
        ChoiceOpts.from_cfg({"mode": "slow", "color": "green"})
    msg = str(e.value)
    assert "'slow' is not one of the valid choices: 'fast', 'safe'" in msg
    assert "'green' is not one of the valid choices: 'RED', 'BLUE'" in msg
    assert opts.cfg_from_str("mode=fast,level=1") == {"mode": "fast", "level": 1}


def test_parameterized_builtins_are_not_nested_opts() -> None:
    """Python 3.10: ``isinstance(list[str], type)`` is True and ``issubclass`` then raised."""
    from torchx_core.specs.structured_opts import _is_nested

    assert not _is_nested(list[str]) and not _is_nested(dict[str, int]) and not _is_nested(str)
