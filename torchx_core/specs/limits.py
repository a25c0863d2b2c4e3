"""Sanity limits on what an AppDef may ask for, checked before anything is expanded.

``TORCHX_MAX_REPLICAS`` (default 10,000) bounds the replicas of one app across its roles: every
scheduler refuses more at dry run (before building one request per replica), and ``dist.ddp``
refuses a larger ``-j``. Raise it for a bigger job; it exists so that a typo such as
``-j 99999999999999999999x1`` is a clear error, not a dry run that never returns.
"""

from __future__ import annotations

import os

MAX_REPLICAS_ENV = "TORCHX_MAX_REPLICAS"
DEFAULT_MAX_REPLICAS = 10_000


def max_replicas() -> int:
    """The most replicas one app may have (``$TORCHX_MAX_REPLICAS``, default 10,000)."""
    value = os.environ.get(MAX_REPLICAS_ENV, "")
    try:
        return int(value) if value.strip() else DEFAULT_MAX_REPLICAS
    except ValueError:
        return DEFAULT_MAX_REPLICAS


def too_many_replicas(n: int, what: str) -> str | None:
    """A message when ``n`` replicas exceed :func:`max_replicas` (``None`` when within it)."""
    limit = max_replicas()
    if n <= limit:
        return None
    return (
        f"{what} asks for {n} replicas, more than the limit of {limit}; use fewer, or raise the"
        f" limit with ${MAX_REPLICAS_ENV}=<n> if you really mean it"
    )


def _surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (U+D800..U+DFFF): not encodable as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def env_and_arg_problems(
    role_name: str, entrypoint: str, args: list[str], env: dict[str, str]
) -> list[str]:
    """What no process can be started with: NUL bytes or lone surrogates (not UTF-8 encodable)
    in arguments or environment values, and environment names that are empty or hold ``=``,
    NUL or a lone surrogate. Every scheduler checks this at dry run."""
    problems = []
    for i, word in enumerate([entrypoint, *args]):
        if not isinstance(word, str):
            continue
        where = "the entrypoint" if i == 0 else f"argument {i - 1}"
        if "\x00" in word:
            problems.append(
                f"role `{role_name}`: {where} ({word!r}) holds a NUL byte,"
                " which no process argument can"
            )
        elif _surrogate(word):
            problems.append(
                f"role `{role_name}`: {where} ({word!r}) holds a lone surrogate, which is not valid"
                " UTF-8; pass text that encodes as UTF-8 (decode bytes with errors='replace')"
            )
    for name, value in env.items():
        if (
            not isinstance(name, str)
            or not name
            or "=" in name
            or "\x00" in name
            or _surrogate(name)
        ):
            problems.append(
                f"role `{role_name}`: environment variable name {name!r} is not valid (it must be"
                " non-empty, valid UTF-8, without `=` or NUL)"
            )
        if isinstance(value, str) and "\x00" in value:
            problems.append(
                f"role `{role_name}`: environment variable {name}={value!r} holds a NUL byte"
            )
        elif isinstance(value, str) and _surrogate(value):
            problems.append(
                f"role `{role_name}`: environment variable {name}={value!r} holds a lone surrogate,"
                " which is not valid UTF-8; pass text that encodes as UTF-8"
            )
    return problems
