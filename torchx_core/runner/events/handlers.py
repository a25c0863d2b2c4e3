"""Where events go: a logging handler per destination name (``torchx.runner.events.handlers``)."""

from __future__ import annotations

import logging

__all__ = ["get_logging_handler"]

_HANDLERS: dict[str, logging.Handler] = {
    "console": logging.StreamHandler(),
    "null": logging.NullHandler(),
}


def get_logging_handler(destination: str = "null") -> logging.Handler:
    """The handler of ``destination`` (``"console"``: stderr, ``"null"``: dropped).

    Raises:
        ValueError: an unknown destination (the message lists the valid ones)
    """
    handler = _HANDLERS.get(destination)
    if handler is None:
        raise ValueError(
            f"unknown events destination {destination!r}; use one of {', '.join(_HANDLERS)}"
        )
    return handler
