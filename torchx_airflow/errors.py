"""Errors raised by ``torchx_airflow`` on bad arguments (part of the torchx-suite error tree)."""

from __future__ import annotations

from torchx_core.specs.errors import TorchXError

__all__ = ["InvalidTaskArgumentError"]


class InvalidTaskArgumentError(TorchXError, ValueError, TypeError):
    """An operator, sensor or trigger got unknown, wrongly typed or contradictory arguments.

    The message says what was given, what is valid and how to fix it; every problem found is
    listed at once.
    """

    def __init__(self, owner: str, problems: list[str]) -> None:
        self.owner = owner
        self.problems = list(problems)
        super().__init__(f"{owner}: " + "; ".join(self.problems))


def check_number(
    problems: list[str], name: str, value: object, *, minimum: float, strict: bool = False
) -> None:
    """Appends a problem unless ``value`` is a real number ``>= minimum`` (``>`` if strict)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and (value < minimum or (strict and value == minimum)):  # type: ignore[operator]
        ok = False
    if not ok:
        bound = f"> {minimum}" if strict else f">= {minimum}"
        problems.append(f"{name} must be a number {bound}, got {value!r}")
