"""Experiment tracking for apps: metadata, artifacts and lineage recorded from inside a job.

Inside the job::

    from torchx_core.tracker import app_run_from_env

    run = app_run_from_env()            # the run of this app (id = its app handle)
    run.add_metadata(lr=0.1, epochs=3)
    run.add_artifact("model", "s3://bucket/model.pt", {"format": "torchscript"})

On the launcher side, trackers are configured in ``.torchxconfig``; the runner injects them into
every replica's environment (``TORCHX_TRACKERS``, ``TORCHX_TRACKER_<NAME>_CONFIG``,
``TORCHX_JOB_ID``, ``TORCHX_PARENT_RUN_ID``)::

    [torchx:tracker]
    fsspec = torchx_core.tracker.backend.fsspec:create    # name = entry point or module:factory
    mlflow = torchx_core.tracker.mlflow:create_tracker

    [tracker:fsspec]
    config = /path/to/fsspec_tracker.conf                 # passed to the factory

Tracker factories are found as entry points of group ``torchx.tracker`` or as ``module:function``
paths; they must be importable inside the job. Read results back with ``torchx tracker list jobs``,
``torchx tracker list metadata RUN_ID`` and ``torchx tracker list artifacts RUN_ID``.
"""

from __future__ import annotations

from torchx_core.tracker.api import AppRun

__all__ = ["AppRun", "app_run_from_env"]


def app_run_from_env() -> AppRun:
    """The :class:`~torchx_core.tracker.api.AppRun` of this process (``AppRun.run_from_env``)."""
    return AppRun.run_from_env()
