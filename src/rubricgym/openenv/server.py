"""Any registered id as an OpenEnv environment server (``rubricgym serve ENV_ID``).

Built on the ``openenv`` package's own server (:func:`openenv.core.env_server.http_server.create_app`:
WebSocket sessions at ``/ws``, ``/health``, ``/schema``, ``/metadata``, idle-session reaping), so
TRL's ``environment_factory``, SkyRL, TorchRL and OpenEnv's own clients drive rubricgym envs with
nothing of ours installed. Each WebSocket session gets its own env instance (its own SQLite shop,
sandbox and judge state), so the environment is declared safe for concurrent sessions.

The wire format (``/schema`` publishes it):

* action :class:`ChatAction`: ``content`` (the reply; tool calls as ``<tool_call>`` blocks) and
  optionally OpenAI-style ``tool_calls``;
* observation :class:`ChatObservation`: ``messages`` (the conversation so far, system prompt
  first), ``tools`` (OpenAI schemas), ``truncated``, and OpenEnv's ``reward`` / ``done``;
  ``metadata`` is the env's ``info`` as JSON (``task_id``, ``system_prompt``, ``turn``,
  ``reward_components``, ``error``, and on the final step ``episode``, the typed episode result);
* reset takes ``seed``, ``task_id`` (same id, same scenario), ``hint`` and any other option the
  family reads.

Examples:
    >>> app = make_app("Math-v0", max_sessions=4, levels=(1,))   # doctest: +SKIP
    >>> import uvicorn; uvicorn.run(app, port=8000)                # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from contextlib import contextmanager
from functools import partial
from typing import Any, Iterator

import gymnasium as gym
from fastapi import Request, WebSocket
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.serialization import deserialize_action, serialize_observation
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import (Action, ConcurrencyConfig, EnvironmentMetadata, Observation, ResetRequest, ResetResponse,
                                           State)
from pydantic import Field

import rubricgym  # noqa: F401  (registers the ids)
from rubricgym.openenv.sessions import (CLOSE_TOO_BIG, GuardMiddleware, Refused, ServeLimits, SessionManager, error_reply,
                                        parse_message, validation_errors)
from rubricgym.records import SeededIds, to_jsonable
from rubricgym.utf8 import utf8_bytes
from rubricgym.registration import ENVS

#: info keys sent in the observation's own fields, not again in its metadata
_OWN_FIELDS = ("tools",)


class ChatAction(Action):
    """The agent's reply: text (tool calls inside as ``<tool_call>`` blocks) and / or OpenAI-style
    ``tool_calls``."""

    content: str = Field(default="", description="the assistant's reply text")
    tool_calls: list[dict[str, Any]] | None = Field(
        default=None, description="OpenAI-style tool calls ({'function': {'name', 'arguments'}}), if any")

    def as_env_action(self) -> str | dict[str, Any]:
        """What the gym env's ``step`` takes: the text, or an assistant message with tool calls."""
        if self.tool_calls:
            return {"role": "assistant", "content": self.content, "tool_calls": self.tool_calls}
        return self.content


class ChatObservation(Observation):
    """The conversation so far and the tools the agent may call."""

    messages: list[dict[str, Any]] = Field(default_factory=list, description="the conversation, system prompt first")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="OpenAI schemas of the agent's tools")
    truncated: bool = Field(default=False, description="the episode ended by a limit, not by an answer")


class ChatState(State):
    """Where a session stands."""

    env_id: str = ""
    task_id: str | None = None
    done: bool = False


class RubricgymEnvironment(Environment):
    """One session's env: ``gym.make(env_id, **env_kwargs)`` behind OpenEnv's interface."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session builds its own env instance

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None):
        super().__init__()
        self.env_id = env_id
        self.env = gym.make(env_id, disable_env_checker=True, **dict(env_kwargs or {}))
        self._state = ChatState(env_id=env_id)
        self._episode_ids = SeededIds()  # reset(seed=...) reseeds it: a seeded session names its episodes the same way twice

    def reset(self, seed: int | None = None, episode_id: str | None = None, **options: Any) -> ChatObservation:
        obs, info = self.env.reset(seed=seed, options={k: v for k, v in options.items() if v is not None} or None)
        self._episode_ids.reseed(seed)
        self._state = ChatState(episode_id=episode_id or self._episode_ids.next(), env_id=self.env_id,
                                task_id=None if info.get("task_id") is None else str(info["task_id"]))
        return self._observation(obs, info, reward=None, done=False, truncated=False)

    def step(self, action: ChatAction, timeout_s: float | None = None, **kwargs: Any) -> ChatObservation:
        obs, reward, terminated, truncated, info = self.env.step(action.as_env_action())
        self._state.step_count += 1
        self._state.done = bool(terminated or truncated)
        return self._observation(obs, info, reward=float(reward), done=self._state.done, truncated=bool(truncated))

    @staticmethod
    def _observation(obs: list[dict[str, Any]], info: dict[str, Any], reward: float | None, done: bool,
                     truncated: bool) -> ChatObservation:
        metadata = to_jsonable({k: v for k, v in info.items() if k not in _OWN_FIELDS})
        return ChatObservation(messages=to_jsonable(obs), tools=to_jsonable(info.get("tools") or []), truncated=truncated,
                               reward=reward, done=done, metadata=metadata)

    @property
    def state(self) -> ChatState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        info = ENVS.get(self.env_id)
        return EnvironmentMetadata(name=self.env_id, description=info.summary if info else self.env_id,
                                   version=rubricgym.__version__)

    def close(self) -> None:
        self.env.close()


def make_app(env_id: str, max_sessions: int = 64, idle_timeout_s: float | None = 300.0,
             limits: ServeLimits | None = None, **env_kwargs: Any):
    """The FastAPI app serving ``env_id`` (built with ``env_kwargs``) as an OpenEnv environment:
    at most ``max_sessions`` envs alive at once, each connection closed after ``idle_timeout_s``
    idle seconds (None: never); ``limits`` sets these and the rest (per-client limits, sizes, a
    token) at once. The env is built once here, so a bad id or knob fails now, not per session.

    OpenEnv's app gives the routes that do no env work (``/health``, ``/schema``, the API docs);
    the ones that do are rubricgym's (:mod:`rubricgym.openenv.sessions` says why)."""
    if env_id not in gym.registry:
        raise gym.error.UnregisteredEnv(f"{env_id!r} is not a registered id; `rubricgym envs` lists them")
    limits = limits or ServeLimits(max_sessions=max_sessions, idle_timeout_s=idle_timeout_s)
    probe = RubricgymEnvironment(env_id, env_kwargs)
    metadata, probe_state = probe.get_metadata(), ChatState(env_id=env_id)
    probe.close()
    factory = partial(RubricgymEnvironment, env_id, env_kwargs)
    app = create_app(factory, ChatAction, ChatObservation, env_name=env_id, state_cls=ChatState,
                     concurrency_config=ConcurrencyConfig(max_concurrent_envs=limits.max_sessions))
    # OpenEnv's routes that build envs on the event loop, or hold sessions outside the cap, go
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", "") not in _REPLACED_ROUTES
                            and not getattr(r, "path", "").startswith(("/{env_name}", "/list_environments"))]
    manager = SessionManager(factory, limits)
    app.state.sessions = manager
    _add_routes(app, manager, metadata, probe_state)
    app.router.on_shutdown.append(manager.shutdown)
    app.add_middleware(GuardMiddleware, limits=limits)
    return app


#: OpenEnv's routes that rubricgym answers itself (the task API and the MCP WebSocket are dropped:
#: rubricgym envs have neither tasks by index nor MCP tools)
_REPLACED_ROUTES = {"/ws", "/reset", "/step", "/state", "/metadata", "/mcp"}


def _add_routes(app: Any, manager: SessionManager, metadata: EnvironmentMetadata, idle_state: ChatState) -> None:
    @app.get("/metadata", response_model=EnvironmentMetadata, tags=["Environment Info"])
    async def get_metadata() -> EnvironmentMetadata:
        return metadata  # made once, with the app: no env per call

    @app.get("/state", response_model=ChatState, tags=["State Management"])
    async def get_state() -> ChatState:
        return idle_state  # HTTP keeps no episode; a session's state is the WebSocket's "state" message

    @app.post("/reset", response_model=ResetResponse, tags=["Environment Control"])
    async def http_reset(request: Request, body: ResetRequest | None = None):
        """Reset one of the HTTP pool's envs (HTTP keeps no episode: only the first observation)."""
        client = request.client.host if request.client else "unknown"
        try:
            observation = await manager.http_reset(client, (body or ResetRequest()).model_dump(exclude_unset=True))
        except Refused as refused:
            return JSONResponse(status_code=503 if refused.code == "CAPACITY_REACHED" else 429,
                                content={"error": {"type": refused.code, "message": str(refused)}})
        except Exception as error:
            return JSONResponse(status_code=400, content={"error": {"type": "EXECUTION_ERROR", "message": _said(error)}})
        return ResetResponse(**serialize_observation(observation))

    @app.post("/step", tags=["Environment Control"], status_code=409)
    async def http_step():
        return _reset_needed_reply()

    @app.post("/mcp", tags=["MCP"])
    async def mcp(request: Request):
        """JSON-RPC answers without a session: rubricgym envs expose no MCP tools (their tools are the
        chat's own tool calls)."""
        try:
            call = json.loads(await request.body())
        except (ValueError, RecursionError):
            call = None
        if not isinstance(call, dict) or call.get("jsonrpc") != "2.0" or not isinstance(call.get("method"), str):
            return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}
        if call["method"] == "tools/list":
            return {"jsonrpc": "2.0", "id": call.get("id"), "result": {"tools": []}}
        return {"jsonrpc": "2.0", "id": call.get("id"), "error": {"code": -32601, "message": (
            f"{call['method'][:80]!r}: this env has no MCP tools; play it over the WebSocket session at /ws")}}

    @app.websocket("/ws")
    async def session_socket(websocket: WebSocket) -> None:
        await websocket.accept()
        client = websocket.client.host if websocket.client else "unknown"
        try:
            connection = manager.admit(websocket, client)
        except Refused as refused:
            await _refuse(websocket, refused)
            return
        try:
            while not connection.closed:
                message = await websocket.receive()
                if connection.closed or message["type"] == "websocket.disconnect":
                    break
                connection.last_activity = time.monotonic()
                try:
                    reply = await _answer(manager, connection, message, idle_state)
                except Refused as refused:
                    if refused.close is not None:
                        await manager.release(connection, refused.close, refused.code, (refused.code, str(refused)))
                        break
                    reply = error_reply(refused.code, str(refused))
                if reply is None:  # the client's "close"
                    break
                await websocket.send_text(reply)
        except Exception:  # the connection went away mid-reply (or was closed by the reaper)
            pass
        finally:
            await manager.release(connection, close=1000 if not connection.closed else None, reason="closed")


async def _refuse(websocket: Any, refused: Refused) -> None:
    try:
        await websocket.send_text(error_reply(refused.code, str(refused)))
        await websocket.close(code=refused.close or 1000, reason=refused.code)
    except Exception:  # the client left first
        pass


async def _answer(manager: SessionManager, connection: Any, message: dict[str, Any], idle_state: ChatState) -> str | None:
    """The reply to one WebSocket message (None: the client closed the session)."""
    from openenv.core.env_server.types import WSObservationResponse, WSResetMessage, WSStateResponse, WSStepMessage
    from pydantic import ValidationError

    text = message.get("text")
    if text is None:
        raise Refused("INVALID_MESSAGE", "binary frames are not read: send each message as JSON text")
    limit = manager.limits.max_message_bytes
    if len(text) > limit // 4 and utf8_bytes(text) > limit:  # under limit/4 characters it cannot be over
        raise Refused("ACTION_TOO_LARGE", f"the message is over {limit:,} bytes", close=CLOSE_TOO_BIG)
    request = parse_message(text)
    kind = request["type"]
    try:
        if kind == "reset":
            data = WSResetMessage(**request).data
            env = await manager.ensure_env(connection)
            observation = await manager.run(connection, env.reset, **data)
            return WSObservationResponse(data=serialize_observation(observation)).model_dump_json()
        if kind == "step":
            action = deserialize_action(WSStepMessage(**request).data, ChatAction)
            if connection.env is None:
                raise Refused("RESET_NEEDED", "this session has not reset yet: send a reset first")
            observation = await manager.run(connection, connection.env.step, action)
            return WSObservationResponse(data=serialize_observation(observation)).model_dump_json()
        if kind == "state":
            state = connection.env.state if connection.env is not None else idle_state
            return WSStateResponse(data=state.model_dump()).model_dump_json()
        if kind == "close":
            return None
    except ValidationError as error:
        return error_reply("VALIDATION_ERROR", "the message does not fit the schema (see /schema)", errors=validation_errors(error))
    except gym.error.ResetNeeded as error:
        raise Refused("RESET_NEEDED", str(error)[:300]) from None
    except Refused:
        raise
    except Exception as error:  # the env refused the request: its message, not a traceback
        return error_reply("EXECUTION_ERROR", _said(error))
    raise Refused("UNKNOWN_TYPE", f"unknown message type {kind[:40]!r}: send reset, step, state or close")


def _said(error: Exception) -> str:
    return f"{type(error).__name__}: {str(error)[:300]}"


def _reset_needed_reply():
    """HTTP keeps no episode (OpenEnv's HTTP API has no session), so a ``/step`` there has no episode
    to act in: say so with a typed error (409), not a bare 500."""
    return JSONResponse(status_code=409, content={"error": {"type": "RESET_NEEDED", "message": (
        "HTTP /step has no episode: HTTP requests share no session. Play an episode over the "
        "WebSocket session at /ws (gym.make('OpenEnv-v0', url=...) does), which keeps one env from reset to the end")}})


#: the environment variable through which `rubricgym serve --workers N` hands its worker processes
#: the app to build (JSON: env_id, env_kwargs, limits)
SERVE_APP_ENV = "RUBRICGYM_SERVE_APP"


def serve_app_json(env_id: str, env_kwargs: dict[str, Any], limits: ServeLimits) -> str:
    """What :func:`app_from_environ` rebuilds the app from, in another process."""
    from dataclasses import asdict

    try:
        return json.dumps({"env_id": env_id, "env_kwargs": env_kwargs, "limits": asdict(limits)})
    except TypeError as error:
        raise ValueError(f"serving in several processes needs env kwargs that JSON can carry: {error}") from None


def app_from_environ():
    """The app a worker process or a container serves: from ``RUBRICGYM_SERVE_APP`` (what
    ``rubricgym serve --workers N`` sets), else ``openenv.yaml``'s settings: ``RUBRICGYM_ENV_ID``
    (default ``Math-v0``), ``RUBRICGYM_ENV_KWARGS`` (JSON), ``RUBRICGYM_MAX_SESSIONS``,
    ``RUBRICGYM_IDLE_TIMEOUT_S``, ``RUBRICGYM_SERVE_TOKEN`` (every client must send it, when set)."""
    from rubricgym.openenv import TOKEN_ENV

    if os.environ.get(SERVE_APP_ENV):
        spec = json.loads(os.environ[SERVE_APP_ENV])
        return make_app(spec["env_id"], limits=ServeLimits(**spec["limits"]), **spec["env_kwargs"])
    timeout = os.environ.get("RUBRICGYM_IDLE_TIMEOUT_S", "300")
    limits = ServeLimits(max_sessions=int(os.environ.get("RUBRICGYM_MAX_SESSIONS", "64")),
                         idle_timeout_s=None if timeout.lower() in ("", "none") else float(timeout),
                         token=os.environ.get(TOKEN_ENV) or None)
    return make_app(os.environ.get("RUBRICGYM_ENV_ID", "Math-v0"), limits=limits,
                    **json.loads(os.environ.get("RUBRICGYM_ENV_KWARGS", "{}")))


@contextmanager
def serve_in_thread(app: Any, host: str = "127.0.0.1", port: int | None = None, start_timeout_s: float = 30.0,
                    **uvicorn_kwargs: Any) -> Iterator[str]:
    """Serve ``app`` on ``port`` (None: a free one) in a background thread; yields its base URL (tests,
    benchmarks and notebooks; ``rubricgym serve`` is the command-line way).

    Examples:
        >>> with serve_in_thread(make_app("Math-v0")) as url:              # doctest: +SKIP
        ...     env = gym.make("OpenEnv-v0", url=url)
    """
    import socket
    import threading
    import time

    import uvicorn

    if port is None:  # the OS's pick (rubricgym.testing is for tests; the app does not import it)
        with socket.socket() as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", **uvicorn_kwargs))
    thread = threading.Thread(target=server.run, name=f"openenv-server-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the OpenEnv server on {host}:{port} did not start within {start_timeout_s:.0f} s")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=start_timeout_s)
