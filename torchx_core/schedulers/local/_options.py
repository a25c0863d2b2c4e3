"""The local scheduler's run options (``LocalOpts``) and its naming rules for apps and roles.

App ids and role names become directory names, hence :data:`APP_ID_RULES` and ``SAFE_NAME``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from torchx_core.schedulers._app_ids import IdRules, unique_id
from torchx_core.schedulers.api import StructuredOpts
from torchx_core.specs import runopts

SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
#: App ids are directory names: letters, digits, ``_``, ``.`` and ``-``.
APP_ID_RULES = IdRules(allowed="A-Za-z0-9_.-", max_name_len=200, suffix_len=12)
MAX_NAME_CHARS = 200  # role names become directory names (255 bytes at most)


def make_unique(name: str, length: int = 12) -> str:
    """Returns ``{name}-{random suffix}`` (``length`` random characters, ~60 bits).

    Characters that cannot appear in a directory name are replaced by ``-``.

    >>> make_unique("trainer").startswith("trainer-")
    True
    """
    rules = (
        APP_ID_RULES
        if length == APP_ID_RULES.suffix_len
        else APP_ID_RULES._replace(suffix_len=length)
    )
    return unique_id(name, rules)


@dataclass
class LocalOpts(StructuredOpts):
    """Run options of the local schedulers."""

    log_dir: str | None = field(
        default=None,
        metadata={
            "help": "directory for the app's state and replica logs, in TorchX's layout"
            " ({log_dir}/{session}/{app_id}/{role}/{k}/stdout.log, stderr.log, a SUCCESS file"
            " when the logs are complete); default: the per-user root ($TORCHX_LOCAL_ROOT or"
            " /tmp/torchx-local-<uid>)"
        },
    )
    prepend_cwd: bool = field(
        default=False,
        metadata={
            "help": "if set, prepends CWD to replica's PATH env var making any binaries in CWD"
            " take precedence over those in PATH"
        },
    )
    auto_set_cuda_visible_devices: bool = field(
        default=False,
        metadata={
            "help": "sets `CUDA_VISIBLE_DEVICES` for roles that request GPUs: each replica gets"
            " resource.gpu devices, assigned round-robin over the devices of this host"
        },
    )
    grace_period: float = field(
        default=5.0,
        metadata={"help": "seconds between SIGTERM and SIGKILL when cancelling or restarting"},
    )
    env_drop: list[str] | None = field(
        default=None,
        metadata={
            "help": "variables of the launcher's environment that replicas do not inherit: names"
            " (`AWS_SECRET_ACCESS_KEY`) or prefixes ending in `*` (`AIRFLOW_CONN_*`); a role's"
            " own `env` is always set"
        },
    )


_OPT_TYPES: Mapping[str, type] = {
    "log_dir": str,
    "prepend_cwd": bool,
    "auto_set_cuda_visible_devices": bool,
    "grace_period": float,
    "env_drop": list[str],
}


def local_runopts() -> runopts:
    """``LocalOpts.as_runopts()`` without reading the class source (the help is in metadata).

    Built on every call: callers may mutate the returned runopts.
    """
    opts = runopts()
    for f in fields(LocalOpts):
        default: Any = f.default
        opts.add(f.name, type_=_OPT_TYPES[f.name], help=f.metadata["help"], default=default)
    return opts


def env_drop_entries(patterns: Any) -> list[Any]:
    """The ``env_drop`` entries as every path reads them (the CLI's ``-cfg 'env_drop=A; B'``,
    ``.torchxconfig``, the Python API's ``["A", " B"]``): each string trimmed, blank ones
    dropped; anything else kept as given, for :func:`env_drop_problems` to refuse."""
    entries = [p.strip() if isinstance(p, str) else p for p in patterns or []]
    return [p for p in entries if p != ""]


def env_drop_problems(patterns: Any) -> list[str]:
    """What is wrong with the ``env_drop`` run option (names, or prefixes ending in ``*``),
    after :func:`env_drop_entries`."""
    problems = []
    for p in env_drop_entries(patterns):
        name = p[:-1] if isinstance(p, str) and p.endswith("*") else p
        if (
            not isinstance(name, str)
            or "*" in name
            or "=" in name
            or "\0" in name
            or not (name or p == "*")
        ):
            problems.append(
                f"env_drop entry {p!r} is not a variable name or a prefix ending in `*`"
                " (e.g. `AWS_SECRET_ACCESS_KEY` or `AIRFLOW_CONN_*`)"
            )
    return problems
