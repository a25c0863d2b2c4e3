"""``torchx dashboard``: one web page for every app on every scheduler.

Layered above :mod:`torchx_core.runner` (beside ``cli``): it reads apps only through the public
Runner API (``list`` through the shared list read, ``status``, ``describe``, ``owner``,
``log_lines``, ``cancel``/``delete``) and the tracker results. Its web stack (Starlette, uvicorn,
Jinja2: the ``dashboard`` extra) is imported only by :func:`serve` / :func:`create_app`, never by
``import torchx_core`` or the other CLI commands.

* ``_board.py``: the apps of each scheduler, one shared list read per refresh period
* ``_pages.py``: what the app page shows; ``_logs.py``: tail, download and follow of a log
* ``_filter.py``: log filters (regular expressions) matched in worker processes, bounded in time
* ``_engines.py``: owner tokens -> links to the Airflow/Prefect/KFP UI
* ``_security.py``: token, Host check, cross-site POST refusal, CSP (every request)
* ``_server.py``: the Starlette routes and Jinja2 templates (``templates/``, ``static/``)
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torchx_core.specs.errors import TorchXError, extra_install_hint
from torchx_core.util.lazy import lazy_exports

if TYPE_CHECKING:
    from torchx_core.dashboard._engines import ENGINES
    from torchx_core.dashboard._security import is_loopback, new_token
    from torchx_core.dashboard._server import Settings
    from torchx_core.runner.api import Runner

__all__ = [
    "ENGINES",
    "MissingDashboardDependencyError",
    "Settings",
    "create_app",
    "is_loopback",
    "new_token",
    "serve",
]

# what `torchx dashboard` needs before it serves, loaded on first use: `Settings` lives beside
# the routes and imports the web stack with them
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ENGINES": "torchx_core.dashboard._engines",
        "is_loopback": "torchx_core.dashboard._security",
        "new_token": "torchx_core.dashboard._security",
        "Settings": "torchx_core.dashboard._server",
    },
    globals(),
)


class MissingDashboardDependencyError(TorchXError, ImportError):
    """The dashboard's web stack (Starlette, uvicorn, Jinja2) is not installed."""

    permanent = True


def _require() -> None:
    try:
        import jinja2  # noqa: F401 - only checks it is installed
        import starlette  # noqa: F401 - only checks it is installed
        import uvicorn  # noqa: F401 - only checks it is installed
    except ImportError as e:
        raise MissingDashboardDependencyError(
            f"`torchx dashboard` needs Starlette, uvicorn and Jinja2 ({e}); install them with"
            f" {extra_install_hint('dashboard')}"
        ) from e


def create_app(runner: Runner, settings: Settings) -> Any:
    """The dashboard's ASGI application and its board (see ``_server.create_app``)."""
    _require()
    from torchx_core.dashboard._server import create_app as _create

    return _create(runner, settings)


def serve(
    runner: Runner,
    settings: Settings,
    host: str,
    port: int,
    on_ready: Callable[[str], None] = lambda url: None,
) -> None:
    """Serves the dashboard on ``host:port`` (0: any free port) until interrupted.

    ``on_ready`` gets the base URL once the socket listens (before requests are served).
    """
    _require()
    import uvicorn

    app, _ = create_app(runner, settings)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(socket.SOMAXCONN)  # connections made right after on_ready wait in the backlog
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    on_ready(f"http://{shown}:{bound}")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
