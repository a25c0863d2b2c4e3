"""Tracker backends shipped with torchx-suite: ``fsspec`` (MLflow: ``tracker.mlflow``)."""
