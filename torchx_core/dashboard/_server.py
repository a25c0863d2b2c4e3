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
from torchx_core.dashboard._logs import (
    Follower,
    InvalidLogRequestError,
    LogRef,
    follow,
    tail,
    whole,
)
from torchx_core.dashboard._pages import age, app_page
from torchx_core.dashboard._security import Guard
from torchx_core.specs import AppState
from torchx_core.specs.errors import TorchXError, UnknownAppException, UnknownSchedulerException

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner

__all__ = ["Settings", "create_app"]

logger: logging.Logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
ACTIONS = ("cancel", "delete")
#: how often a log follow's event stream looks for new lines (seconds)
_FOLLOW_POLL_S = 0.05
#: the errors that mean "no such app" (a 404 page); any other error of ours is a 500
_NOT_FOUND = (UnknownAppException, UnknownSchedulerException)


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


async def _events(follower: Follower) -> AsyncIterator[str]:
    """The server-sent events of a log follow: batches of lines, then an ``end`` event."""
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


def _int_param(request: Request, name: str, default: str, problem: str) -> int:
    """The integer query parameter ``name``; a :class:`BadRequest` saying ``problem`` if not one."""
    try:
        return int(request.query_params.get(name, default))
    except ValueError as e:
        raise BadRequest(problem.format(request.query_params.get(name))) from e


class _Pages:
    """The pages of one dashboard: each route a method over the runner, board and templates."""

    def __init__(self, runner: Runner, settings: Settings, board: Board, csrf: str) -> None:
        self.runner = runner
        self.settings = settings
        self.board = board
        self.csrf = csrf
        self.env = _env()
        self.guard: Guard | None = None  # set by create_app once the guard wraps the routes

    def render(self, request: Request, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        body = self.env.get_template(name).render(
            csrf=self.csrf,
            refresh_ms=int(self.settings.refresh * 1000),
            schedulers=self.board.schedulers,
            path=request.url.path,
            **ctx,
        )
        return HTMLResponse(body, status_code=status)

    def error(self, request: Request, status: int, message: str) -> HTMLResponse:
        return self.render(request, "error.html", status=status, message=message)

    def handle_of(self, request: Request) -> str:
        from torchx_core.specs import parse_app_handle

        handle = request.query_params.get("handle", "")
        try:
            sched = parse_app_handle(handle).scheduler_backend
        except TorchXError as e:
            raise BadRequest(f"bad app handle {handle!r}: {e}") from e
        if sched not in self.board.schedulers:
            raise BadRequest(
                f"scheduler {sched!r} of {handle!r} is not shown by this dashboard"
                f" (shown: {', '.join(self.board.schedulers)}; start it with -s {sched})"
            )
        return handle

    def apps_ctx(self, request: Request) -> dict[str, Any]:
        q = request.query_params
        f = Filters(q.get("scheduler", ""), q.get("state", ""), q.get("name", ""))
        rows, errors = self.board.rows(f)
        return {
            "rows": rows,
            "errors": errors,
            "filters": f,
            "age": age,
            "query": urlencode({"scheduler": f.scheduler, "state": f.state, "name": f.name}),
        }

    def apps(self, request: Request) -> Response:
        return self.render(request, "apps.html", **self.apps_ctx(request))

    def apps_rows(self, request: Request) -> Response:
        return self.render(request, "_rows.html", **self.apps_ctx(request))

    def app(self, request: Request) -> Response:
        show_env = request.query_params.get("show_env") == "1"
        page = app_page(
            self.runner, self.handle_of(request), self.settings.engine_urls, show_env=show_env
        )
        return self.render(request, "app.html", page=page, show_env=show_env)

    def app_status(self, request: Request) -> Response:
        page = app_page(
            self.runner, self.handle_of(request), self.settings.engine_urls, with_details=False
        )
        return self.render(request, "_status.html", page=page)

    def confirm(self, request: Request) -> Response:
        action = request.query_params.get("action", "")
        if action not in ACTIONS:
            raise BadRequest(f"action {action!r} is not one of {', '.join(ACTIONS)}")
        return self.render(request, "confirm.html", handle=self.handle_of(request), action=action)

    async def act(self, request: Request) -> Response:
        form = await request.form()
        assert self.guard is not None  # create_app sets it before serving
        if not self.guard.csrf_ok(str(form.get("csrf", ""))):
            return self.error(
                request, 403, "the form's CSRF token is missing or wrong; reload the page"
            )
        action, handle = str(form.get("action", "")), str(form.get("handle", ""))
        if action not in ACTIONS:
            raise BadRequest(f"action {action!r} is not one of {', '.join(ACTIONS)}")
        request.scope["query_string"] = urlencode({"handle": handle}).encode()
        handle = self.handle_of(Request(request.scope))
        if action == "cancel":
            await run_in_threadpool(self.runner.cancel, handle)
        else:
            await run_in_threadpool(self.runner.delete, handle)
            return RedirectResponse("/", status_code=303)
        return RedirectResponse(f"/app?handle={quote(handle, safe='')}", status_code=303)

    def log_ref(self, request: Request) -> LogRef:
        q = request.query_params
        k = _int_param(request, "k", "0", "replica index k={!r} is not an integer")
        role = q.get("role", "")
        if not role:
            raise BadRequest("role is required (the role whose replica's log to show)")
        ref = LogRef(self.handle_of(request), role, k, q.get("stream", ""), q.get("regex", ""))
        ref.check()
        return ref

    def logs(self, request: Request) -> Response:
        ref = self.log_ref(request)
        asked = _int_param(
            request, "n", str(self.settings.tail_lines), "n={!r} is not a number of lines"
        )
        n = max(1, min(asked, 100_000))
        lines, count = tail(self.runner, ref, n)
        query = urlencode(
            {
                "handle": ref.handle,
                "role": ref.role,
                "k": ref.k,
                "stream": ref.stream,
                "regex": ref.regex,
            }
        )
        return self.render(
            request, "logs.html", ref=ref, lines=lines, count=count, n=n, query=query
        )

    async def logs_stream(self, request: Request) -> Response:
        ref = self.log_ref(request)
        skip = max(0, _int_param(request, "skip", "0", "skip must be a number of lines"))
        return StreamingResponse(
            _events(follow(self.runner, ref, skip)),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    def logs_download(self, request: Request) -> Response:
        ref = self.log_ref(request)
        stream = f"-{ref.stream}" if ref.stream else ""
        name = f"{ref.handle.rsplit('/', 1)[-1]}-{ref.role}-{ref.k}{stream}.log"
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return StreamingResponse(
            whole(self.runner, ref),
            media_type="text/plain; charset=utf-8",
            headers={"content-disposition": f'attachment; filename="{safe}"'},
        )

    def guarded(self, fn: Any) -> Any:
        """``fn`` as an endpoint: errors become error pages (400, 404 or 500)."""

        async def endpoint(request: Request) -> Response:
            try:
                if asyncio.iscoroutinefunction(fn):
                    response: Response = await fn(request)
                else:
                    response = await run_in_threadpool(fn, request)
                return response
            except (BadRequest, InvalidLogRequestError) as e:
                return self.error(request, 400, str(e))
            except TorchXError as e:
                return self.error(
                    request,
                    404 if isinstance(e, _NOT_FOUND) else 500,
                    f"{type(e).__name__}: {e}",
                )
            except Exception as e:  # a backend's own error, shown on the page
                logger.warning("%s %s failed", request.method, request.url.path, exc_info=True)
                return self.error(request, 500, f"{type(e).__name__}: {e}")

        return endpoint

    def routes(self) -> list[Route | Mount]:
        g = self.guarded
        return [
            Route("/", g(self.apps)),
            Route("/rows", g(self.apps_rows)),
            Route("/app", g(self.app)),
            Route("/app/status", g(self.app_status)),
            Route("/app/confirm", g(self.confirm)),
            Route("/app/action", g(self.act), methods=["POST"]),
            Route("/logs", g(self.logs)),
            Route("/logs/stream", g(self.logs_stream)),
            Route("/logs/download", g(self.logs_download)),
            Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
        ]


def create_app(runner: Runner, settings: Settings) -> tuple[Guard, Board]:
    """The ASGI application of a dashboard over ``runner`` (wrapped in its security guard),
    and the board of apps it serves (its read counters are what benchmarks look at)."""
    board = Board(runner, settings.schedulers, settings.refresh, settings.cfgs)
    csrf = secrets.token_urlsafe(24)
    pages = _Pages(runner, settings, board, csrf)
    guard = Guard(Starlette(routes=pages.routes()), settings.token, csrf, settings.loopback)
    pages.guard = guard
    return guard, board
