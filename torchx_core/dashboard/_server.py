"""The dashboard's Starlette application: routes, templates, the security guard around them.

Pages are rendered on the server with Jinja2 (autoescaping on: every name, log line and error
is HTML-escaped); ``static/dashboard.js`` only refreshes page parts from the server's own
HTML fragments, follows logs (server-sent events, appended as text) and asks confirmations.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from torchx_core.dashboard._board import Board, Filters
from torchx_core.dashboard._logs import InvalidLogRequestError, LogRef, follow, tail, whole
from torchx_core.dashboard._pages import age, app_page
from torchx_core.dashboard._security import Guard
from torchx_core.specs import AppState
from torchx_core.specs.errors import TorchXError

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner

__all__ = ["Settings", "create_app"]

logger: logging.Logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
ACTIONS = ("cancel", "delete")
#: how often a log follow's event stream looks for new lines (seconds)
_FOLLOW_POLL_S = 0.05


@dataclass
class Settings:
    """How a dashboard serves.

    Args:
        schedulers: the schedulers whose apps are shown
        token: required on every request when set (a non-loopback bind must set one)
        loopback: bound to a loopback address (Host headers are then checked)
        refresh: seconds between two list reads of a scheduler, and the pages' refresh period
        tail_lines: lines a log page shows before it follows
        engine_urls: engine -> base URL, for links to the engine that owns an app
        cfgs: run options per scheduler for its list call
    """

    schedulers: list[str]
    token: str | None = None
    loopback: bool = True
    refresh: float = 2.0
    tail_lines: int = 500
    engine_urls: Mapping[str, str] = field(default_factory=dict)
    cfgs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class BadRequest(TorchXError, ValueError):
    """A page was asked for with a bad parameter."""

    permanent = True


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(HERE / "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.filters["q"] = lambda s: quote(str(s), safe="")
    env.globals["STATES"] = [s.name for s in AppState]
    return env


def create_app(runner: Runner, settings: Settings) -> tuple[Guard, Board]:
    """The ASGI application of a dashboard over ``runner`` (wrapped in its security guard),
    and the board of apps it serves (its read counters are what benchmarks look at)."""
    board = Board(runner, settings.schedulers, settings.refresh, settings.cfgs)
    env = _env()
    csrf = secrets.token_urlsafe(24)
    guard_box: list[Guard] = []

    def render(request: Request, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        body = env.get_template(name).render(
            csrf=csrf,
            refresh_ms=int(settings.refresh * 1000),
            schedulers=board.schedulers,
            path=request.url.path,
            **ctx,
        )
        return HTMLResponse(body, status_code=status)

    def error(request: Request, status: int, message: str) -> HTMLResponse:
        return render(request, "error.html", status=status, message=message)

    def handle_of(request: Request) -> str:
        from torchx_core.specs import parse_app_handle

        handle = request.query_params.get("handle", "")
        try:
            sched = parse_app_handle(handle).scheduler_backend
        except TorchXError as e:
            raise BadRequest(f"bad app handle {handle!r}: {e}") from e
        if sched not in board.schedulers:
            raise BadRequest(
                f"scheduler {sched!r} of {handle!r} is not shown by this dashboard"
                f" (shown: {', '.join(board.schedulers)}; start it with -s {sched})"
            )
        return handle

    def filters(request: Request) -> Filters:
        q = request.query_params
        return Filters(q.get("scheduler", ""), q.get("state", ""), q.get("name", ""))

    def apps_ctx(request: Request) -> dict[str, Any]:
        f = filters(request)
        rows, errors = board.rows(f)
        return {
            "rows": rows,
            "errors": errors,
            "filters": f,
            "age": age,
            "query": urlencode({"scheduler": f.scheduler, "state": f.state, "name": f.name}),
        }

    def apps(request: Request) -> Response:
        return render(request, "apps.html", **apps_ctx(request))

    def apps_rows(request: Request) -> Response:
        return render(request, "_rows.html", **apps_ctx(request))

    def app(request: Request) -> Response:
        show_env = request.query_params.get("show_env") == "1"
        page = app_page(runner, handle_of(request), settings.engine_urls, show_env=show_env)
        return render(request, "app.html", page=page, show_env=show_env)

    def app_status(request: Request) -> Response:
        page = app_page(runner, handle_of(request), settings.engine_urls, with_details=False)
        return render(request, "_status.html", page=page)

    def confirm(request: Request) -> Response:
        action = request.query_params.get("action", "")
        if action not in ACTIONS:
            raise BadRequest(f"action {action!r} is not one of {', '.join(ACTIONS)}")
        return render(request, "confirm.html", handle=handle_of(request), action=action)

    async def act(request: Request) -> Response:
        form = await request.form()
        if not guard_box[0].csrf_ok(str(form.get("csrf", ""))):
            return error(request, 403, "the form's CSRF token is missing or wrong; reload the page")
        action, handle = str(form.get("action", "")), str(form.get("handle", ""))
        if action not in ACTIONS:
            raise BadRequest(f"action {action!r} is not one of {', '.join(ACTIONS)}")
        request.scope["query_string"] = urlencode({"handle": handle}).encode()
        handle = handle_of(Request(request.scope))
        if action == "cancel":
            await run_in_threadpool(runner.cancel, handle)
        else:
            await run_in_threadpool(runner.delete, handle)
            return RedirectResponse("/", status_code=303)
        return RedirectResponse(f"/app?handle={quote(handle, safe='')}", status_code=303)

    def log_ref(request: Request) -> LogRef:
        q = request.query_params
        try:
            k = int(q.get("k", "0"))
        except ValueError as e:
            raise BadRequest(f"replica index k={q.get('k')!r} is not an integer") from e
        role = q.get("role", "")
        if not role:
            raise BadRequest("role is required (the role whose replica's log to show)")
        ref = LogRef(handle_of(request), role, k, q.get("stream", ""), q.get("regex", ""))
        ref.check()
        return ref

    def logs(request: Request) -> Response:
        ref = log_ref(request)
        try:
            n = max(1, min(int(request.query_params.get("n", settings.tail_lines)), 100_000))
        except ValueError as e:
            raise BadRequest(f"n={request.query_params.get('n')!r} is not a number of lines") from e
        lines, count = tail(runner, ref, n)
        query = urlencode(
            {
                "handle": ref.handle,
                "role": ref.role,
                "k": ref.k,
                "stream": ref.stream,
                "regex": ref.regex,
            }
        )
        return render(request, "logs.html", ref=ref, lines=lines, count=count, n=n, query=query)

    async def logs_stream(request: Request) -> Response:
        ref = log_ref(request)
        try:
            skip = max(0, int(request.query_params.get("skip", "0")))
        except ValueError as e:
            raise BadRequest("skip must be a number of lines") from e
        follower = follow(runner, ref, skip)

        async def events() -> AsyncIterator[str]:
            # the follower's thread reads; this loop only drains its queue (no pool thread held)
            try:
                yield ": following\n\n"
                idle = 0
                while True:
                    lines = follower.batch(0)
                    if lines:
                        idle = 0
                        yield f"data: {json.dumps(lines)}\n\n"
                    elif follower.drained():
                        yield f"event: end\ndata: {json.dumps(follower.error)}\n\n"
                        return
                    else:
                        idle += 1
                        if idle % 100 == 0:
                            yield ": idle\n\n"  # notices a closed browser
                        await asyncio.sleep(_FOLLOW_POLL_S)
            finally:
                follower.stop()

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"x-accel-buffering": "no"}
        )

    def logs_download(request: Request) -> Response:
        ref = log_ref(request)
        stream = f"-{ref.stream}" if ref.stream else ""
        name = f"{ref.handle.rsplit('/', 1)[-1]}-{ref.role}-{ref.k}{stream}.log"
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return StreamingResponse(
            whole(runner, ref),
            media_type="text/plain; charset=utf-8",
            headers={"content-disposition": f'attachment; filename="{safe}"'},
        )

    def guarded(fn: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            try:
                if asyncio.iscoroutinefunction(fn):
                    return await fn(request)
                return await run_in_threadpool(fn, request)
            except (BadRequest, InvalidLogRequestError) as e:
                return error(request, 400, str(e))
            except TorchXError as e:
                return error(
                    request,
                    404 if "nknown" in type(e).__name__ else 500,
                    f"{type(e).__name__}: {e}",
                )
            except Exception as e:  # a backend's own error, shown on the page
                logger.warning("%s %s failed", request.method, request.url.path, exc_info=True)
                return error(request, 500, f"{type(e).__name__}: {e}")

        return endpoint

    routes = [
        Route("/", guarded(apps)),
        Route("/rows", guarded(apps_rows)),
        Route("/app", guarded(app)),
        Route("/app/status", guarded(app_status)),
        Route("/app/confirm", guarded(confirm)),
        Route("/app/action", guarded(act), methods=["POST"]),
        Route("/logs", guarded(logs)),
        Route("/logs/stream", guarded(logs_stream)),
        Route("/logs/download", guarded(logs_download)),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    inner = Starlette(routes=routes)
    guard = Guard(inner, settings.token, csrf, settings.loopback)
    guard_box.append(guard)
    return guard, board
