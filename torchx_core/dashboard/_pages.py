"""What each page shows, gathered from the runner (no web framework here)."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchx_core.dashboard._engines import EngineLink, engine_link
from torchx_core.dashboard._logs import display

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner
    from torchx_core.specs import AppStatus

__all__ = ["AppPage", "age", "app_page", "masked_appdef", "span", "utc"]

logger: logging.Logger = logging.getLogger(__name__)

#: shown instead of an environment value unless the page is asked to show them
MASK = "••••••"

NONE = "<NONE>"

#: names whose values are never shown, whatever the page is asked (tokens, passwords, secrets,
#: keys, credentials, private material)
SECRET_NAME = re.compile(
    r"TOKEN|PASSW(OR)?D|SECRET|CREDENTIAL|PRIVATE|(^|[_.-])(API)?KEY($|[_.-])|APIKEY|AUTH|COOKIE"
    r"|SESSION|SIGNATURE|DSN|CONNECTION_?STRING",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """Whether a variable (or option) called ``name`` holds a secret by its name.

    >>> [is_secret_name(n) for n in ("HF_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "PATH")]
    [True, True, True, False]
    """
    return SECRET_NAME.search(name) is not None


def utc(when: float | None, iso: bool = False) -> str:
    """``"2026-11-28 09:30:12"`` (UTC) of epoch seconds; ISO 8601 with ``Z`` if ``iso``."""
    if not when:
        return ""
    t = time.gmtime(when)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ" if iso else "%Y-%m-%d %H:%M:%S", t)


def span(seconds: float | None) -> str:
    """``"3m 12s"`` of a duration; ``""`` when unknown."""
    if seconds is None:
        return ""
    d, rem = divmod(int(seconds), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m}m"
    return f"{m}m {s}s" if m else f"{s}s"


def age(created: float | None, now: float | None = None) -> str:
    """``"3m 12s"`` since ``created`` (epoch seconds); ``""`` when unknown."""
    if not created:
        return ""
    return span(max(0.0, (now if now is not None else time.time()) - created))


@dataclass
class Replica:
    """One replica row of the app page."""

    role: str
    k: int
    state: str
    host: str
    exit_code: str
    error: str


@dataclass
class AppPage:
    """Everything the app page shows."""

    handle: str
    scheduler: str
    status: AppStatus | None
    state: str = "UNKNOWN"
    replicas: list[Replica] = field(default_factory=list)
    error: str = ""
    failure_tail: list[str] = field(default_factory=list)
    appdef: str = ""
    #: why the AppDef shown is partial (a scheduler that does not keep it), ``""`` if it is whole
    appdef_note: str = ""
    run_options: list[tuple[str, str]] | None = None  # None: the scheduler does not keep them
    owner: EngineLink | None = None
    tracker: list[tuple[str, str, str]] = field(default_factory=list)
    #: the tracker's numeric metadata as bars: (name, value, bar length out of 100)
    metrics: list[tuple[str, str, int]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        return self.status is not None and self.status.is_terminal()


def _pretty_error(text: str) -> str:
    if not text or text == NONE:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _exit_code(error: str) -> str:
    try:
        data = json.loads(error)
    except ValueError:
        return ""
    code = data.get("exit_code") if isinstance(data, dict) else None
    return "" if code is None else str(code)


def metric_bars(metrics: Mapping[str, float], limit: int = 20) -> list[tuple[str, str, int]]:
    """``(name, value, bar length 0..100)`` of up to ``limit`` metrics, scaled to the largest
    absolute value (a small chart of the tracker's scalars)."""
    items = list(metrics.items())[:limit]
    top = max((abs(v) for _, v in items), default=0.0) or 1.0
    return [(display(k), f"{v:.6g}", round(100 * abs(v) / top)) for k, v in items]


#: what an AppDef read back from a scheduler that does not keep it holds in place of a value
_UNKNOWN: tuple[object, ...] = ("<MISSING>", "", None, [], {})


def is_stub(app: Any) -> bool:
    """Whether ``app`` was rebuilt by a scheduler that keeps no AppDef (no entrypoint known)."""
    return bool(app.roles) and all(r.entrypoint == "<MISSING>" for r in app.roles)


def _known(data: Any) -> Any:
    """``data`` without the placeholders of values a scheduler does not know."""
    if isinstance(data, dict):
        return {k: _known(v) for k, v in data.items() if not _unknown(v)}
    if isinstance(data, list):
        return [_known(v) for v in data]
    return data


def _unknown(value: Any) -> bool:
    return any(value == u and type(value) is type(u) for u in _UNKNOWN)


def masked_appdef(app: Any, show_env: bool) -> str:
    """The AppDef as JSON, every environment value replaced by a mask unless ``show_env``;
    the values of secret-named variables (:func:`is_secret_name`) always masked."""
    data = app.to_dict()
    for role in data.get("roles", []):
        env = role.get("env")
        if isinstance(env, dict):
            role["env"] = {
                k: v if show_env and not is_secret_name(str(k)) else MASK for k, v in env.items()
            }
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)


def app_page(
    runner: Runner,
    handle: str,
    engine_urls: Mapping[str, str],
    show_env: bool = False,
    with_details: bool = True,
) -> AppPage:
    """Reads the app's status (and, with ``with_details``, its AppDef, owner, failure tail and
    tracker results). Each part that cannot be read is reported in ``problems``."""
    from torchx_core.specs import parse_app_handle

    scheduler = parse_app_handle(handle).scheduler_backend
    status = runner.status(handle)
    page = AppPage(handle=handle, scheduler=scheduler, status=status)
    if status is None:
        page.state = "UNKNOWN"
        page.problems.append(f"the scheduler {scheduler} does not know this app (anymore)")
        return page
    page.state = status.state.name
    page.error = display(_pretty_error(status.structured_error_msg))
    for role in status.roles:
        for r in role.replicas:
            err = r.structured_error_msg if r.structured_error_msg != NONE else ""
            page.replicas.append(
                Replica(
                    role.role,
                    r.id,
                    r.state.name,
                    r.hostname,
                    _exit_code(err) if err else "",
                    display(err),
                )
            )
    if not with_details:
        return page
    _details(runner, page, engine_urls, show_env)
    return page


def _details(runner: Runner, page: AppPage, engine_urls: Mapping[str, str], show_env: bool) -> None:
    try:
        app = runner.describe(page.handle)
        if app is not None and is_stub(app):
            page.appdef_note = (
                f"{page.scheduler} does not keep the AppDef an app was submitted with (its"
                " entrypoint, arguments and environment are not known here); what it knows:"
            )
            page.appdef = display(json.dumps(_known(app.to_dict()), indent=2, default=str))
        elif app is not None:
            page.appdef = display(masked_appdef(app, show_env))
    except Exception as e:  # noqa: BLE001 - a page part that fails is reported, not fatal
        page.problems.append(f"AppDef unavailable: {type(e).__name__}: {e}")
    try:
        cfg = runner.run_options(page.handle)
        if cfg is not None:
            page.run_options = [
                (k, MASK if is_secret_name(k) else display(json.dumps(v, default=str)))
                for k, v in sorted(cfg.items())
            ]
    except Exception as e:  # noqa: BLE001 - shown on the page, the rest still renders
        page.problems.append(f"run options unavailable: {type(e).__name__}: {e}")
    try:
        page.owner = engine_link(runner.owner(page.handle), engine_urls)
    except Exception as e:  # noqa: BLE001 - shown on the page, the rest still renders
        page.problems.append(f"owner unavailable: {type(e).__name__}: {e}")
    if page.status is not None and page.status.state.name in ("FAILED", "CANCELLED"):
        from torchx_core.runner.lifecycle import AppLifecycle

        life = AppLifecycle(runner, page.scheduler, owner="dashboard", tail_lines=20)
        page.failure_tail = [display(x) for x in life.failure_tail(page.handle, page.status)]
    try:
        from torchx_core.runner.tracking import tracker_results

        results = tracker_results(page.handle)
        if results is not None:
            page.tracker = [(k, display(n), display(v)) for k, n, v in results.rows()]
            page.metrics = metric_bars(results.metrics())
    except Exception as e:  # noqa: BLE001 - shown on the page, the rest still renders
        page.problems.append(f"tracker unavailable: {type(e).__name__}: {e}")
