"""Serving components: ``serve.torchserve`` registers a model with a TorchServe server."""

from __future__ import annotations

from torchx_core import specs
from torchx_core.components import IMAGE


def torchserve(
    model_path: str,
    management_api: str,
    image: str = IMAGE,
    params: dict[str, str] | None = None,
    dryrun: bool = False,
) -> specs.AppDef:
    """Registers a model archive (``.mar``) with TorchServe through its management API.

    The model must be reachable by the TorchServe server (an ``http(s)://`` URL or a path it can
    read). ``params`` are passed as query parameters of the registration call (see the
    TorchServe management API, e.g. ``initial_workers=1,model_name=mnist``).

    Args:
        model_path: URL or path of the model archive, as the TorchServe server sees it
        management_api: URL of the TorchServe management API (e.g. http://localhost:8081)
        image: image that contains torchx-suite
        params: extra registration parameters (e.g. initial_workers=1,synchronous=true)
        dryrun: print the registration request instead of sending it
    """
    args = [
        "-m",
        "torchx_core.components._apps.serve_main",
        "--model_path",
        model_path,
        "--management_api",
        management_api,
    ]
    for key, value in sorted((params or {}).items()):
        args += ["--param", f"{key}={value}"]
    if dryrun:
        args.append("--dryrun")
    return specs.AppDef(
        name="torchx-serve-torchserve",
        roles=[
            specs.Role(
                name="torchx-serve-torchserve",
                image=image,
                entrypoint="python",
                args=args,
                resource=specs.Resource(cpu=1, gpu=0, memMB=1024),
                port_map={"model-download": 8222},
            )
        ],
    )
