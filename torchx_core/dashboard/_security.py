"""The dashboard's guards, applied to every request before any page code runs.

* **Token**: on a non-loopback bind every request needs the token (``Authorization: Bearer``,
  the ``torchx_dashboard`` cookie, or ``?token=`` once: it sets the cookie and redirects to the
  same URL without it). Anything else gets 401.
* **Host**: on a loopback bind only ``127.0.0.1``/``localhost``/``[::1]`` Host headers are served,
  so a web page elsewhere cannot reach the dashboard through DNS rebinding.
* **Cross-site writes**: a POST needs the page's CSRF token and, when the browser sends them,
  an ``Origin`` equal to the dashboard's and ``Sec-Fetch-Site`` of ``same-origin``; otherwise 403.
  No CORS header is ever sent, so other sites cannot read pages either.
* Every response carries a strict Content-Security-Policy (scripts and styles only from the
  dashboard's own ``/static``, no inline script), ``nosniff``, ``same-origin`` referrers and no
  framing.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

__all__ = ["COOKIE", "Guard", "is_loopback", "new_token"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "torchx_dashboard"
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

HEADERS = [
    (
        b"content-security-policy",
        (
            b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
            b" connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
        ),
    ),
    (b"x-content-type-options", b"nosniff"),
    # same-origin, not no-referrer: with no-referrer Chromium sends `Origin: null` on form posts
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


def new_token() -> str:
    """A fresh random token (for ``--token`` when none is given)."""
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` only serves this machine."""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _host_name(host_header: str) -> str:
    """The host of a Host header (``name``, ``name:port``, ``[v6]``, ``[v6]:port``), or ``""``
    when the header is none of these (``localhost:80@evil``), which matches no allowed name."""
    if host_header.startswith("["):
        end = host_header.find("]")
        if end < 0:
            return ""
        name, port = host_header[1:end], host_header[end + 1 :]
    elif host_header.count(":") == 1:
        name, _, digits = host_header.partition(":")
        port = ":" + digits
    else:
        name, port = host_header, ""
    valid_port = not port or (port[0] == ":" and port[1:].isascii() and port[1:].isdigit())
    return name if valid_port else ""


class Guard:
    """ASGI middleware enforcing the rules of this module around ``app``.

    Args:
        app: the dashboard's routes
        token: required on every request when set (None: loopback only, no token)
        csrf: the CSRF token every POST form carries
        loopback: the server is bound to a loopback address (Host header checked)
    """

    def __init__(self, app: ASGIApp, token: str | None, csrf: str, loopback: bool) -> None:
        self.app, self.token, self.csrf, self.loopback = app, token, csrf, loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if self.loopback and _host_name(headers.get("host", "")) not in _LOOPBACK_NAMES:
            await _plain(send, 403, "this dashboard serves only http://127.0.0.1 (Host refused)")
            return
        if self.token is not None:
            given = _given_token(scope, headers)
            if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
                await _plain(
                    send,
                    401,
                    "a token is required: open the URL `torchx dashboard`"
                    " printed (…?token=...) or send `Authorization: Bearer <token>`",
                )
                return
            if _query_token(scope) is not None:  # move the token from the URL to a cookie
                await _redirect_without_token(scope, send, self.token)
                return
        if scope["method"] not in ("GET", "HEAD", "POST"):
            await _plain(send, 405, "only GET and POST are served")
            return
        if scope["method"] == "POST" and not _same_origin(headers, scope):
            await _plain(send, 403, "cross-site request refused")
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        scope.setdefault("state", {})["csrf"] = self.csrf
        await self.app(scope, receive, send_with_headers)

    def csrf_ok(self, given: str) -> bool:
        """Whether a POSTed CSRF token is this server's."""
        return hmac.compare_digest(given.encode(), self.csrf.encode())


def _query_token(scope: Scope) -> str | None:
    raw: bytes = scope.get("query_string", b"")
    for k, v in parse_qsl(raw.decode("latin-1")):
        if k == "token":
            return v
    return None


def _given_token(scope: Scope, headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    query = _query_token(scope)
    if query is not None:
        return query
    cookie: SimpleCookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed cookie header is no token
        return None
    morsel = cookie.get(COOKIE)
    return morsel.value if morsel is not None else None


def _same_origin(headers: dict[str, str], scope: Scope) -> bool:
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is not None:
        scheme = scope.get("scheme", "http")
        return origin == f"{scheme}://{headers.get('host', '')}"
    return True


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _redirect_without_token(scope: Scope, send: Send, token: str) -> None:
    query = [
        (k, v)
        for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        if k != "token"
    ]
    location = quote(scope.get("path", "/")) + (f"?{urlencode(query)}" if query else "")
    cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode("latin-1")),
                (b"set-cookie", cookie.encode("latin-1")),
                (b"content-length", b"0"),
                *HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
