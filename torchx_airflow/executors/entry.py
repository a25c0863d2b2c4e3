"""The app's entry point moved to :mod:`torchx_airflow.task_entry` (outside this package, so that
``python -m`` does not import the executor first); kept for apps started by older releases."""

from __future__ import annotations

import sys

from torchx_airflow.task_entry import TOKEN_ENV, main, seal, unseal

__all__ = ["TOKEN_ENV", "main", "seal", "unseal"]

if __name__ == "__main__":
    sys.exit(main())
