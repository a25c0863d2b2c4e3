"""The "TorchX app" extra link: the app's page on a ``torchx dashboard`` when one is configured
(the ``torchx`` connection's ``dashboard_url``, else ``$TORCHX_DASHBOARD_URL`` on the worker),
else the app's UI URL (when its scheduler has one)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from torchx_airflow._airflow import BaseOperatorLink
from torchx_core.runner.links import InvalidDashboardUrlError, dashboard_app_url

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["DASHBOARD_URL_ATTR", "HANDLE_ATTR", "UI_URL_ATTR", "TorchXAppLink", "app_link"]

#: The operator attribute holding the UI URL seen on the worker (read at task end).
UI_URL_ATTR = "_torchx_ui_url"
#: The operator attribute holding the app handle of the current try.
HANDLE_ATTR = "_handle"
#: The operator attribute holding the connection's dashboard URL (set per try; None: unset).
DASHBOARD_URL_ATTR = "_torchx_dashboard_url"


def app_link(app_handle: str | None, ui_url: str | None, dashboard_url: str | None) -> str:
    """The link of an app: its dashboard page when a dashboard URL is configured
    (``dashboard_url``, else ``$TORCHX_DASHBOARD_URL``), else ``ui_url`` (``""`` when none).

    A malformed ``$TORCHX_DASHBOARD_URL`` is logged and ignored: a link never fails a task (the
    connection's own field is checked when the connection is read).
    """
    if app_handle:
        try:
            url = dashboard_app_url(app_handle, dashboard_url)
        except InvalidDashboardUrlError as e:
            logger.warning("%s; linking to the scheduler's UI instead", e)
            url = None
        if url:
            return url
    return ui_url or ""


class TorchXAppLink(BaseOperatorLink):
    """Links a TorchX task to its app: the dashboard's app page, else the app's UI
    (``AppStatus.ui_url``, e.g. a Ray dashboard).

    Airflow 3 stores the link in XCom under :py:attr:`xcom_key` when the task ends;
    :py:class:`torchx_airflow.TorchXOperator` also stores it as soon as the app is known, so the
    button works while the app runs.
    """

    name = "TorchX app"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        """Returns the link for the app the task ran (``""`` when there is none)."""
        return app_link(
            getattr(operator, HANDLE_ATTR, None),
            getattr(operator, UI_URL_ATTR, None),
            getattr(operator, DASHBOARD_URL_ATTR, None),
        )
