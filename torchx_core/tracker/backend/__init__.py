"""Tracker backends shipped with torchx-suite (``fsspec``; MLflow is ``torchx_core.tracker.mlflow``)."""
