"""The ``utils.hydra`` component's work: compose a Hydra config and instantiate its ``app``.

``hydra-core`` is optional and imported only here, when the component is called.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from torchx_core.specs import AppDef, macros
from torchx_core.specs.errors import ComponentArgumentError, MissingDependencyError

logger: logging.Logger = logging.getLogger(__name__)

#: resolvers a config can use for the run-time macros: TorchX's names (``${torchx.app_id:}``)
#: and this package's (``${torchx_core.app_id:}``); each yields the macro text itself, escaped
#: so that OmegaConf keeps it literal until the scheduler fills it in
MACRO_RESOLVERS: dict[str, str] = {
    f"{prefix}.{name}": getattr(macros, name)
    for prefix in ("torchx", "torchx_core")
    for name in ("app_id", "replica_id", "rank0_env", "img_root")
}


def compose_app(config_name: str, config_dir: str, overrides: list[str]) -> AppDef:
    """The ``AppDef`` that the config ``config_name`` of ``config_dir`` describes under ``app``.

    Raises:
        MissingDependencyError: ``hydra-core`` is not installed
        ComponentArgumentError: the config has no ``app``, or it does not build an ``AppDef``
    """
    try:
        from hydra import compose, initialize_config_dir
        from hydra.utils import instantiate
        from omegaconf import OmegaConf
    except ModuleNotFoundError as e:
        raise MissingDependencyError(
            "hydra",
            "",
            "the utils.hydra component",
            pip_hint="pip install hydra-core",
            distribution="hydra-core",
        ) from e

    for key, macro in MACRO_RESOLVERS.items():
        OmegaConf.register_new_resolver(key, _literal(macro), replace=True)
    abs_dir = os.path.abspath(os.path.expanduser(config_dir))
    # the context manager clears Hydra's global state again: the component can run twice
    with initialize_config_dir(config_dir=abs_dir, version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=list(overrides))
    if "app" not in cfg:
        raise ComponentArgumentError(
            f"utils.hydra: config {config_name!r} in {abs_dir} has no 'app' key; give it one"
            " with `_target_: torchx_core.specs.AppDef` (its fields: name, roles, ...)"
        )
    logger.debug("utils.hydra config:\n%s", OmegaConf.to_yaml(cfg))
    app = instantiate(cfg["app"], _convert_="all")
    if not isinstance(app, AppDef):
        raise ComponentArgumentError(
            f"utils.hydra: the 'app' of config {config_name!r} built a {type(app).__name__},"
            " not an AppDef; set its `_target_` to torchx_core.specs.AppDef"
        )
    return app


def _literal(macro: str) -> Callable[[], str]:
    def resolve() -> str:
        return "\\" + macro

    return resolve
