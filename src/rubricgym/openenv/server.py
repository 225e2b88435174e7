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

import os
from contextlib import contextmanager
from functools import partial
from typing import Any, Iterator

import gymnasium as gym
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, EnvironmentMetadata, Observation, State
from pydantic import Field

import rubricgym  # noqa: F401  (registers the ids)
from rubricgym.records import SeededIds, to_jsonable
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


def make_app(env_id: str, max_sessions: int = 64, idle_timeout_s: float | None = 300.0, **env_kwargs: Any):
    """The FastAPI app serving ``env_id`` (built with ``env_kwargs``) as an OpenEnv environment:
    at most ``max_sessions`` concurrent sessions, each reaped after ``idle_timeout_s`` idle seconds
    (None: never). The env is built once here, so a bad id or knob fails now, not per session."""
    if env_id not in gym.registry:
        raise gym.error.UnregisteredEnv(f"{env_id!r} is not a registered id; `rubricgym envs` lists them")
    RubricgymEnvironment(env_id, env_kwargs).close()
    factory = partial(RubricgymEnvironment, env_id, env_kwargs)
    app = create_app(factory, ChatAction, ChatObservation, env_name=env_id, state_cls=ChatState,
                     concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s))
    app.add_exception_handler(gym.error.ResetNeeded, _reset_needed)
    return app


async def _reset_needed(request: Any, error: Exception):
    """OpenEnv's HTTP ``/step`` builds a fresh env per request (its HTTP API keeps no episode), so a
    step there has no episode to act in: say so with a typed error (409), not a bare 500."""
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=409, content={"error": {"type": "RESET_NEEDED", "message": (
        "HTTP /step has no episode: OpenEnv's HTTP routes build a fresh env per request. Play an episode over the "
        "WebSocket session at /ws (gym.make('OpenEnv-v0', url=...) does), which keeps one env from reset to the end")}})


def app_from_environ():
    """The app a container serves (``openenv.yaml``'s ``app``): ``RUBRICGYM_ENV_ID`` (default
    ``Math-v0``), ``RUBRICGYM_ENV_KWARGS`` (JSON), ``RUBRICGYM_MAX_SESSIONS``, ``RUBRICGYM_IDLE_TIMEOUT_S``."""
    import json

    timeout = os.environ.get("RUBRICGYM_IDLE_TIMEOUT_S", "300")
    return make_app(os.environ.get("RUBRICGYM_ENV_ID", "Math-v0"), max_sessions=int(os.environ.get("RUBRICGYM_MAX_SESSIONS", "64")),
                    idle_timeout_s=None if timeout.lower() in ("", "none") else float(timeout),
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
