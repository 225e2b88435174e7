"""A misbehaving OpenEnv server, to test the ``OpenEnv-v0`` client against: a proxy in front of a
real ``rubricgym serve`` app that damages its replies as a script of faults says (Hypothesis draws
the script: :func:`faults`). The other half of "the served protocol both ways" (the first half,
hostile clients against rubricgym's server, is :func:`rubricgym.testing.hostile.protocol_messages`).

    >>> with serve_in_thread(make_app("WordSort-v0")) as upstream:          # doctest: +SKIP
    ...     server = MisbehavingServer(upstream)
    ...     with serve_in_thread(server.app()) as url:
    ...         server.script([Fault("replace", where=3, value=float("nan"))])
    ...         env = gym.make("OpenEnv-v0", url=url, message_timeout_s=0.5)

Each WebSocket message the client sends is passed upstream; the real reply is then damaged by the
next fault of the script (none left: passed on unchanged). The HTTP documents (``/schema``,
``/metadata``) are passed on, or damaged by :attr:`MisbehavingServer.schema_fault`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

FAULT_KINDS = ("pass", "replace", "drop", "text", "binary", "error", "close", "silent", "twice")
"""What a fault does to one reply: pass it on; replace one of its values (``where`` picks which,
``value`` is the new one: NaN, a huge integer, a lone surrogate, a list ...); drop one of its keys;
send ``value`` as text instead; send bytes instead; send an error frame whose data is ``value``;
close the socket with code ``value``; never answer; answer twice (the next call reads a stale reply)."""


@dataclass(frozen=True)
class Fault:
    """One damaged reply (see :data:`FAULT_KINDS`)."""

    kind: str = "pass"
    where: int | str = 0
    """Which value a ``replace`` or ``drop`` hits: the n-th path into the reply (modulo their number),
    or every value under a key of this name (``reward_components``, ``role`` ...)."""
    value: Any = None


REPLY_KEYS = ("type", "data", "observation", "metadata", "messages", "role", "content", "tools", "reward", "done",
              "truncated", "reward_components", "correct", "episode", "task_id", "answer", "error", "turn")
"""The keys of a rubricgym server's replies that a client reads (what a named ``where`` aims at)."""


def faults():
    """A Hypothesis strategy for one :class:`Fault` (Hypothesis is a test dependency)."""
    from hypothesis import strategies as st

    from rubricgym.testing.hostile import json_like_values

    values = json_like_values()
    return st.one_of(
        st.just(Fault("pass")),
        st.builds(Fault, st.just("replace"), st.integers(0, 200) | st.sampled_from(REPLY_KEYS), values),
        st.builds(Fault, st.just("drop"), st.integers(0, 200) | st.sampled_from(REPLY_KEYS)),
        st.builds(Fault, st.just("text"), st.just(0), st.text(max_size=40) | st.sampled_from(["", "{", "[]", "null", "NaN"])),
        st.builds(Fault, st.just("binary"), st.just(0), st.binary(max_size=40)),
        st.builds(Fault, st.just("error"), st.just(0), values),
        st.builds(Fault, st.just("close"), st.just(0), st.sampled_from([1000, 1001, 1008, 1009, 1011, 1013, 4000])),
        st.just(Fault("silent")),
        st.just(Fault("twice")),
    )


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON document (keys and list indices), the root's children first."""
    found: list[tuple] = []
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found.append(prefix + (key,))
        found.extend(_paths(child, prefix + (key,)))
    return found


def damage(document: Any, fault: Fault) -> Any:
    """``document`` with ``fault``'s ``replace`` or ``drop`` applied (a copy; other kinds: unchanged).

    Examples:
        >>> damage({"a": {"b": 1}}, Fault("replace", where=1, value=None))
        {'a': {'b': None}}
        >>> damage({"a": 1, "b": 2}, Fault("drop", where=1))
        {'a': 1}
        >>> damage({"a": {"role": "x"}, "b": [{"role": "y"}]}, Fault("replace", where="role", value=5))
        {'a': {'role': 5}, 'b': [{'role': 5}]}
    """
    document = json.loads(json.dumps(document))
    paths = _paths(document)
    if fault.kind not in ("replace", "drop") or not paths:
        return document
    if isinstance(fault.where, str):  # every value under that key, the deepest first
        chosen = sorted((path for path in paths if path[-1] == fault.where), key=len, reverse=True)
    else:
        chosen = [paths[fault.where % len(paths)]]
    for *parents, last in chosen:
        holder = document
        for key in parents:
            holder = holder[key]
        if fault.kind == "replace":
            holder[last] = fault.value
        elif isinstance(holder, dict):
            del holder[last]
        else:
            holder.pop(last)
    return document


def _text(document: Any) -> str:
    # NaN / Infinity as JSON's extension, a lone surrogate as its escape: what a careless server writes
    return json.dumps(document, allow_nan=True)


class MisbehavingServer:
    """A proxy to a real OpenEnv server at ``upstream`` that damages replies by :meth:`script`."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self.schema_fault: Fault | None = None
        """Damage to the next ``/schema`` or ``/metadata`` document (then cleared)."""
        self.replies = 0
        """Replies sent or withheld so far (what the script consumed)."""

    def script(self, faults: list[Fault], schema_fault: Fault | None = None) -> None:
        """The faults of the next replies, in order (earlier ones not yet used are dropped)."""
        with self._lock:
            self._faults = deque(faults)
            self.schema_fault = schema_fault

    def _next(self) -> Fault:
        with self._lock:
            self.replies += 1
            return self._faults.popleft() if self._faults else Fault("pass")

    def app(self) -> Any:
        """The Starlette app that serves the damaged protocol."""
        import httpx
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, PlainTextResponse, Response
        from starlette.routing import Route, WebSocketRoute

        async def document(request):
            async with httpx.AsyncClient(timeout=30) as client:
                reply = await client.get(f"{self.upstream}{request.url.path}")
            with self._lock:
                fault, self.schema_fault = self.schema_fault, None
            if fault is None or fault.kind == "pass":
                return JSONResponse(reply.json())
            if fault.kind in ("replace", "drop"):
                return Response(_text(damage(reply.json(), fault)), media_type="application/json")
            if fault.kind == "binary":
                return Response(bytes(fault.value or b""), media_type="application/octet-stream")
            if fault.kind == "error":
                return Response(_text(fault.value), status_code=500, media_type="application/json")
            if fault.kind == "silent":
                await asyncio.sleep(3600)
            return PlainTextResponse(str(fault.value))

        async def session(websocket):
            import websockets

            await websocket.accept()
            upstream = await websockets.connect(self.upstream.replace("http", "ws", 1) + "/ws", max_size=None)
            try:
                while True:
                    message = await websocket.receive()
                    if message["type"] == "websocket.disconnect":
                        return
                    await upstream.send(message.get("text") if message.get("text") is not None else message.get("bytes"))
                    reply = await upstream.recv()
                    fault = self._next()
                    if fault.kind == "silent":
                        continue  # the client gives up on this reply (and, knowing no better, on the socket)
                    if fault.kind == "close":
                        await websocket.close(code=int(fault.value))
                        return
                    if fault.kind == "binary":
                        await websocket.send_bytes(bytes(fault.value))
                    elif fault.kind == "text":
                        await websocket.send_text(str(fault.value))
                    elif fault.kind == "error":
                        await websocket.send_text(_text({"type": "error", "data": fault.value}))
                    elif fault.kind in ("replace", "drop"):
                        await websocket.send_text(_text(damage(json.loads(reply), fault)))
                    else:
                        await websocket.send_text(reply)
                        if fault.kind == "twice":
                            await websocket.send_text(reply)
            except Exception:  # the client went away (or upstream did): this session is over
                pass
            finally:
                await upstream.close()

        return Starlette(routes=[Route("/schema", document), Route("/metadata", document), Route("/health", document),
                                 WebSocketRoute("/ws", session)])


RESET_REFUSALS = (ConnectionError, TimeoutError, ValueError)
"""What ``reset`` may raise against a misbehaving server: the session could not be had (a
:class:`~rubricgym.openenv.client.ProtocolError` is a ConnectionError), or the server refused the
reset (a ValueError with the server's reason, as an in-process env refuses an unknown task id).
Anything else is a client bug."""


def play_against(server: MisbehavingServer, url: str, faults: list[Fault], schema_fault: Fault | None = None,
                 episodes: int = 2, message_timeout_s: float = 0.5, action: Any = "alpha beta") -> tuple[list[str], list[str]]:
    """Episodes of ``OpenEnv-v0`` at ``url`` (``server``'s proxy) with ``faults`` scripted: (problems, slow
    calls). A problem is what the client must never do: raise from ``step`` or ``close``, raise
    from ``reset`` or construction anything but a clear refusal, hand the agent an observation out of
    its space, a reward that is not a finite float, or a non-bool flag. A call past its deadlines
    (one per message, the replay's included, plus 5 s) is slow: counted apart, as it depends on load."""
    import math
    import time

    import gymnasium as gym

    server.script(faults, schema_fault)
    problems: list[str] = []
    slow: list[str] = []
    try:
        env = gym.make("OpenEnv-v0", url=url, message_timeout_s=message_timeout_s, connect_timeout_s=5.0, max_turns=4,
                       disable_env_checker=True)
    except (ConnectionError, ValueError):  # a damaged schema: refused, clearly
        return problems, slow
    except Exception as error:
        return [f"construction raised {type(error).__name__}: {str(error)[:200]}"], slow
    try:
        for _ in range(episodes):
            started = time.monotonic()
            try:
                observation, info = env.reset(seed=0)
            except RESET_REFUSALS:
                continue
            except Exception as error:
                problems.append(f"reset raised {type(error).__name__}: {str(error)[:200]}")
                continue
            if time.monotonic() - started > 2 * message_timeout_s + 5:
                slow.append("reset")
            if not env.observation_space.contains(observation) or not isinstance(info, dict):
                problems.append(f"reset gave an observation out of the space: {str(observation)[:200]}")
            for turn in range(1, 5):
                started = time.monotonic()
                try:
                    observation, reward, terminated, truncated, info = env.step(action)
                except Exception as error:
                    problems.append(f"step raised {type(error).__name__}: {str(error)[:200]}")
                    break
                if time.monotonic() - started > (turn + 2) * message_timeout_s + 5:
                    slow.append("step")
                if not env.observation_space.contains(observation):
                    problems.append(f"step gave an observation out of the space: {str(observation)[:200]}")
                if not (type(reward) is float and math.isfinite(reward)):
                    problems.append(f"step gave a reward of {reward!r}")
                if not (isinstance(terminated, bool) and isinstance(truncated, bool) and isinstance(info, dict)):
                    problems.append(f"step gave flags {terminated!r}, {truncated!r}")
                if terminated or truncated:
                    break
    finally:
        try:
            env.close()
        except Exception as error:
            problems.append(f"close raised {type(error).__name__}: {str(error)[:200]}")
    return problems, slow
