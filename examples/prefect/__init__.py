"""Prefect examples: ``pipeline.py`` holds a sync and an async TorchX pipeline flow."""
