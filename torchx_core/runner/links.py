"""Links to an app's page on a ``torchx dashboard``, for the engines' "open the app" buttons.

An engine adapter (Airflow's extra link, Prefect's artifact, KFP's UI metadata) links to the
dashboard when one is configured: its own setting first, else ``$TORCHX_DASHBOARD_URL``::

    from torchx_core.runner.links import dashboard_app_url

    dashboard_app_url("slurm://torchx/1234", "http://ml-host:8288")
    # 'http://ml-host:8288/app?handle=slurm%3A%2F%2Ftorchx%2F1234'

Stdlib only; the dashboard's web stack is never imported here.
"""

from __future__ import annotations

import os
from urllib.parse import quote, urlsplit

from torchx_core.specs.errors import TorchXError

__all__ = ["ENV_DASHBOARD_URL", "InvalidDashboardUrlError", "dashboard_app_url", "dashboard_base"]

#: the dashboard's base URL when the engine's own setting is empty
ENV_DASHBOARD_URL = "TORCHX_DASHBOARD_URL"


class InvalidDashboardUrlError(TorchXError, ValueError):
    """A configured dashboard URL is not an absolute http(s) URL."""

    permanent = True


def dashboard_base(configured: str | None = None) -> str | None:
    """The dashboard's base URL: ``configured`` if non-empty, else ``$TORCHX_DASHBOARD_URL``.

    Returns None when neither is set.

    Raises:
        InvalidDashboardUrlError: the URL is not ``http(s)://host[:port][/path]``.
    """
    base = (configured or "").strip() or os.environ.get(ENV_DASHBOARD_URL, "").strip()
    if not base:
        return None
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        source = "the dashboard URL" if (configured or "").strip() else f"${ENV_DASHBOARD_URL}"
        raise InvalidDashboardUrlError(
            f"{source} {base!r} is not an absolute http(s) URL without query or fragment;"
            " give the address `torchx dashboard` prints, e.g. http://ml-host:8288"
        )
    return base.rstrip("/")


def dashboard_app_url(app_handle: str, configured: str | None = None) -> str | None:
    """The URL of ``app_handle``'s page on the dashboard, or None when none is configured.

    Args:
        app_handle: the app (``{scheduler}://{session}/{app_id}``)
        configured: the engine's own dashboard URL setting (empty: ``$TORCHX_DASHBOARD_URL``)
    """
    base = dashboard_base(configured)
    if base is None:
        return None
    return f"{base}/app?handle={quote(app_handle, safe='')}"
