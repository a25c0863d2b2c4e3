"""Component functions used by the linter/builders/finder tests (a real source file on disk)."""

# ruff: noqa: UP006, UP035, UP045 - old-style typing hints are part of what is tested
from __future__ import annotations

from typing import Dict, List, Optional

from torchx_core import specs
from torchx_core.specs import AppDef, Role


def echo(
    msg: str = "hello",
    n: int = 1,
    ratio: float = 0.5,
    debug: bool = False,
    tags: Optional[List[str]] = None,
    env: Optional[Dict[str, str]] = None,
    ports: dict[str, int] | None = None,
    j: str = "1x2",
) -> specs.AppDef:
    """Echoes a message.

    Longer description that is not part of the first paragraph.

    Args:
        msg: the message to
            echo (continued line)
        n: number of times
        debug: print debug output

    Returns:
        the app
    """
    return AppDef(
        "echo",
        [
            Role(
                "echo",
                image="/tmp",
                entrypoint="echo",
                args=[msg, str(n), str(ratio), str(debug), j, *(tags or [])],
                env=env or {},
                port_map=ports or {},
            )
        ],
    )


def required(script: str, *script_args: str) -> AppDef:
    """Runs a script.

    Args:
        script: the script
        script_args: arguments to the script
    """
    return AppDef("req", [Role("r", image="img", entrypoint=script, args=list(script_args))])


def not_an_app(x: str) -> AppDef:
    """Returns the wrong thing.

    Args:
        x: anything
    """
    return x  # type: ignore[return-value]


def no_docs(a, b: object, **kw: str) -> int:  # deliberately not a valid component
    return 1


async def not_a_component_helper() -> None:
    return None


def with_h(h: str = "cpu.small", m: str | None = None) -> AppDef:
    """A component with a named-resource parameter ``h``.

    Args:
        h: named resource
        m: module
    """
    return AppDef("h", [Role("r", image="img", args=[h, str(m)])])


def typed_no_docs(msg: str = "hi", n: int = 1) -> AppDef:
    return AppDef("typed_no_docs", [Role("r", image="i", entrypoint="echo", args=[msg] * n)])
