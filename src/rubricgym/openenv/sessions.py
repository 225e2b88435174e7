"""rubricgym's own session layer over OpenEnv's wire protocol: what ``rubricgym serve`` answers at
``/ws``, ``/reset``, ``/step``, ``/state`` and ``/metadata``.

OpenEnv's server (``create_app``) cannot be configured to hold what a server reachable by any
client must hold, so these routes are ours (the messages are OpenEnv's, so its clients, TRL's
``environment_factory`` and ``openenv validate`` work unchanged):

* **No env work on the event loop.** An env is built, reset, stepped and closed in its session's
  own thread; HTTP ``/reset`` resets one of a few envs kept for it, in their own threads (building
  one per request, even off the loop, cost every session its CPU); ``/state`` and ``/metadata``
  need no env.
  (OpenEnv built an env on the loop for each ``/metadata`` call: a loop of them slowed every other
  session's steps 35-72x.)
* **The cap holds.** At most ``max_sessions`` envs are alive at once, HTTP ``/reset``'s included.
  A connection holds an env only from its first ``reset``: silent connections take no slot, and
  are closed when idle like any other. A session reaped when idle has its socket closed with a
  reason (OpenEnv's reaper destroyed the env and left the socket stepping an env it no longer
  counted: 290 envs alive at a cap of 64).
* **Per-client limits.** Connections per address and new sessions per address per minute; an
  optional shared token (``Authorization: Bearer <token>`` or ``?token=``) for serving beyond
  loopback.
* **Sizes.** A WebSocket message over ``max_message_bytes`` is answered ``ACTION_TOO_LARGE`` and
  the connection closed with 1009; an HTTP body over ``max_body_bytes`` is answered 413.
* **Typed errors, and the session stays usable.** Every malformed message gets an ``error`` reply
  whose ``code`` is one of :data:`ERROR_CODES` (never Python's own error text for a protocol
  mistake), and the session goes on.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
import uuid
from collections import defaultdict, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from rubricgym.knobs import check_knobs, knob_range

#: every ``code`` an ``error`` reply can carry, and what it means
ERROR_CODES = {
    "INVALID_JSON": "the message is not JSON text (or nests too deep, or holds an integer too long to read)",
    "INVALID_MESSAGE": "the message is JSON but not an object with a string 'type' (or came as a binary frame)",
    "UNKNOWN_TYPE": "the message's 'type' is none of reset, step, state, close",
    "VALIDATION_ERROR": "the message's fields or its action do not fit the schema (/schema publishes it)",
    "ACTION_TOO_LARGE": "the message is longer than the server's limit; the connection is closed (1009)",
    "RESET_NEEDED": "a step before the session's first reset",
    "EXECUTION_ERROR": "the env refused the request (for example a reset option it does not take)",
    "CAPACITY_REACHED": "the server holds its most sessions; the connection is closed (1013), try again later",
    "CLIENT_LIMIT": "this address holds its most connections; the connection is closed (1013)",
    "RATE_LIMITED": "this address opened too many sessions in the last minute; the connection is closed (1013)",
    "SESSION_EXPIRED": "the session was idle too long; its env is released and the connection closed (1001)",
}

#: WebSocket close codes used (RFC 6455): 1001 going away (idle), 1008 policy (token), 1009 too
#: big, 1013 try again later (capacity and per-client limits)
CLOSE_IDLE, CLOSE_POLICY, CLOSE_TOO_BIG, CLOSE_TRY_LATER = 1001, 1008, 1009, 1013


@dataclass
class ServeLimits:
    """What one served id allows its clients. Every knob is checked when the limits are made.

    Examples:
        >>> ServeLimits(max_sessions=8, idle_timeout_s=60).per_client  # no limit of its own: all connections
        16
        >>> ServeLimits(max_sessions=0)
        Traceback (most recent call last):
        ...
        ValueError: ServeLimits.max_sessions must be between 1 and 10,000, got 0
    """

    max_sessions: int = field(default=64, metadata=knob_range(1, 10_000))
    """Envs alive at once (one per WebSocket session that has reset, and one per HTTP /reset in flight)."""
    idle_timeout_s: float | None = 300.0
    """A connection idle this long (nothing received, nothing running) is closed and its env released; None: never."""
    max_sessions_per_client: int | None = None
    """Connections one address may hold at once (None: no limit of its own, only the server's
    2 x max_sessions connections, which suits trainers on loopback; set it when serving beyond loopback)."""
    sessions_per_minute_per_client: int = field(default=600, metadata=knob_range(1, 1_000_000))
    """New sessions (first resets) one address may open per minute."""
    max_message_bytes: int = field(default=4 * 2**20, metadata=knob_range(1_024, 2**30))
    """Longest WebSocket message; longer is answered ACTION_TOO_LARGE and the connection closed (1009)."""
    max_body_bytes: int = field(default=4 * 2**20, metadata=knob_range(1_024, 2**30))
    """Longest HTTP request body; longer is answered 413."""
    token: str | None = None
    """A shared secret every request must carry (Authorization: Bearer <token>, or ?token=); None: open."""
    http_workers: int = field(default=2, metadata=knob_range(1, 256))
    """Threads (and envs, built once and reused) for HTTP /reset."""

    def __post_init__(self) -> None:
        check_knobs(ServeLimits, vars(self))
        if self.idle_timeout_s is not None and not 0 < self.idle_timeout_s < float("inf"):
            raise ValueError(f"ServeLimits.idle_timeout_s must be a positive number of seconds or None, got {self.idle_timeout_s!r}")
        if self.max_sessions_per_client is not None and not 1 <= self.max_sessions_per_client <= self.max_sessions:
            raise ValueError(f"ServeLimits.max_sessions_per_client must be between 1 and max_sessions ({self.max_sessions}), "
                             f"got {self.max_sessions_per_client!r}")

    @property
    def per_client(self) -> int:
        return self.max_sessions_per_client or self.max_connections

    @property
    def max_connections(self) -> int:
        """Open connections in all: twice the cap, so silent connections cannot crowd out sessions for ever."""
        return 2 * self.max_sessions


class Refused(Exception):
    """A request the session layer answers with a typed error (``code`` in :data:`ERROR_CODES`);
    ``close`` is the WebSocket close code that follows it, if any."""

    def __init__(self, code: str, message: str, close: int | None = None) -> None:
        super().__init__(message)
        self.code, self.close = code, close


def error_reply(code: str, message: str, **extra: Any) -> str:
    """The ``error`` message of OpenEnv's protocol, typed."""
    return json.dumps({"type": "error", "data": {"code": code, "message": message, **extra}})


def parse_message(raw: str) -> dict[str, Any]:
    """A client's text message as a dict with a string ``type``, else :class:`Refused` naming what is wrong.

    Examples:
        >>> parse_message('{"type": "state"}')
        {'type': 'state'}
        >>> parse_message('[]')
        Traceback (most recent call last):
        ...
        rubricgym.openenv.sessions.Refused: a message must be a JSON object with a string 'type', got a list
    """
    try:
        message = json.loads(raw)
    except RecursionError:
        raise Refused("INVALID_JSON", "the message nests too deep to read") from None
    except ValueError as error:  # JSONDecodeError, and an integer over Python's digit limit
        raise Refused("INVALID_JSON", f"the message is not valid JSON: {str(error)[:200]}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        got = type(message).__name__ if not isinstance(message, dict) else "an object without a string 'type'"
        got = {"list": "a list", "NoneType": "null", "int": "a number", "float": "a number", "str": "a string",
               "bool": "a boolean"}.get(got, got)
        raise Refused("INVALID_MESSAGE", f"a message must be a JSON object with a string 'type', got {got}")
    return message


def validation_errors(error: Exception) -> list[dict[str, Any]]:
    """pydantic's errors without the offending input (which may be huge or not JSON-representable)."""
    return [{"loc": [str(part) for part in e.get("loc", ())], "msg": str(e.get("msg", ""))[:300], "type": e.get("type")}
            for e in getattr(error, "errors", lambda: [])()[:10]]


@dataclass(eq=False)
class Connection:
    """One WebSocket connection: its address, its env once it has reset, and the thread that runs it."""

    id: str
    client: str
    websocket: Any
    last_activity: float = field(default_factory=time.monotonic)
    env: Any = None
    executor: ThreadPoolExecutor | None = None
    busy: bool = False
    closed: bool = False


class SessionManager:
    """The connections and envs of one served id, with the cap, the per-client limits and the idle
    reaper. Everything here runs on the server's event loop; env work goes to each connection's
    own thread (envs are not thread-safe; one thread per session keeps SQLite and sandboxes happy)."""

    def __init__(self, env_factory: Callable[[], Any], limits: ServeLimits) -> None:
        self.env_factory, self.limits = env_factory, limits
        self.connections: dict[str, Connection] = {}
        self.live_envs = 0  # envs alive or being built, HTTP /reset's included
        self.http_pool = ThreadPoolExecutor(max_workers=limits.http_workers, thread_name_prefix="rubricgym-http")
        self.http_envs: list[Any] = []  # idle envs HTTP /reset reuses (they count as live envs)
        self._http_slots = asyncio.Semaphore(limits.http_workers)
        self._opened: dict[str, deque[float]] = defaultdict(deque)  # per address: when its sessions were opened
        self._reaper: asyncio.Task | None = None

    # -- admission -------------------------------------------------------------------------------

    def admit(self, websocket: Any, client: str) -> Connection:
        """A new connection, or :class:`Refused` when the server or this address holds its most."""
        self._start_reaper()
        if len(self.connections) >= self.limits.max_connections:
            raise Refused("CAPACITY_REACHED", f"the server holds its most connections ({self.limits.max_connections})",
                          CLOSE_TRY_LATER)
        mine = sum(1 for c in self.connections.values() if c.client == client)
        if mine >= self.limits.per_client:
            raise Refused("CLIENT_LIMIT", f"{client} holds {mine} connections, the most one address may", CLOSE_TRY_LATER)
        connection = Connection(id=str(uuid.uuid4()), client=client, websocket=websocket)
        self.connections[connection.id] = connection
        return connection

    def reserve_env(self, client: str | None = None) -> None:
        """Count one more live env, or :class:`Refused` (the cap; with ``client``, its session rate)."""
        if self.live_envs >= self.limits.max_sessions:
            raise Refused("CAPACITY_REACHED", f"the server holds its most sessions ({self.limits.max_sessions}); "
                          "try again later", CLOSE_TRY_LATER)
        if client is not None:
            opened, now = self._opened[client], time.monotonic()
            while opened and now - opened[0] > 60:
                opened.popleft()
            if len(opened) >= self.limits.sessions_per_minute_per_client:
                raise Refused("RATE_LIMITED", f"{client} opened {len(opened)} sessions in the last minute, the most "
                              "one address may", CLOSE_TRY_LATER)
            opened.append(now)
        self.live_envs += 1

    # -- env work, off the loop --------------------------------------------------------------------

    async def run(self, connection: Connection, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in the connection's own thread (built with its env)."""
        connection.busy = True
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(connection.executor, lambda: fn(*args, **kwargs))
        finally:
            connection.busy = False
            connection.last_activity = time.monotonic()

    async def ensure_env(self, connection: Connection) -> Any:
        """The connection's env, built at its first reset (a slot reserved first)."""
        if connection.env is None:
            self.reserve_env(connection.client)
            connection.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rubricgym-session")
            try:
                connection.env = await self.run(connection, self.env_factory)
            except BaseException:
                self.live_envs -= 1
                connection.executor.shutdown(wait=False)
                connection.executor = None
                raise
        return connection.env

    async def release(self, connection: Connection, close: int | None = None, reason: str = "",
                      error: tuple[str, str] | None = None) -> None:
        """Forget the connection and release its env (closed in its own thread); with ``close``, say
        why (``error``: a typed error first) and close the socket, neither waiting on a client that
        does not read."""
        if connection.closed:
            return
        connection.closed = True
        self.connections.pop(connection.id, None)
        env, executor, connection.env, connection.executor = connection.env, connection.executor, None, None
        if env is not None:
            try:
                await asyncio.get_running_loop().run_in_executor(executor, env.close)
            except Exception:  # closing is best effort; the slot is freed either way
                pass
            finally:
                self.live_envs -= 1
        if executor is not None:
            executor.shutdown(wait=False)
        if close is not None:
            try:
                if error is not None:
                    await asyncio.wait_for(connection.websocket.send_text(error_reply(*error)), timeout=2)
                await asyncio.wait_for(connection.websocket.close(code=close, reason=reason[:120]), timeout=2)
            except Exception:  # the client is gone or does not read: its socket dies with the transport
                pass

    async def http_reset(self, client: str, kwargs: dict[str, Any]) -> Any:
        """HTTP ``/reset``: an env of the HTTP pool's own (built once, counted against the cap, then
        reused: building one per request cost every session its CPU) reset in the pool's threads."""
        loop = asyncio.get_running_loop()
        async with self._http_slots:
            env = self.http_envs.pop() if self.http_envs else None
            if env is None:
                self.reserve_env(client)
                try:
                    env = await loop.run_in_executor(self.http_pool, self.env_factory)
                except BaseException:
                    self.live_envs -= 1
                    raise
            try:
                observation = await loop.run_in_executor(self.http_pool, lambda: env.reset(**kwargs))
            except BaseException:
                await loop.run_in_executor(self.http_pool, env.close)
                self.live_envs -= 1
                raise
            self.http_envs.append(env)
            return observation

    # -- the idle reaper ---------------------------------------------------------------------------

    def _start_reaper(self) -> None:
        if self.limits.idle_timeout_s is not None and (self._reaper is None or self._reaper.done()):
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def _reap_forever(self) -> None:
        timeout = self.limits.idle_timeout_s
        while True:
            await asyncio.sleep(min(max(timeout / 4, 0.1), 5.0))
            await self.reap_idle()

    async def reap_idle(self) -> int:
        """Close every connection idle past the timeout (a running step is not idle); how many."""
        timeout, now = self.limits.idle_timeout_s, time.monotonic()
        if timeout is None:
            return 0
        idle = [c for c in list(self.connections.values()) if not c.busy and now - c.last_activity > timeout]
        for connection in idle:
            message = f"idle for more than {timeout:g} s: the session is closed and its env released"
            await self.release(connection, CLOSE_IDLE, "idle timeout", ("SESSION_EXPIRED", message))
        return len(idle)

    async def shutdown(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for connection in list(self.connections.values()):
            await self.release(connection, CLOSE_IDLE, "server shutting down")
        for env in self.http_envs:
            env.close()
        self.live_envs -= len(self.http_envs)
        self.http_envs.clear()
        self.http_pool.shutdown(wait=False)


def token_matches(expected: str | None, headers: dict[str, str], query: dict[str, str]) -> bool:
    """Whether a request carries the shared token (constant-time compare); no token set: always."""
    if expected is None:
        return True
    given = headers.get("authorization", "")
    given = given[7:] if given.lower().startswith("bearer ") else query.get("token", "")
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


class GuardMiddleware:
    """Pure ASGI: the shared token on every route but ``/health`` (401 / WebSocket close 1008) and
    the HTTP body limit (413, read no further than the limit)."""

    def __init__(self, app: Any, limits: ServeLimits) -> None:
        self.app, self.limits = app, limits

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        from urllib.parse import parse_qsl

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if scope.get("path") != "/health" and not token_matches(self.limits.token, headers, query):
            if scope["type"] == "websocket":
                await receive()  # websocket.connect
                return await send({"type": "websocket.close", "code": CLOSE_POLICY, "reason": "a valid token is needed"})
            return await _json(send, 401, {"error": {"type": "UNAUTHORIZED", "message": (
                "this server needs its token: send 'Authorization: Bearer <token>' (or ?token=<token>)")}})
        if scope["type"] == "websocket":
            return await self.app(scope, receive, send)
        limit = self.limits.max_body_bytes
        too_large = {"error": {"type": "BODY_TOO_LARGE", "message": f"the request body is over {limit:,} bytes"}}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return await _json(send, 413, too_large)
        body, more = b"", True
        while more:  # read the body up to the limit, then hand it on whole
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > limit:
                return await _json(send, 413, too_large)
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _json(send: Callable, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
