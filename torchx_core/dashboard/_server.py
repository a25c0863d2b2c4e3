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
import threading
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from torchx_core.dashboard._board import SORTS, Board, Filters, sort_rows
from torchx_core.dashboard._filter import FilterCutOff, RegexPool
from torchx_core.dashboard._logs import (
    Follower,
    InvalidLogRequestError,
    LogRef,
    TooManyFollowsError,
    download,
    log_files,
    tail,
)
from torchx_core.dashboard._pages import AppPage, age, app_page, span, utc
from torchx_core.dashboard._security import Guard
from torchx_core.dashboard._usage import ReplicaSeries, UsageHistory
from torchx_core.specs import AppState
from torchx_core.specs.errors import TorchXError, UnknownAppException, UnknownSchedulerException

if TYPE_CHECKING:
    from torchx_core.runner.api import Runner

__all__ = ["Settings", "create_app"]

logger: logging.Logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
ACTIONS = ("cancel", "delete")
#: the errors that mean "no such app" (a 404 page); any other error of ours is a 500
_NOT_FOUND = (UnknownAppException, UnknownSchedulerException)
#: the apps table's columns: (sort key or "", header)
COLUMNS = [
    ("handle", "Handle"),
    ("name", "Name"),
    ("state", "State"),
    ("submitted", "Submitted (UTC)"),
    ("ended", "Ended (UTC)"),
    ("", "Duration"),
    ("owner", "Owner"),
    ("", "Replicas"),
]
#: apps per page (default, most)
PER_PAGE, MAX_PER_PAGE = 100, 1000
#: seconds between two comments on an idle log follow (a closed browser is noticed then)
_FOLLOW_IDLE_S = 15.0


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
        filter_timeout: seconds a log filter (regular expression) may run per request
        filter_workers: processes matching log filters at most
        max_follows: logs followed at once at most (one thread each)
        list_timeout: seconds a page waits for a scheduler's list read (then it is shown
            without that scheduler's fresh rows, with an error naming it)
        public_url: the URL browsers use when a reverse proxy serves the dashboard (e.g.
            ``https://ml.example.com/torchx``): its path prefixes every link, static file and
            redirect; its origin is accepted by the same-origin check of POSTs
    """

    schedulers: list[str]
    token: str | None = None
    loopback: bool = True
    refresh: float = 2.0
    tail_lines: int = 500
    engine_urls: Mapping[str, str] = field(default_factory=dict)
    cfgs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    filter_timeout: float = 10.0
    filter_workers: int = 2
    max_follows: int = 32
    list_timeout: float = 10.0
    public_url: str = ""

    @property
    def root(self) -> str:
        """The path prefix of every URL (``""`` without a public URL)."""
        return urlsplit(self.public_url).path.rstrip("/") if self.public_url else ""

    @property
    def public_origin(self) -> str | None:
        """``scheme://host[:port]`` of the public URL (None without one)."""
        if not self.public_url:
            return None
        parts = urlsplit(self.public_url)
        return f"{parts.scheme}://{parts.netloc}"


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


async def _events(
    follower: Follower, ref: LogRef, pool: RegexPool, budget: float
) -> AsyncIterator[str]:
    """The server-sent events of a log follow: ``id:`` the number of log lines read so far (a
    reconnecting browser sends it back as ``Last-Event-ID``), ``data:`` the ``[number, text]``
    of the new lines matching ``ref.regex``; an ``end`` event when the log ended."""
    regex = ref.regex
    try:
        yield "retry: 2000\n: following\n\n"
        while True:
            lines = await follower.next_batch(_FOLLOW_IDLE_S)
            if lines is None:
                yield f"event: end\ndata: {json.dumps(follower.error)}\n\n"
                return
            if not lines:
                yield ": idle\n\n"  # notices a closed browser
                continue
            first = follower.position + 1
            if regex:
                try:
                    deadline = time.monotonic() + budget
                    keep = await run_in_threadpool(pool.matching, regex, lines, deadline)
                except FilterCutOff as e:
                    cut = f"the filter was stopped after {budget:g} s ({e.reason}) at line {first}"
                    yield f"event: end\ndata: {json.dumps(cut)}\n\n"
                    return
            else:
                keep = list(range(len(lines)))
            follower.position += len(lines)
            shown = [[first + i, ref.show(lines[i])] for i in keep]
            yield f"id: {follower.position}\ndata: {json.dumps(shown)}\n\n"
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
        self.pool = RegexPool(settings.filter_workers)
        self.follow_slots = threading.BoundedSemaphore(settings.max_follows)
        self.usage = UsageHistory()

    def render(self, request: Request, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        body = self.env.get_template(name).render(
            csrf=self.csrf,
            refresh_ms=int(self.settings.refresh * 1000),
            root=self.settings.root,
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
        f = Filters(
            q.get("scheduler", ""), q.get("state", ""), q.get("name", ""), q.get("owner", "")
        )
        sort, order = q.get("sort", "submitted"), q.get("order", "desc")
        if sort not in SORTS or order not in ("asc", "desc"):
            raise BadRequest(
                f"sort={sort!r}, order={order!r}: sort is one of {', '.join(SORTS)} and order"
                " asc or desc"
            )
        per = max(
            1,
            min(
                _int_param(request, "per_page", str(PER_PAGE), "per_page={!r} is not a number"),
                MAX_PER_PAGE,
            ),
        )
        page = max(1, _int_param(request, "page", "1", "page={!r} is not a page number"))
        rows, errors = self.board.rows(f)
        if (sort, order) != ("submitted", "desc"):
            sort_rows(rows, sort, descending=order == "desc")
        pages = max(1, -(-len(rows) // per))
        page = min(page, pages)
        shown = rows[(page - 1) * per : page * per]
        base = {"scheduler": f.scheduler, "state": f.state, "name": f.name, "owner": f.owner}
        base = {k: v for k, v in base.items() if v}

        def query(**extra: Any) -> str:
            return urlencode({**base, "sort": sort, "order": order, "per_page": per, **extra})

        def sort_query(key: str) -> str:
            flip = "asc" if key == sort and order == "desc" else "desc"
            return urlencode({**base, "sort": key, "order": flip, "per_page": per})

        return {
            "rows": shown,
            "errors": errors,
            "filters": f,
            "age": age,
            "now": time.time(),
            "span": span,
            "utc": utc,
            "columns": COLUMNS,
            "sort": sort,
            "order": order,
            "page": page,
            "pages": pages,
            "total": len(rows),
            "first": (page - 1) * per + 1,
            "last": (page - 1) * per + len(shown),
            "query": query(page=page),
            "page_query": lambda p: query(page=p),
            "sort_query": sort_query,
        }

    def apps(self, request: Request) -> Response:
        return self.render(request, "apps.html", **self.apps_ctx(request))

    def apps_rows(self, request: Request) -> Response:
        return self.render(request, "_rows.html", **self.apps_ctx(request))

    def usage_of(self, page: AppPage) -> dict[tuple[str, int], ReplicaSeries] | None:
        """A new sample of the replicas' resource use, with the earlier ones; None where the
        scheduler cannot measure it (or the app ended)."""
        if page.status is None or page.terminal:
            return None
        try:
            now = self.runner.resource_usage(page.handle)
        except Exception as e:  # noqa: BLE001 - shown on the page, the rest still renders
            page.problems.append(f"resource use unavailable: {type(e).__name__}: {e}")
            return None
        return None if now is None else self.usage.add(page.handle, now, time.monotonic())

    def app(self, request: Request) -> Response:
        show_env = request.query_params.get("show_env") == "1"
        page = app_page(
            self.runner, self.handle_of(request), self.settings.engine_urls, show_env=show_env
        )
        usage = self.usage_of(page)
        return self.render(request, "app.html", page=page, show_env=show_env, usage=usage)

    def app_status(self, request: Request) -> Response:
        page = app_page(
            self.runner, self.handle_of(request), self.settings.engine_urls, with_details=False
        )
        return self.render(request, "_status.html", page=page, usage=self.usage_of(page))

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
            return RedirectResponse(f"{self.settings.root}/", status_code=303)
        return RedirectResponse(
            f"{self.settings.root}/app?handle={quote(handle, safe='')}", status_code=303
        )

    def log_ref(self, request: Request) -> LogRef:
        q = request.query_params
        k = _int_param(request, "k", "0", "replica index k={!r} is not an integer")
        role = q.get("role", "")
        if not role:
            raise BadRequest("role is required (the role whose replica's log to show)")
        ref = LogRef(
            self.handle_of(request),
            role,
            k,
            q.get("stream", ""),
            q.get("regex", ""),
            redact=q.get("redact") == "1",
        )
        ref.check()
        return ref

    def logs(self, request: Request) -> Response:
        ref = self.log_ref(request)
        asked = _int_param(
            request, "n", str(self.settings.tail_lines), "n={!r} is not a number of lines"
        )
        n = max(1, min(asked, 100_000))
        end = tail(self.runner, ref, n, self.pool, self.settings.filter_timeout)
        query = urlencode(
            {
                "handle": ref.handle,
                "role": ref.role,
                "k": ref.k,
                "stream": ref.stream,
                "regex": ref.regex,
                **({"redact": "1"} if ref.redact else {}),
            }
        )
        whole = urlencode(
            {"handle": ref.handle, "role": ref.role, "k": ref.k, "stream": ref.stream}
        )
        return self.render(
            request, "logs.html", ref=ref, tail=end, n=n, query=query, whole_query=whole
        )

    async def logs_stream(self, request: Request) -> Response:
        ref = self.log_ref(request)
        last = request.headers.get("last-event-id")  # a reconnect: go on after that line
        if last is not None:
            try:
                start = max(0, int(last))
            except ValueError as e:
                raise BadRequest(f"Last-Event-ID {last!r} is not a line number") from e
        else:
            start = max(0, _int_param(request, "skip", "0", "skip must be a number of lines"))
        follower = Follower(self.runner, ref, start, self.follow_slots, asyncio.get_running_loop())
        return StreamingResponse(
            _events(follower, ref, self.pool, self.settings.filter_timeout),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def logs_download(self, request: Request) -> Response:
        ref = self.log_ref(request)
        files = await run_in_threadpool(log_files, self.runner, ref)  # errors: a page, not a file
        stream = f"-{ref.stream}" if ref.stream else ""
        name = f"{ref.handle.rsplit('/', 1)[-1]}-{ref.role}-{ref.k}{stream}.log"
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return StreamingResponse(
            download(self.runner, ref, files),
            media_type="application/octet-stream",
            headers={"content-disposition": f'attachment; filename="{safe}"'},
        )

    async def favicon(self, request: Request) -> Response:
        return RedirectResponse(f"{self.settings.root}/static/favicon.svg", status_code=301)

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
            except TooManyFollowsError as e:
                return self.error(request, 503, str(e))
            except TorchXError as e:
                if isinstance(e, ValueError):  # a bad role, replica or stream; an unreadable app
                    return self.error(request, 400, f"{type(e).__name__}: {e}")
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
            Route("/favicon.ico", self.favicon),
            Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
        ]


def create_app(runner: Runner, settings: Settings) -> tuple[Guard, Board]:
    """The ASGI application of a dashboard over ``runner`` (wrapped in its security guard),
    and the board of apps it serves (its read counters are what benchmarks look at)."""
    board = Board(
        runner, settings.schedulers, settings.refresh, settings.cfgs, timeout=settings.list_timeout
    )
    csrf = secrets.token_urlsafe(24)
    pages = _Pages(runner, settings, board, csrf)
    guard = Guard(
        Starlette(routes=pages.routes()),
        settings.token,
        csrf,
        settings.loopback,
        public_origin=settings.public_origin,
        root=settings.root,
    )
    pages.guard = guard
    return guard, board
