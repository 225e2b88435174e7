"""``OpenEnv-v0``: any OpenEnv environment server as a rubricgym chat env.

``gym.make("OpenEnv-v0", url="http://host:8000")`` plays one WebSocket session of the server
(OpenEnv's own client underneath), so the group vector env, the trainers and every reward scheme
(``OpenEnvRuler-v0``: RULER ranks N sessions of one scenario) work on environments nobody here
wrote. Two kinds of server:

* a rubricgym server (``rubricgym serve ID``; its action has ``content``, its observation
  ``messages``): the conversation, tools, reward components and typed episode result come back
  as they are in-process, so rewards equal the in-process env's for the same actions and seed;
* any other OpenEnv env (a text action field, an observation of named fields): the action is the
  reply text in the action schema's one string field (or ``action_field``), each observation is
  rendered as a user message (its one text field, else ``name: value`` lines), and the episode
  result is built here. Such a server has no system prompt, so RULER's specification is the
  ``system_prompt`` knob (shown to the agent as the first message).

The scenario of a session is its seed: a reset without one draws a seed here, and ``task_id`` is
``seed:<n>`` unless the server reports its own, so the members of a group replay one scenario.
A server that goes away mid-episode is reconnected once and the episode's actions are replayed
(``info["replayed"]``); when that fails too, the episode ends truncated with the error named
(never a silent zero). An action the server refuses (its schema, its own error) is answered with
``Error: ...`` and costs a turn, as an invalid action does in every rubricgym env.

Examples:
    >>> env = gym.make("OpenEnv-v0", url="http://127.0.0.1:8000")            # doctest: +SKIP
    >>> envs = gym.make_vec("OpenEnvRuler-v0", num_envs=8, group_size=4, url="http://127.0.0.1:8000",
    ...                     system_prompt="Echo the user's words politely.")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from rubricgym.chatenv import ENDED, TURN_LIMIT, TrainingDefaults, knob_range, make_config
from rubricgym.openenv import auth_headers
from rubricgym.records import EpisodeResult
from rubricgym.registration import register_family
from rubricgym.spaces import AssistantReplySpace, ChatSpace
from rubricgym.openenv.protocol import (_CONNECTION_ERRORS, ProtocolError, _finite, _object, _passed,  # noqa: F401
                                        _server_json, pick_server, render_observation, served_variant, server_urls,
                                        text_field)


@dataclass
class OpenEnvConfig:
    """Knobs of ``OpenEnv-v0`` (every one named, typed, defaulted)."""

    url: str = ""
    """The server's base URL (``http://host:port``; required); several, comma-separated, spread the
    envs made with them over those servers in turn (a group's members, a trainer's sessions)."""
    system_prompt: str | None = None
    """The agent's specification for servers whose observations carry none (what RULER judges against);
    shown as the first message. Ignored for rubricgym servers, whose envs have their own."""
    action_field: str | None = None
    """The action's text field; None: ``content`` for a rubricgym server, else the action schema's one
    required string field."""
    max_turns: int = field(default=16, metadata=knob_range(1, 1_000))
    """Client-side turn limit: an episode still running after this many actions is truncated."""
    max_action_chars: int = field(default=200_000, metadata=knob_range(1, 10_000_000))
    """Longer replies are refused here, before they reach the server."""
    connect_timeout_s: float = field(default=10.0, metadata=knob_range(0.001, 3_600))
    """Seconds to open a session (and to read the server's schema)."""
    message_timeout_s: float = field(default=120.0, metadata=knob_range(0.001, 86_400))
    """Seconds to wait for one reset or step reply (a judged step waits on its judge): one deadline
    for the whole call, however the server drips or fragments its reply."""
    reset_kwargs: dict[str, Any] | None = None
    """Extra reset arguments of every episode (a split, a difficulty ...)."""
    token: str | None = None
    """The server's shared token (``rubricgym serve --token``); None: ``$RUBRICGYM_SERVE_TOKEN`` if set."""


class OpenEnvEnv(gym.Env):
    """Any OpenEnv environment server as a chat env (one WebSocket session per env)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    training = TrainingDefaults(max_new_tokens=96)
    #: the server runs the tools it lists (the client relays the calls)
    execute_tools = True

    def __init__(self, config: OpenEnvConfig | None = None, render_mode: str | None = None, **kwargs: Any):
        self.config = cfg = make_config(OpenEnvConfig, config, kwargs)
        if not cfg.url:
            raise ValueError("OpenEnv-v0 needs url='http://host:port' (an OpenEnv server, e.g. `rubricgym serve Math-v0`)")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        #: this env's server: the next of the given ones in turn
        self.url = pick_server(cfg.url)
        schema = _server_json(self.url, "schema", cfg.connect_timeout_s, cfg.token)
        action_props = _object(_object(schema.get("action")).get("properties"))
        observation_props = _object(_object(schema.get("observation")).get("properties"))
        #: a rubricgym server: chat observations with the env's own info in their metadata
        self.chat_server = "messages" in observation_props and "content" in action_props
        self.action_field = cfg.action_field or ("content" if self.chat_server else text_field(_object(schema.get("action"))))
        self.max_action_chars = cfg.max_action_chars
        self.observation_space = ChatSpace()
        self.action_space = AssistantReplySpace(max_length=cfg.max_action_chars)
        self._client: Any = None
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self._reset_kwargs: dict[str, Any] = {}
        self._actions: list[dict[str, Any]] = []
        self._task_id: str | None = None
        self._turn, self._ended = 0, True

    # -- the session ---------------------------------------------------------------------------

    def _session(self):
        if self._client is None:
            from openenv.core.generic_client import GenericEnvClient

            self._client = GenericEnvClient(base_url=self.url, connect_timeout_s=self.config.connect_timeout_s,
                                            headers=auth_headers(self.config.token) or None,
                                            message_timeout_s=self.config.message_timeout_s).sync()
        return self._client

    def _session_alive(self) -> bool:
        from websockets.protocol import State

        socket = getattr(getattr(self._client, "async_client", None), "_ws", None)
        return socket is not None and socket.state is State.OPEN

    def _drop_session(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # the socket is already gone: nothing left to close
                pass

    def _call(self, method: str, *args: Any, **kwargs: Any):
        """``reset`` / ``step`` on the session within one overall deadline (``message_timeout_s``):
        OpenEnv's own timeout is per message read, so a server that drips bytes held a step for
        ever. Past the deadline the call is cancelled, the session dropped, and TimeoutError raised."""
        import asyncio
        import concurrent.futures

        client = self._session()
        call = getattr(client.async_client, f"_{method}_async")  # the coroutine OpenEnv's sync wrapper runs
        deadline = self.config.message_timeout_s

        async def bounded():
            return await asyncio.wait_for(call(*args, **kwargs), timeout=deadline)

        try:
            result = client._run(bounded())
        except (asyncio.TimeoutError, concurrent.futures.TimeoutError):
            self._drop_session()
            raise TimeoutError(f"the env server at {self.url} did not answer {method} within {deadline:g} s") from None
        except _CONNECTION_ERRORS:
            raise
        except RuntimeError as error:
            if str(error).startswith("Server error"):  # OpenEnv's form of the server's error reply: a refusal
                raise
            raise ProtocolError(f"its {method} reply could not be read: {error}") from None
        except Exception as error:  # a reply OpenEnv's client could not read (not JSON, not UTF-8, not an object ...)
            self._drop_session()  # what else that socket holds is not to be trusted
            raise ProtocolError(f"its {method} reply could not be read: {type(error).__name__}: {str(error)[:200]}") from None
        return self._checked(result)

    def _checked(self, result: Any) -> Any:
        """``result`` when the env can pass it on: a finite reward, a dict observation, and for a chat
        server a list of chat messages; else :class:`ProtocolError`."""
        reward = result.reward
        if reward is not None and not _finite(reward):
            raise ProtocolError(f"the server sent a reward of {reward!r:.40}: not a finite number")
        if not isinstance(result.observation, dict):
            raise ProtocolError(f"the server sent an observation of type {type(result.observation).__name__}, not an object")
        metadata = self._metadata(result)
        components = metadata.get("reward_components")
        if components is not None and not (isinstance(components, dict) and all(
                isinstance(name, str) and _finite(value) for name, value in components.items())):
            raise ProtocolError(f"the server sent reward_components {components!r:.60}: not names to finite numbers")
        if metadata.get("correct") not in (None, True, False):
            raise ProtocolError(f"the server sent correct={metadata['correct']!r:.40}: not true, false or null")
        tools = result.observation.get("tools")
        if tools is not None and not (isinstance(tools, list) and all(isinstance(tool, dict) for tool in tools)):
            raise ProtocolError(f"the server sent tools {tools!r:.60}: not a list of tool schemas")
        episode = metadata.get("episode")
        if isinstance(episode, dict):
            from pydantic import ValidationError

            try:
                EpisodeResult.model_validate(episode)
            except ValidationError as error:  # e.g. an infinite reward, which JSON carries as null
                problem = error.errors()[0]
                raise ProtocolError(f"the server sent an episode result with {'.'.join(map(str, problem['loc']))}: "
                                    f"{problem['msg']}") from None
        if self.chat_server:
            messages = result.observation.get("messages")
            if not ChatSpace().contains(list(messages) if isinstance(messages, list) else messages):
                raise ProtocolError("the server sent an observation whose messages are not a chat "
                                    "(role user / assistant / system / tool, content a string)")
        return result

    # -- gymnasium -------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options must be a dict such as {{'task_id': ...}} or None, got {type(options).__name__}")
        super().reset(seed=seed)
        options = dict(options or {})
        task_id = options.pop("task_id", None)
        kwargs: dict[str, Any] = {**(self.config.reset_kwargs or {}), **options}
        if task_id is not None and str(task_id).startswith("seed:"):
            kwargs["seed"] = int(str(task_id)[5:])
        elif task_id is not None and self.chat_server:
            kwargs["task_id"] = str(task_id)
        else:  # the scenario is the seed: draw one so that the group's other members can replay it
            kwargs["seed"] = int(seed) if seed is not None else int(self.np_random.integers(2**31 - 1))
        hint = kwargs.pop("hint", None) if not self.chat_server else None
        try:  # what cannot cross the wire is refused here, naming it
            json.dumps(kwargs, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as error:
            raise ValueError(f"reset options {kwargs!r:.80} cannot be sent to the server as JSON: {error}") from None
        result = self._reset_call(kwargs)
        self._reset_kwargs, self._actions = kwargs, []
        self._turn, self._ended = 0, False
        metadata = self._metadata(result)
        self._task_id = str(metadata["task_id"]) if metadata.get("task_id") is not None else f"seed:{kwargs.get('seed')}"
        if self.chat_server:
            self.messages = list(result.observation.get("messages") or [])
            self.tools = list(result.observation.get("tools") or [])
        else:
            first = render_observation(result.observation) + (f"\n\n{hint}" if hint else "")
            self.messages = ([{"role": "system", "content": self.config.system_prompt}] if self.config.system_prompt else []) + [
                {"role": "user", "content": first}]
            self.tools = []
        return list(self.messages), self._info()

    def _reset_call(self, kwargs: dict[str, Any]):
        """The server's reset, once more on a fresh session after a connection failure; a refusal
        is a ValueError (as in process: an unknown task id), a lost session a ConnectionError."""
        for attempt in (1, 2):
            try:
                return self._call("reset", **kwargs)
            except RuntimeError as error:  # "Server error: ...": the server refused this reset
                raise ValueError(f"the env server at {self.url} refused reset with options {kwargs!r:.80}: {error}") from None
            except _CONNECTION_ERRORS as error:  # a restarted server: one fresh session, then the error is the caller's
                self._drop_session()
                if attempt == 2 and isinstance(error, (ConnectionError, TimeoutError)):
                    raise
                if attempt == 2:  # websockets' ConnectionClosed is no OSError: said as one
                    raise ConnectionError(f"the env server at {self.url} could not reset: {type(error).__name__}: {error}") from None

    def step(self, action: Any):
        if self._ended:
            return list(self.messages), 0.0, True, False, self._info(error=ENDED, episode_ended=True, reward_components={})
        self._turn += 1
        payload, invalid = self._payload(action)
        if invalid is not None:
            self.messages += [{"role": "assistant", "content": action if isinstance(action, str) else ""},
                              {"role": "user", "content": f"Error: {invalid}"}]
            return self._after_refusal(invalid)
        replayed = False
        try:
            # OpenEnv's client reconnects by itself, to a fresh session that never saw this episode:
            # a closed socket, or a server that answers "episode ended", means the session is lost
            if not self._session_alive():
                raise ConnectionError("the session's connection closed")
            result = self._call("step", payload)
            if self.chat_server and self._metadata(result).get("episode_ended"):
                raise ConnectionError("the server's session no longer holds this episode")
        except RuntimeError as error:  # the server's refusal of this action ("Server error: ...")
            if not self.chat_server:
                self.messages.append({"role": "assistant", "content": payload[self.action_field]})
            self.messages.append({"role": "user", "content": f"Error: {error}"})
            return self._after_refusal(str(error))
        except ProtocolError as error:  # an answer that cannot be passed on: the episode ends here, truncated
            return self._lost(f"the env server at {self.url} broke the protocol: {error}")
        except _CONNECTION_ERRORS as error:
            try:
                result, replayed = self._replay(payload), True
            except Exception as again:
                return self._lost(f"the env server at {self.url} went away mid-episode ({error}); replaying "
                                  f"the episode's {len(self._actions)} earlier action(s) failed too ({again})")
        self._actions.append(payload)
        try:
            return self._passed_on(result, payload, replayed)
        except (TypeError, ValueError, KeyError, AttributeError) as error:  # a reply shape no check above foresaw
            return self._lost(f"the env server at {self.url} broke the protocol: {type(error).__name__}: {str(error)[:200]}")

    def _passed_on(self, result: Any, payload: dict[str, Any], replayed: bool):
        """The step's answer to the agent from the server's (checked) result."""
        metadata = self._metadata(result)
        done = bool(result.done)
        truncated = bool(result.observation.get("truncated")) if self.chat_server else False
        if self.chat_server:
            self.messages = list(result.observation.get("messages") or [])
        else:
            self.messages.append({"role": "assistant", "content": payload[self.action_field]})
            text = render_observation(result.observation)
            if text:
                self.messages.append({"role": "user", "content": text})
        if not done and self._turn >= self.config.max_turns:
            done, truncated = True, True
            metadata.setdefault("error", TURN_LIMIT)
            self._drop_session()  # the server's episode is abandoned: its session goes with it
        extra = {"replayed": True} if replayed else {}
        reward = float(result.reward or 0.0)
        if done:
            return self._finish(reward, truncated, metadata, **extra)
        return list(self.messages), reward, False, False, self._info(**{**_passed(metadata), **extra})

    def _payload(self, action: Any) -> tuple[dict[str, Any], str | None]:
        if isinstance(action, str):
            if len(action) > self.max_action_chars:
                return {}, f"the reply is {len(action):,} characters; the limit is {self.max_action_chars:,}"
            return {self.action_field: action}, None
        if isinstance(action, dict) and self.chat_server:
            content = action.get("content") or ""
            if not isinstance(content, str):
                return {}, f"the action's content must be a string or null, got {type(content).__name__}"
            payload = {"content": content, **({"tool_calls": action["tool_calls"]} if action.get("tool_calls") else {})}
            try:  # what cannot cross the wire is refused here, with its reason
                json.dumps(payload)
            except (TypeError, ValueError) as error:
                return {}, f"the action cannot be sent as JSON: {error}"
            return payload, None
        return {}, f"an action must be a reply string{' or an assistant message dict' if self.chat_server else ''}, got {type(action).__name__}"

    def _replay(self, payload: dict[str, Any]):
        """A fresh session, the episode's reset and earlier actions again, then this one."""
        self._drop_session()
        self._call("reset", **self._reset_kwargs)
        for earlier in self._actions:
            self._call("step", earlier)
        return self._call("step", payload)

    def _after_refusal(self, error: str):
        if self._turn >= self.config.max_turns:
            return self._finish(0.0, False, {"error": error}, answered=False)
        return list(self.messages), 0.0, False, False, self._info(error=error, reward_components={})

    def _lost(self, error: str):
        self._drop_session()
        return self._finish(0.0, True, {"error": error, "reward_components": {}})

    @staticmethod
    def _metadata(result: Any) -> dict[str, Any]:
        metadata = result.metadata if isinstance(result.metadata, dict) else result.observation.get("metadata")
        return dict(metadata) if isinstance(metadata, dict) else {}

    def _info(self, **extra: Any) -> dict[str, Any]:
        info: dict[str, Any] = {"task_id": self._task_id, "system_prompt": self.specification, "turn": self._turn}
        if self.tools:
            info["tools"] = self.tools
        info.update(extra)
        return info

    def _finish(self, reward: float, truncated: bool, metadata: dict[str, Any], answered: bool = True, **extra: Any):
        self._ended = True
        episode = metadata.get("episode")
        if isinstance(episode, dict):
            result = EpisodeResult.model_validate(episode)
            if truncated and not result.truncated:  # ended here (turn limit), not by the server
                result = result.model_copy(update={"truncated": True, "error": metadata.get("error")})
        else:
            components = metadata.get("reward_components") or {"env": reward}
            answer = next((m.get("content") for m in reversed(self.messages) if m.get("role") == "assistant"), None)
            result = EpisodeResult(
                task_id=str(self._task_id), specification=self.specification,
                task=next((m.get("content") or "" for m in self.messages if m.get("role") == "user"), ""),
                answer=answer if answered and not truncated else None, correct=metadata.get("correct"), reward=reward,
                reward_components={k: float(v) for k, v in components.items()}, truncated=truncated,
                error=metadata.get("error"), metadata={k: v for k, v in metadata.items() if k != "episode"})
        info = self._info(**{**_passed(metadata), **extra})
        # a judged server's components (the judge's added) come in its info; the episode's are the env's own
        info.update(episode=result, reward_components=dict(metadata.get("reward_components") or result.reward_components))
        if result.correct is not None:
            info["correct"] = bool(result.correct)
        return list(self.messages), float(reward), not truncated, truncated, info

    @property
    def specification(self) -> str:
        """The system prompt of the current episode (what judges score against)."""
        first = self.messages[0] if self.messages else {}
        return first.get("content") or "" if first.get("role") == "system" else (self.config.system_prompt or "")

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{m['role']}] {m.get('content') or m.get('tool_calls')}" for m in self.messages)

    def close(self) -> None:
        self._drop_session()
        super().close()

    def __deepcopy__(self, memo: dict[int, Any]) -> "OpenEnvEnv":
        """An independent copy: the same episode so far, on a session of its own (opened at its
        next call: its first step replays the episode's reset and actions there, as after a lost
        connection). The session itself (a socket, an event loop) is not copied."""
        import copy

        twin = type(self).__new__(type(self))
        memo[id(self)] = twin
        for key, value in self.__dict__.items():
            setattr(twin, key, None if key == "_client" else copy.deepcopy(value, memo))
        return twin


def register() -> None:
    """``OpenEnv-v0`` (any OpenEnv server) and the judged variants every family gets (RULER)."""
    register_family("OpenEnv", OpenEnvEnv, "any OpenEnv environment server (url=...) as a chat env")
