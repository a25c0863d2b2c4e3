"""The "TorchX app" extra link: the app's UI URL (when its scheduler has one)."""

from __future__ import annotations

from typing import Any

from torchx_airflow._airflow import BaseOperatorLink

__all__ = ["UI_URL_ATTR", "TorchXAppLink"]

#: The operator attribute holding the UI URL seen on the worker (read at task end).
UI_URL_ATTR = "_torchx_ui_url"


class TorchXAppLink(BaseOperatorLink):
    """Links a TorchX task to its app's UI (``AppStatus.ui_url``), e.g. a Ray dashboard.

    Airflow 3 stores the link in XCom under :py:attr:`xcom_key` when the task ends;
    :py:class:`torchx_airflow.TorchXOperator` also stores it as soon as the URL is known, so the
    button works while the app runs.
    """

    name = "TorchX app"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        """Returns the UI URL seen by the task (``""`` when the scheduler has none)."""
        return str(getattr(operator, UI_URL_ATTR, None) or "")
