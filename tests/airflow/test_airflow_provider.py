"""Provider registration: the metadata is valid for Airflow and the entry point finds it."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path

import airflow
import jsonschema
from packaging.utils import canonicalize_name

from torchx_airflow.provider import get_provider_info


def test_provider_info_validates_against_airflows_schema() -> None:
    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == canonicalize_name("torchx-suite")


def test_entry_point_points_at_get_provider_info() -> None:
    eps = [ep for ep in entry_points(group="apache_airflow_provider") if ep.dist is not None]
    ours = [ep for ep in eps if canonicalize_name(ep.dist.name) == "torchx-suite"]
    assert len(ours) == 1
    assert ours[0].load() is get_provider_info


def test_every_listed_module_and_link_imports() -> None:
    import importlib

    info = get_provider_info()
    for group in ("operators", "sensors", "triggers", "hooks"):
        for entry in info[group]:
            for mod in entry["python-modules"]:
                importlib.import_module(mod)
    for link in info["extra-links"]:
        mod, _, cls = link.rpartition(".")
        assert isinstance(getattr(importlib.import_module(mod), cls), type)


def test_the_torchx_connection_type_names_the_hook_and_its_form() -> None:
    import importlib

    (conn_type,) = get_provider_info()["connection-types"]
    assert conn_type["connection-type"] == "torchx"
    mod, _, cls = conn_type["hook-class-name"].rpartition(".")
    hook = getattr(importlib.import_module(mod), cls)
    assert hook.conn_type == "torchx" and hook.default_conn_name == "torchx_default"
    assert set(conn_type["conn-fields"]) == {
        "scheduler",
        "cfg",
        "session_name",
        "env",
        "dashboard_url",
    }
    behaviour = conn_type["ui-field-behaviour"]
    assert behaviour["hidden-fields"] == hook.get_ui_field_behaviour()["hidden_fields"]
    assert behaviour["relabeling"] == {"password": "Secret environment (JSON)"}
