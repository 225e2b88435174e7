"""Served sessions one client cannot starve (#53): typed protocol errors that leave the session
usable, the cap and the idle reaper (which closes the socket it reaps), per-client limits, the
shared token, size limits, env work off the event loop, and the grader's pool of checkers. Real
servers on loopback, driven by a WebSocket client written from the protocol."""

from __future__ import annotations

import contextlib
import json
import math
import threading

import gymnasium as gym
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import require

require("openenv", "openenv")

import websockets.sync.client as ws_client  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

import rubricgym  # noqa: E402,F401
from rubricgym.envs.wordsort import WordSortEnv  # noqa: E402
from rubricgym.openenv.server import make_app, serve_in_thread  # noqa: E402
from rubricgym.openenv.sessions import ERROR_CODES, ServeLimits  # noqa: E402
from rubricgym.testing.contract import play, registered  # noqa: E402
from rubricgym.testing.hostile import frame_bytes, protocol_frame, protocol_messages  # noqa: E402

#: generous: a reply that does not come is a failure, however loaded the machine
WAIT_S = 60


def ws_url(url: str, token: str | None = None) -> str:
    return url.replace("http://", "ws://") + "/ws" + (f"?token={token}" if token else "")


def ask(socket, message) -> dict:
    socket.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
    return json.loads(socket.recv(timeout=WAIT_S))


def closed_with(socket) -> tuple[dict | None, int]:
    """The error the server sent before closing (if any) and its close code."""
    error = None
    try:
        while True:
            error = json.loads(socket.recv(timeout=WAIT_S))
    except ConnectionClosed as closed:
        return error, closed.rcvd.code if closed.rcvd else None


def test_every_malformed_message_gets_a_typed_error_and_the_session_goes_on():
    local = gym.make("WordSort-v0")
    with serve_in_thread(make_app("WordSort-v0")) as url, ws_client.connect(ws_url(url), open_timeout=WAIT_S,
                                                                            max_size=None) as socket:
        hostile = {"[]": "INVALID_MESSAGE", "null": "INVALID_MESSAGE", "42": "INVALID_MESSAGE", '"reset"': "INVALID_MESSAGE",
                   "{not json": "INVALID_JSON", "[" * 100_000: "INVALID_JSON",
                   '{"type": "reset", "data": {"seed": ' + "9" * 5_000 + "}}": "INVALID_JSON",
                   json.dumps({"kind": "reset"}): "INVALID_MESSAGE", json.dumps({"type": "fly"}): "UNKNOWN_TYPE",
                   json.dumps({"type": "step", "data": {"content": "zebra"}}): "RESET_NEEDED",
                   json.dumps({"type": "reset", "data": 5}): "VALIDATION_ERROR",
                   json.dumps({"type": "reset", "data": {"seed": "x"}}): "EXECUTION_ERROR"}
        for raw, code in hostile.items():
            reply = ask(socket, raw)
            assert reply["type"] == "error" and reply["data"]["code"] == code, (raw[:40], reply)
            assert code in ERROR_CODES and "has no attribute" not in reply["data"]["message"]
        assert ask(socket, b'{"type": "state"}')["data"]["code"] == "INVALID_MESSAGE"  # a binary frame
        observation = ask(socket, {"type": "reset", "data": {"seed": 7}})  # the same session still plays
        assert observation["type"] == "observation"
        invalid_action = ask(socket, {"type": "step", "data": {"content": 5}})
        assert invalid_action["data"]["code"] == "VALIDATION_ERROR" and "input" not in invalid_action["data"]["errors"][0]
        step = ask(socket, {"type": "step", "data": {"content": "zebra"}})
        local.reset(seed=7)
        assert step["data"]["reward"] == local.step("zebra")[1]


def test_a_message_over_the_limit_is_answered_then_closed_with_1009():
    limits = ServeLimits(max_message_bytes=64 * 1024, max_body_bytes=2**20)
    with serve_in_thread(make_app("WordSort-v0", limits=limits)) as url:
        with ws_client.connect(ws_url(url), open_timeout=WAIT_S, max_size=None) as socket:
            socket.send(json.dumps({"type": "step", "data": {"content": "x" * 100_000}}))
            error, code = closed_with(socket)
        assert error["data"]["code"] == "ACTION_TOO_LARGE" and code == 1009
        body = json.dumps({"seed": 1, "padding": "x" * 2_000_000})
        assert httpx.post(url + "/reset", content=body, timeout=WAIT_S).status_code == 413
        chunks = (b"x" * 65_536 for _ in range(64))  # no content-length: counted as it arrives
        assert httpx.post(url + "/reset", content=chunks, timeout=WAIT_S).status_code == 413
        assert httpx.post(url + "/reset", json={"seed": 1}, timeout=WAIT_S).status_code == 200


def test_the_cap_holds_and_an_idle_session_is_closed_with_its_reason():
    app = make_app("WordSort-v0", limits=ServeLimits(max_sessions=2, idle_timeout_s=1.0))
    sessions = app.state.sessions
    with serve_in_thread(app) as url, contextlib.ExitStack() as sockets:
        # the silent one holds no env: it never reset
        silent, first, second, third = (sockets.enter_context(ws_client.connect(ws_url(url), open_timeout=WAIT_S))
                                        for _ in range(4))
        for socket in (first, second):
            assert ask(socket, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        assert sessions.live_envs == 2
        third.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        error, code = closed_with(third)
        assert error["data"]["code"] == "CAPACITY_REACHED" and code == 1013 and sessions.live_envs == 2
        # the frozen clients send nothing more: each is told why and closed, and its env released
        for socket in (first, second, silent):
            error, code = closed_with(socket)
            assert error["data"]["code"] == "SESSION_EXPIRED" and code == 1001
        assert sessions.live_envs == 0 and not sessions.connections
        with ws_client.connect(ws_url(url), open_timeout=WAIT_S) as socket:  # the slots are free again
            assert ask(socket, {"type": "reset", "data": {"seed": 2}})["type"] == "observation"


def test_per_client_limits_on_connections_and_new_sessions():
    with serve_in_thread(make_app("WordSort-v0", limits=ServeLimits(max_sessions=8, max_sessions_per_client=2))) as url:
        with ws_client.connect(ws_url(url), open_timeout=WAIT_S), ws_client.connect(ws_url(url), open_timeout=WAIT_S):
            with ws_client.connect(ws_url(url), open_timeout=WAIT_S) as third:
                error, code = closed_with(third)
        assert error["data"]["code"] == "CLIENT_LIMIT" and code == 1013
    with serve_in_thread(make_app("WordSort-v0", limits=ServeLimits(sessions_per_minute_per_client=2))) as url:
        for _ in range(2):
            with ws_client.connect(ws_url(url), open_timeout=WAIT_S) as socket:
                assert ask(socket, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        with ws_client.connect(ws_url(url), open_timeout=WAIT_S) as socket:
            socket.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            error, code = closed_with(socket)
        assert error["data"]["code"] == "RATE_LIMITED" and code == 1013


def test_a_token_guards_every_route_but_health(monkeypatch):
    local = gym.make("WordSort-v0")
    with serve_in_thread(make_app("WordSort-v0", limits=ServeLimits(token="s3cret"))) as url:
        assert httpx.get(url + "/health", timeout=WAIT_S).status_code == 200
        refused = httpx.get(url + "/metadata", timeout=WAIT_S)
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "UNAUTHORIZED"
        assert httpx.get(url + "/metadata", headers={"Authorization": "Bearer wrong"}, timeout=WAIT_S).status_code == 401
        assert httpx.get(url + "/metadata", headers={"Authorization": "Bearer s3cret"}, timeout=WAIT_S).status_code == 200
        with pytest.raises(InvalidStatus):
            ws_client.connect(ws_url(url), open_timeout=WAIT_S)
        with ws_client.connect(ws_url(url, token="s3cret"), open_timeout=WAIT_S) as socket:
            assert ask(socket, {"type": "reset", "data": {"seed": 3}})["type"] == "observation"
        served = gym.make("OpenEnv-v0", url=url, token="s3cret")
        assert play(served, 3, ["zebra"]) == play(local, 3, ["zebra"])
        served.close()
        monkeypatch.setenv("RUBRICGYM_SERVE_TOKEN", "s3cret")  # what the client reads when no token is given
        served = gym.make("OpenEnv-v0", url=url)
        assert play(served, 4, ["zebra"]) == play(local, 4, ["zebra"])
        served.close()


#: released by the test: until then, every BlockingSort step waits (in its session's thread, or, if
#: env work ran on the event loop, the whole server)
RELEASE = threading.Event()


class BlockingSort(WordSortEnv):
    def score(self, final):
        assert RELEASE.wait(timeout=300), "the test never released the step"
        return super().score(final)


def test_env_work_runs_off_the_event_loop():
    RELEASE.clear()
    with registered("BlockingSort", BlockingSort) as ids:
        constructed = []
        app = make_app(ids[0])
        original = app.state.sessions.env_factory
        app.state.sessions.env_factory = lambda: constructed.append(1) or original()
        with serve_in_thread(app) as url:
            stuck = ws_client.connect(ws_url(url), open_timeout=WAIT_S).__enter__()
            ask(stuck, {"type": "reset", "data": {"seed": 1}})
            stuck.send(json.dumps({"type": "step", "data": {"content": "zebra"}}))  # waits for RELEASE
            for _ in range(20):  # /metadata and /state build no env
                assert httpx.get(url + "/metadata", timeout=WAIT_S).json()["name"] == ids[0]
                assert httpx.get(url + "/state", timeout=WAIT_S).status_code == 200
            assert len(constructed) == 1
            with ws_client.connect(ws_url(url), open_timeout=WAIT_S) as other:  # another session is served meanwhile
                assert ask(other, {"type": "reset", "data": {"seed": 2}})["type"] == "observation"
            assert httpx.post(url + "/reset", json={"seed": 2}, timeout=WAIT_S).status_code == 200
            RELEASE.set()
            assert json.loads(stuck.recv(timeout=WAIT_S))["type"] == "observation"
            stuck.close()


def test_limits_are_checked_when_made():
    for knobs, named in [({"max_sessions": 0}, "max_sessions"), ({"idle_timeout_s": -1}, "idle_timeout_s"),
                         ({"max_sessions": 4, "max_sessions_per_client": 5}, "max_sessions_per_client"),
                         ({"max_message_bytes": "big"}, "max_message_bytes"), ({"token": 5}, "token")]:
        with pytest.raises(ValueError, match=named):
            ServeLimits(**knobs)


def test_one_slow_check_does_not_hold_up_another(tmp_path):
    import os

    from rubricgym.timeouts import WorkerPool

    pool, gate = WorkerPool(size=2), tmp_path / "gate"
    os.mkfifo(gate)  # opening it to read blocks, in the worker, until the test opens it to write
    slow_result = []
    slow = threading.Thread(target=lambda: slow_result.append(pool.call(os.open, (str(gate), os.O_RDONLY), timeout=300)))
    slow.start()
    try:
        assert pool.call(pow, (2, 10), timeout=WAIT_S) == 1024  # answered while the other check still runs
        assert slow.is_alive() and pool.busy == 1
    finally:
        writer = os.open(gate, os.O_WRONLY)
        slow.join(timeout=WAIT_S)
        os.close(writer)
        pool.close()
    assert len(slow_result) == 1 and isinstance(slow_result[0], int)


@pytest.mark.slow
def test_serve_with_two_worker_processes_keeps_the_cap_and_plays_as_in_process():
    import sys

    from rubricgym.testing.loopback import free_port, server_process

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    local = gym.make("WordSort-v0")
    with server_process([sys.executable, "-m", "rubricgym", "serve", "WordSort-v0", "--port", str(port), "--workers", "2",
                         "--max-sessions", "4"], url + "/health"), contextlib.ExitStack() as sockets:
        served = gym.make("OpenEnv-v0", url=url)
        assert play(served, 5, ["zebra"]) == play(local, 5, ["zebra"])
        served.close()
        granted = 0
        for _ in range(8):  # each process holds 2: however the kernel spreads connections, never more than 4
            socket = sockets.enter_context(ws_client.connect(ws_url(url), open_timeout=WAIT_S))
            socket.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            try:
                granted += json.loads(socket.recv(timeout=WAIT_S))["type"] == "observation"
            except ConnectionClosed:
                pass
        assert 2 <= granted <= 4


@pytest.fixture(scope="module")
def served_wordsort():
    with serve_in_thread(make_app("WordSort-v0")) as url:
        yield url


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(protocol_messages(), min_size=1, max_size=6))
def test_any_message_sequence_gets_typed_answers_and_the_session_stays_usable(served_wordsort, messages):
    with ws_client.connect(ws_url(served_wordsort), open_timeout=WAIT_S) as socket:
        for message in messages:
            if isinstance(message, dict) and message.get("type") == "close":
                continue  # a close ends the session by design
            frame = protocol_frame(message)
            if frame is None or frame_bytes(frame) > ServeLimits().max_message_bytes:
                continue  # over the limit, a message ends the connection (its own test above)
            reply = ask(socket, frame)
            assert reply["type"] in ("observation", "state", "error"), reply
            if reply["type"] == "error":
                assert reply["data"]["code"] in ERROR_CODES, reply
            elif reply["type"] == "observation":
                assert math.isfinite(reply["data"]["reward"] if reply["data"]["reward"] is not None else 0.0)
        assert ask(socket, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        assert ask(socket, {"type": "step", "data": {"content": "zebra"}})["type"] == "observation"
