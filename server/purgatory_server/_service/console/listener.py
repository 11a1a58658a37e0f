"""The console's listener: an asyncio HTTP server on the gRPC server's own event loop.

Started by the server's assembly only when ``console_listen`` is set (nothing of the
console is imported otherwise). Routes (``<name>`` percent-encoded)::

    GET  /                          overview            GET  /login, POST /login, /logout
    GET  /p/<name>                  operations          POST /p/<name>/{cancel,force,reschedule}
    GET  /p/<name>/live             live outcomes       GET  /p/<name>/events (text/event-stream)
    GET  /p/<name>/groups           groups, schedules   POST /p/<name>/groups/<group>/redrive
                                                        POST /p/<name>/groups/<group>/discard
    GET  /chart/{pending,outcomes}.svg, /chart/lateness/<name>, /static/<file>

Every page reads through RPCs made with the session's token (:mod:`.view`); with tokens
configured, a browser without a signed-in session is sent to ``/login``. A POST needs the
session's CSRF token in its form and, when the browser sends ``Origin``, this console's
own origin; otherwise 403 before anything runs. Over TLS (``tls_cert``) the console is
HTTPS with the same certificate, and with ``tls_client_ca`` it asks for a client
certificate as the gRPC port does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import ssl
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from purgatory_client import AsyncPurgatoryClient
from purgatory_client.errors import PurgatoryError, UnauthenticatedError

from purgatory_server._service.config.server_config import ConfigError, ServerConfig
from purgatory_server._service.console import actions, charts
from purgatory_server._service.console.figures import Figures
from purgatory_server._service.console.groups_page import groups_page
from purgatory_server._service.console.http_wire import (
    BadRequest,
    Request,
    Response,
    read_request,
    write_response,
)
from purgatory_server._service.console.live_stream import live_page, resume_point, stream_outcomes
from purgatory_server._service.console.login_page import login_page
from purgatory_server._service.console.markup import Html, esc, page, url
from purgatory_server._service.console.overview_page import overview
from purgatory_server._service.console.purgatory_page import purgatory_page
from purgatory_server._service.console.refusals import BadInput, Forbidden, status_of
from purgatory_server._service.console.sessions import COOKIE, ConsoleSession, SessionTable
from purgatory_server._service.console.view import View

if TYPE_CHECKING:
    from purgatory_server._service.core.registry import PurgatoryRegistry

__all__ = ["Console", "start_console"]

logger = logging.getLogger("purgatory_server.console")

READ_TIMEOUT_S = 10.0
RPC_TIMEOUT_S = 10.0
STATIC = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
}

Action = Callable[[View, str, dict[str, str]], Awaitable[str]]
_ACTIONS: dict[str, Action] = {
    "cancel": actions.cancel,
    "force": actions.force_complete,
    "reschedule": actions.reschedule,
}


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"console_listen must be host:port, got {address!r}")
    return host.strip("[]"), int(port)


def _redirect(location: str, cookie: str = "") -> Response:
    headers = [("Location", location)]
    if cookie:
        headers.append(("Set-Cookie", cookie))
    return Response(HTTPStatus.SEE_OTHER, headers=headers)


def _html(body: Html, status: HTTPStatus = HTTPStatus.OK, cookie: str = "") -> Response:
    headers = [("Set-Cookie", cookie)] if cookie else []
    return Response(status, body.encode("utf-8"), headers=headers)


class Console:
    """The listener, its sessions, its clients (one per signed-in token) and figures."""

    def __init__(self, config: ServerConfig, registry: PurgatoryRegistry, socket: Path) -> None:
        self._config = config
        self._registry = registry
        self.socket = socket  # the server's private socket for the console (removed on stop)
        self._target = f"unix:{socket}"
        self._auth = config.auth.enabled
        self._tls = self._server_tls(config)
        self._sessions = SessionTable(secure=self._tls is not None)
        self._clients: dict[str | None, AsyncPurgatoryClient] = {}
        self.figures = Figures(registry)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._static = {
            name: (resources.files(__package__) / "static" / name).read_bytes() for name in STATIC
        }
        self.port = 0

    @staticmethod
    def _server_tls(config: ServerConfig) -> ssl.SSLContext | None:
        if not (config.tls_cert and config.tls_key):
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(config.tls_cert, config.tls_key)
        if config.tls_client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(config.tls_client_ca)
        return context

    def _client(self, token: str | None) -> AsyncPurgatoryClient:
        return AsyncPurgatoryClient(
            self._target, timeout=RPC_TIMEOUT_S, token=token, tls=False, trust_env=False
        )

    def _client_for(self, token: str | None) -> AsyncPurgatoryClient:
        """The cached client of a token that signed in (or of no token, auth off)."""
        client = self._clients.get(token)
        if client is None:
            client = self._clients[token] = self._client(token)
        return client

    async def start(self, address: str) -> int:
        host, port = _split(address)
        try:
            self._server = await asyncio.start_server(
                self._accept, host, port, ssl=self._tls, limit=64 * 1024
            )
        except OSError as exc:
            raise OSError(f"cannot serve the console on {address}: {exc.strerror or exc}") from exc
        self.port = int(self._server.sockets[0].getsockname()[1])
        self.figures.start()
        scheme = "https" if self._tls is not None else "http"
        logger.info("console: %s://%s:%d/", scheme, host, self.port)
        return self.port

    async def stop(self) -> None:
        """Close the listener, end open pages and streams, close the clients."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        await self.figures.stop()
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
        shutil.rmtree(self.socket.parent, ignore_errors=True)

    # ------------------------------------------------------------------ connections
    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._connection(reader, writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                request = await asyncio.wait_for(read_request(reader), READ_TIMEOUT_S)
            except BadRequest as exc:
                body = Html(f"<p>{esc(exc)}</p>")
                await write_response(writer, _html(page("Bad request", body), exc.status), False)
                return
            if request is None:
                return
            try:
                response = await self._respond(request, reader, writer)
            except Exception:  # the last resort: a bug becomes 500, logged with its traceback
                logger.exception("bug in the console answering %s %s", request.method, request.path)
                body = Html("<p>The console failed; the server's log says why.</p>")
                status = HTTPStatus.INTERNAL_SERVER_ERROR
                response = _html(page("Internal error", body), status)
            if response is not None:
                await write_response(writer, response, request.method == "HEAD")
        except (ConnectionError, TimeoutError, ssl.SSLError):
            pass  # the browser went away, or never finished its request
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()

    async def _respond(
        self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Response | None:
        """The response, or None when the handler streamed it itself (events)."""
        segments = request.segments
        if request.method in ("GET", "HEAD") and len(segments) == 2 and segments[0] == "static":
            return self._static_file(segments[1])
        session = self._sessions.find(request.cookies.get(COOKIE))
        try:
            if segments == ("login",):
                return await self._login(request, session)
            if request.method == "POST":
                self._check_form(request, session)
            if segments == ("logout",):
                return self._logout(session)
            if session is None or (self._auth and session.token is None):
                if request.method == "POST":
                    raise Forbidden("no session: sign in first")
                if self._auth:
                    return _redirect("/login")
                session = self._sessions.open(None)
                response = await self._route(request, session, reader, writer)
                if response is not None:
                    response.headers.append(("Set-Cookie", self._sessions.cookie(session)))
                return response
            return await self._route(request, session, reader, writer)
        except Forbidden as exc:
            return self._problem(HTTPStatus.FORBIDDEN, str(exc), session)
        except BadInput as exc:
            return self._problem(HTTPStatus.BAD_REQUEST, str(exc), session)
        except PurgatoryError as exc:
            if isinstance(exc, UnauthenticatedError) and session is not None and self._auth:
                self._sessions.close(session)  # the token is no longer configured
            return self._problem(status_of(exc), f"{exc.code.name}: {exc.details}", session)

    def _problem(
        self, status: HTTPStatus, message: str, session: ConsoleSession | None
    ) -> Response:
        signed_in = "signed in" if session is not None and session.token else ""
        csrf = session.csrf if session is not None else ""
        body = Html(f'<p class="problem">{esc(message)}</p><p><a href="/">Overview</a></p>')
        title = f"{status.value} {status.phrase}"
        return _html(page(title, body, signed_in=signed_in, csrf=csrf), status)

    def _static_file(self, name: str) -> Response:
        if name not in STATIC:
            return Response(HTTPStatus.NOT_FOUND, b"not found", "text/plain; charset=utf-8")
        return Response(
            HTTPStatus.OK,
            self._static[name],
            STATIC[name],
        )

    def _check_form(self, request: Request, session: ConsoleSession | None) -> None:
        """403 unless the form carries this session's CSRF token and, if the browser
        says where the form was, it was here."""
        origin = request.headers.get("origin")
        if origin is not None:
            scheme = "https" if self._tls is not None else "http"
            if origin != f"{scheme}://{request.headers.get('host', '')}":
                raise Forbidden("cross-site request refused")
        if session is None or not session.csrf_matches(request.form.get("csrf", "")):
            raise Forbidden("missing or wrong CSRF token: reload the page and try again")

    async def _login(self, request: Request, session: ConsoleSession | None) -> Response:
        if not self._auth:
            return _redirect("/")
        if request.method != "POST":
            if session is None:
                session = self._sessions.open(None)
            return _html(login_page(session.csrf), cookie=self._sessions.cookie(session))
        self._check_form(request, session)
        assert session is not None  # _check_form refuses a POST without one
        token = request.form.get("token", "").strip()
        probe = self._client(token)
        try:
            await probe.list_purgatories()  # any valid token may list
        except UnauthenticatedError:
            return _html(
                login_page(session.csrf, "That token is not valid."), HTTPStatus.UNAUTHORIZED
            )
        finally:
            await probe.close()
        self._sessions.close(session)
        signed = self._sessions.open(token)
        return _redirect("/", self._sessions.cookie(signed))

    def _logout(self, session: ConsoleSession | None) -> Response:
        if session is not None:
            self._sessions.close(session)
        return _redirect("/login" if self._auth else "/", self._sessions.cookie(None))

    # ------------------------------------------------------------------ pages
    async def _route(
        self,
        request: Request,
        session: ConsoleSession,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> Response | None:
        view = View(
            client=self._client_for(session.token),
            csrf=session.csrf,
            signed_in="signed in" if session.token else "",
            figures=self.figures,
            registry=self._registry,
        )
        s = request.segments
        if request.method == "POST":
            return await self._action(view, session, s, request.form)
        match s:
            case ():
                return _html(await overview(view, session.take_notice()))
            case ("p", name):
                return _html(await purgatory_page(view, name, request.query, session.take_notice()))
            case ("p", name, "groups"):
                return _html(await groups_page(view, name, session.take_notice()))
            case ("p", name, "live"):
                return _html(await live_page(view, name))
            case ("p", name, "events"):
                after = resume_point(
                    request.headers.get("last-event-id", ""), request.query.get("after", "")
                )
                await view.client.get_purgatory(name)  # refused before the stream starts
                await stream_outcomes(view, name, after, reader, writer)
                return None
            case ("chart", "pending.svg"):
                await view.client.list_purgatories()
                return Response(body=charts.pending_chart(self.figures.samples), content_type=_SVG)
            case ("chart", "outcomes.svg"):
                await view.client.list_purgatories()
                return Response(body=charts.outcomes_chart(self.figures.samples), content_type=_SVG)
            case ("chart", "lateness", name):
                await view.client.get_purgatory(name)
                body = charts.lateness_chart(self.figures.local(name))
                return Response(body=body, content_type=_SVG)
        return self._problem(HTTPStatus.NOT_FOUND, "no such page", session)

    async def _action(
        self, view: View, session: ConsoleSession, s: tuple[str, ...], form: dict[str, str]
    ) -> Response:
        match s:
            case ("p", name, verb) if verb in _ACTIONS:
                session.notice = await _ACTIONS[verb](view, name, form)
                return _redirect(url("p", name))
            case ("p", name, "groups", group, "redrive"):
                session.notice = await actions.redrive(view, name, group, form)
                return _redirect(url("p", name, "groups"))
            case ("p", name, "groups", group, "discard"):
                session.notice = await actions.discard(view, name, group, form)
                return _redirect(url("p", name, "groups"))
        return self._problem(HTTPStatus.NOT_FOUND, "no such action", session)


_SVG = "image/svg+xml"


async def start_console(config: ServerConfig, registry: PurgatoryRegistry, socket: Path) -> Console:
    """The console listening on ``config.console_listen``, reaching its server at the
    Unix socket ``socket`` (removed with its directory on stop). ConfigError if the
    address is malformed, OSError naming it if it cannot be bound."""
    _split(config.console_listen)
    console = Console(config, registry, socket)
    await console.start(config.console_listen)
    return console
