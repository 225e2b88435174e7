"""Reliability, round three: one test per finding of the outside fuzzer (issue #29). Each failed on
082cdb4: huge JSON integers, Python objects in dict-form arguments, tool-call floods, a cubic
regex, k slow python calls, lone surrogates through AsyncVectorEnv, scorers that raise, the
sandbox's memory and kernel surface, absurd token counts, uncancellable calls, malformed and
dripping rollout servers, torn groups.jsonl rows and malformed view input."""

import asyncio
import json
import socket
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

import rubricgym
from rubricgym.spaces import ChatSpace

BASE_IDS = sorted(i for i in rubricgym.ENVS if rubricgym.ENVS[i].base is None)
HUGE = "9" * 5000


@pytest.fixture(scope="module")
def served_math():
    """Math-v0 with the calculator over OpenEnv: what `OpenEnv-v0` (the family that plays a server) plays here."""
    from rubricgym.openenv.server import make_app, serve_in_thread

    with serve_in_thread(make_app("Math-v0", tools=["calculator"])) as url:
        yield url


def _env(env_id, **kwargs):
    if env_id == "Math-v0":
        kwargs.setdefault("tools", ["calculator"])
    env = gym.make(env_id, disable_env_checker=True, **kwargs)
    env.reset(seed=0)
    return env


def _step_ok(env, action):
    """Step and check what every hostile action must give: no exception, an observation in the space."""
    obs, reward, terminated, truncated, info = env.step(action)
    assert ChatSpace().contains(obs) and np.isfinite(reward)
    return obs, info


# -- actions --------------------------------------------------------------------------------------

@pytest.mark.parametrize("env_id", BASE_IDS)
def test_a_json_integer_past_4300_digits_is_an_error_observation(env_id, request):
    env = _env(env_id, **({"url": request.getfixturevalue("served_math")} if env_id == "OpenEnv-v0" else {}))
    tool = "calculator" if env_id in ("Math-v0", "OpenEnv-v0") else "get_order"
    obs, info = _step_ok(env, f'<tool_call>{{"name": "{tool}", "arguments": {{"expression": {HUGE}}}}}</tool_call>')
    if env.unwrapped.execute_tools and env.unwrapped.tools:
        assert "more digits than can be read" in info.get("error", "")
    env.reset(seed=0)
    _step_ok(env, {"role": "assistant", "content": None,
                   "tool_calls": [{"function": {"name": tool, "arguments": '{"order_id": ' + HUGE + "}"}}]})


@pytest.mark.parametrize("value, named", [
    (b"bytes", "arguments.expression is a bytes"), ({1, 2}, "is a set"), (1j, "is a complex"),
    (object(), "is a object"), (10**5000, "integer too large"), (np.array(["a"]), "is a ndarray"),
], ids=["bytes", "set", "complex", "object", "huge-int", "str-array"])
@pytest.mark.parametrize("env_id", ["Math-v0", "ToolUse-v0"])
def test_python_objects_json_cannot_hold_are_an_error_naming_the_argument(env_id, value, named):
    env = _env(env_id)
    tool = "calculator" if env_id == "Math-v0" else "get_order"
    _, info = _step_ok(env, {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": tool, "arguments": {"expression": value}}}]})
    assert named in info["error"]


def test_numpy_arguments_are_converted_and_non_string_keys_refused():
    env = _env("Math-v0")
    obs, info = _step_ok(env, {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "calculator", "arguments": {"expression": np.str_("6*7")}}}]})
    assert obs[-1]["content"] == "42"
    from rubricgym.tools import parse_action

    parsed = parse_action({"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "f", "arguments": {"n": np.int64(3), "xs": np.arange(2), "t": (np.float32(0.5),)}}}]})
    assert parsed.tool_calls[0].arguments == {"n": 3, "xs": [0, 1], "t": [0.5]}
    assert type(parsed.tool_calls[0].arguments["n"]) is int
    json.dumps(parsed.assistant_message())  # what the trainers and judges serialise
    for key in (1, (1, 2), None):
        parsed = parse_action({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {key: 1}}}]})
        assert not parsed.tool_calls and "has a key of type" in parsed.errors[0]


def test_a_dict_with_an_int_key_does_not_crash_the_group_env():
    envs = gym.make_vec("MathRuler-v0", num_envs=2, group_size=2, judge=_scripted_judge(), tools=["calculator"])
    envs.reset(seed=0)
    action = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "calculator", "arguments": {1: "x"}}}]}
    _, rewards, *_ = envs.step([action, "\\boxed{1}"])
    assert np.isfinite(rewards).all()
    envs.close()


def test_a_401_digit_integer_in_a_function_call_is_compared_not_overflowed():
    env = _env("FunctionCall-v0", dataset="simple_python")
    from rubricgym.envs.tools.bfcl import values_equal

    assert values_equal(10**400, 10**400) and not values_equal(10**400, 1.5) and not values_equal(10**400, 1e308)
    task = env.unwrapped.task
    name = task["function"][0]["name"] if isinstance(task, dict) and "function" in task else "f"
    _step_ok(env, f'<tool_call>{{"name": "{name}", "arguments": {{"x": {"9" * 401}}}}}</tool_call>')


def test_ten_thousand_tool_calls_stay_inside_the_observation_space():
    from rubricgym.tools import MAX_TOOL_CALLS

    env = _env("Math-v0")
    calls = [{"function": {"name": "calculator", "arguments": {"expression": "1"}}}] * 10_001
    obs, info = _step_ok(env, {"role": "assistant", "content": "", "tool_calls": calls})
    assert len(obs) <= 4 + MAX_TOOL_CALLS + 1 and "10,001 tool calls" in info["error"]
    env.reset(seed=0)
    obs, _ = _step_ok(env, '<tool_call>{"name": "calculator", "arguments": {"expression": "1"}}</tool_call>' * 2500)
    assert len(obs) <= 4 + MAX_TOOL_CALLS + 1
    # many turns of floods end the episode before the conversation outgrows the space
    env = _env("Math-v0", max_turns=1000)
    for _ in range(1000):
        obs, reward, terminated, truncated, info = env.step({"role": "assistant", "content": "", "tool_calls": calls})
        assert ChatSpace().contains(obs)
        if terminated or truncated:
            break
    assert truncated and "messages" in info["error"]


def test_nested_latex_is_graded_in_linear_time():
    """``\\boxed{\\text{`` + 6,400 spaces took 64 s (177 s on a loaded machine) in a backtracking regex."""
    env = _env("Math-v0")
    started = time.perf_counter()
    _step_ok(env, "\\boxed{\\text{" + " " * 6400 + "{}}}")
    assert time.perf_counter() - started < 30  # a hang detector, not a speed target: it takes milliseconds


def test_k_python_calls_share_the_steps_tool_budget(bwrap):
    env = _env("Math-v0", tools=["python"])
    env.unwrapped.max_tool_seconds = 3.0
    loop = {"function": {"name": "python", "arguments": {"code": "while True: pass"}}}
    obs, _ = _step_ok(env, {"role": "assistant", "content": "", "tool_calls": [loop] * 6})
    results = [m["content"] for m in obs if m["role"] == "tool"]
    assert len(results) == 6 and all(r.startswith("Error") for r in results)
    assert sum("used their" in r or "used their time" in r for r in results) >= 4  # not 6 x 5 s


def test_a_lone_surrogate_is_refused_and_crosses_async_vector_env_shared_memory_as_an_error():
    # refused before it is applied (round four): the transcript keeps U+FFFD in its place, so every
    # process boundary, record and served reply can hold it
    envs = gym.make_vec("WordSort-v0", num_envs=2, vectorization_mode="async")
    try:
        envs.reset(seed=0)
        observations, rewards, _, _, infos = envs.step(["\ud800", "\udfff \\boxed{1}"])
        assert any("\ufffd" in (m["content"] or "") for m in observations[0])
        assert not any("\ud800" in (m["content"] or "") for m in observations[0])
        assert all("lone surrogate" in error for error in infos["error"])
        assert np.isfinite(rewards).all()
    finally:
        envs.close()


# -- judges -----------------------------------------------------------------------------------------

def _scripted_judge(reply=None):
    from rubricgym.llm import LLM, LLMConfig
    from rubricgym.testing.hostile import FaultyJudge

    return LLM(FaultyJudge(modes=(reply or "ok",)), LLMConfig(cache_dir=None, max_retries=0, timeout_s=5))


@pytest.mark.filterwarnings("ignore:RULER judge failed:UserWarning")  # the faulty judge's fallback is what is tested; its warning is test_ruler's
def test_absurd_numbers_in_judge_verifier_and_rubric_replies_fail_their_group():
    from rubricgym.judges.rlcer import parse_rubric
    from rubricgym.llm import extract_json
    from rubricgym.llm.jsonutil import JSONExtractionError

    with pytest.raises(JSONExtractionError, match="cannot be read"):
        extract_json('{"scores": [{"trajectory_id": "t1", "score": ' + HUGE + "}]}")
    rubric, problem = parse_rubric('{"items": [{"description": "checks", "score": ' + HUGE + "}]}")
    assert rubric is None and problem
    for env_id in ("MathRuler-v0", "MathRubric-v0"):
        knob = rubricgym.registration.scheme_of(env_id).judge_knob
        envs = gym.make_vec(env_id, num_envs=2, group_size=2, **{knob: _scripted_judge("huge_int")})
        envs.reset(seed=0)
        for _ in range(6):
            _, rewards, terminated, truncated, info = envs.step(["\\boxed{1}", "\\boxed{2}"])
            assert np.isfinite(rewards).all()
            done = np.asarray(info.get("group_done", np.zeros(2, bool))) & np.asarray(info.get("_group_done", np.zeros(2, bool)))
            if done.any():
                assert all(info["trajectory"][i].episode is not None for i in np.flatnonzero(done))
                if env_id == "MathRuler-v0":
                    assert info["group_failed"][done].all()
                break
        envs.close()


def test_a_scorer_that_raises_anything_is_a_failed_judgement_not_a_lost_group():
    from rubricgym.judges.base import GroupScore
    from wrappers.episode import GroupReward

    class Raises:
        name, relative = "broken", True

        async def score_group(self, task_id, members):
            raise OverflowError("int too large to convert to float")

    class Short:
        name, relative = "short", True

        async def score_group(self, task_id, members):
            return GroupScore([])

    for scorer in (Raises(), Short()):
        envs = GroupReward(gym.make_vec("Math-v0", num_envs=2, group_size=2), scorer)
        envs.reset(seed=0)
        _, rewards, terminated, _, info = envs.step(["\\boxed{1}", "\\boxed{2}"])
        assert terminated.all() and info["group_failed"].all() and np.isfinite(rewards).all()
        assert all(t.episode is not None for t in info["trajectory"])
        envs.close()


# -- the sandbox ------------------------------------------------------------------------------------

def _mem_available():
    with open("/proc/meminfo") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("MemAvailable"))


def test_filling_the_sandboxes_file_systems_leaves_host_memory_alone(bwrap):
    """1 GiB written at /, /work, /dev/shm, /dev and /tmp: 2,500 MiB landed in host memory before."""
    from rubricgym.sandbox import run_python
    from rubricgym.testing.hostile import DISARM

    code = DISARM + (
        "import os, time\nwritten = 0\nfor folder in ('/', '/work', '/dev/shm', '/dev', '/tmp'):\n"
        "    for i in range(256):\n        try:\n            with open(f'{folder}/f{i}', 'wb') as f:\n"
        "                f.write(b'x' * (2**20 - 1))\n            written += 2**20\n        except OSError:\n"
        "            break\nprint('WRITTEN', written >> 20, flush=True)\ntime.sleep(2.5)\n")
    lowest, before, done = [], _mem_available(), threading.Event()

    def watch():
        while not done.is_set():
            lowest.append(_mem_available())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        output, _, _ = run_python(code)
    finally:
        done.set()
        watcher.join()
    written = int(output.split("WRITTEN")[1].split()[0])
    assert written <= 32  # the 16 MiB scratch (shared by /work and /dev/shm), nothing else
    assert before - min(lowest) < 300 * 2**20


def test_the_seccomp_filter_refuses_namespaces_io_uring_bpf_ptrace_and_keys(bwrap):
    from rubricgym.sandbox import run_python
    from rubricgym.testing.hostile import ESCAPES, try_escapes

    kernel = [e for e in ESCAPES if "disarmed" in e[0] and any(
        word in e[0] for word in ("unshare", "clone", "io_uring", "bpf", "ptrace", "keyctl", "add_key", "setns", "fsopen",
                                  "inodes", "fill"))]
    assert len(kernel) >= 15
    assert try_escapes(lambda code: run_python(code)[0], kernel) == []
    # and the refusal is the filter's: the same call is allowed outside the filter (a control)
    output, _, _ = run_python("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                              "print('unshare', libc.unshare(0x10000000), os.strerror(ctypes.get_errno()))".replace(
                                  "import ctypes", "_denied = (); _cwd = '/'; _ro = ('/',)\nimport ctypes"))
    assert "unshare -1 Operation not permitted" in output


def test_the_filter_program_is_well_formed_for_both_machines():
    import struct

    from rubricgym.sandbox import _SECCOMP_REFUSED, seccomp_filter

    for machine in ("x86_64", "aarch64"):
        program = seccomp_filter(machine)
        instructions = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
        assert len(instructions) < 4096 and instructions[-4:][0] == (0x06, 0, 0, 0x7FFF0000)
        for pc, (code, jt, jf, _) in enumerate(instructions):  # every jump lands inside the program
            assert code == 0x06 or pc + 1 + max(jt, jf) < len(instructions)
        assert sum(code == 0x15 for code, *_ in instructions) >= len(_SECCOMP_REFUSED)
    with pytest.raises(ValueError, match="no seccomp filter"):
        seccomp_filter("mips")


# -- the LLM client ---------------------------------------------------------------------------------

def test_a_provider_reporting_a_trillion_tokens_does_not_stall_the_next_call():
    from rubricgym.llm import LLM, Completion, LLMConfig

    class Liar:
        name = "liar"

        async def complete(self, messages, response_format, timeout_s, **params):
            return Completion(text="ok", prompt_tokens=10**12, completion_tokens=-5, model="liar")

    llm = LLM(Liar(), LLMConfig(cache_dir=None, tokens_per_minute=600_000, max_tokens=64))

    async def two_calls():
        await llm.complete([{"role": "user", "content": "a"}])
        await asyncio.wait_for(llm.complete([{"role": "user", "content": "b"}]), 30)

    asyncio.run(two_calls())  # stalled for ever before (a 10^12-token debt)
    assert llm.usage.prompt_tokens <= 2 * 4 * 65 and llm.usage.completion_tokens == 0


def test_a_cancelled_call_is_cancelled_not_retried():
    from rubricgym.llm import LLM, LLMConfig

    class Slow:
        name, calls = "slow", 0

        async def complete(self, messages, response_format, timeout_s, **params):
            Slow.calls += 1
            await asyncio.sleep(60)

    llm = LLM(Slow(), LLMConfig(cache_dir=None, timeout_s=30, max_retries=3))

    async def cancel():
        task = asyncio.create_task(llm.complete([{"role": "user", "content": "hi"}]))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 20)

    asyncio.run(cancel())
    assert Slow.calls == 1 and llm.usage.failures == 0


# -- the rollout-server client ----------------------------------------------------------------------

def _generator(url, **kw):
    from rubricgym.agents.generation import ServerConfig, ServerGenerator

    return ServerGenerator(ServerConfig(url=url, model="m", backoff_s=0.01, **{"max_retries": 1, "timeout_s": 10, **kw}))


@pytest.mark.parametrize("body, field", [
    ({"choices": "a string"}, "'choices' is a str"), ({"choices": {"0": {}}}, "'choices' is a dict"),
    ({"choices": [{"token_ids": ["5"], "text": ""}]}, "token_ids[0] is '5', not an integer"),
    ({"choices": [{"token_ids": [5], "logprobs": {"token_logprobs": ["-0.1"]}}]}, "token_logprobs[0] is '-0.1'"),
    ({"choices": [{"token_ids": [10**12]}]}, "outside the vocabulary"),
    ({"choices": [{"token_ids": [-5]}]}, "token_ids[0] is -5, outside the vocabulary"),
    ({"choices": ["x"]}, "choices[0] is a str"), ({"choices": []}, "0 choices for 1 prompts"),
])
def test_malformed_rollout_replies_are_a_rollout_server_error_naming_the_field(body, field):
    from rubricgym.agents.generation import RolloutServerError, check_completions
    from rubricgym.testing.loopback import LoopbackServer

    assert field in check_completions(body, 1, 49152, True)
    with LoopbackServer(completions=lambda request: body) as server:
        with pytest.raises(RolloutServerError, match="malformed reply") as raised:
            _generator(server.base)._call("POST", "/completions", {"prompt": [[1]]},
                                          lambda reply: check_completions(reply, 1, 49152, True))
        assert field in str(raised.value)
        assert server.paths().count("/v1/completions") == 2  # retried like the others


def test_a_json_list_body_is_a_rollout_server_error():
    from rubricgym.agents.generation import RolloutServerError

    server = _raw_server(lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                                   b"Content-Length: 6\r\nConnection: close\r\n\r\n[1, 2]"))
    with pytest.raises(RolloutServerError, match="not a JSON object"):
        _generator(server)._call("GET", "/models")


def _raw_server(handle):
    """A TCP server on loopback that reads a request and runs ``handle(connection)``; returns its /v1 URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            def one(conn=conn):
                try:
                    conn.recv(65536)
                    handle(conn)
                except OSError:
                    pass
            threading.Thread(target=one, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


def _drip(conn):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(400):
        conn.sendall(b" ")
        time.sleep(0.5)


def _drip_headers(conn):
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 400:
        conn.sendall(bytes([byte]))
        time.sleep(0.5)


@pytest.mark.parametrize("handle", [_drip, _drip_headers, lambda conn: time.sleep(200)], ids=["drip", "drip-headers", "endless"])
def test_a_dripping_or_endless_rollout_server_is_cut_at_the_deadline(handle):
    from rubricgym.agents.generation import RolloutServerError

    url = _raw_server(handle)
    started = time.perf_counter()
    with pytest.raises(RolloutServerError, match="no whole reply within 3 s"):
        _generator(url, timeout_s=3, max_retries=0)._call("GET", "/models")
    assert time.perf_counter() - started < 20  # 45 s and more before; the deadline is 3 s


# -- logs, view -------------------------------------------------------------------------------------

def test_resume_drops_a_torn_last_groups_row_with_a_warning(tmp_path):
    from rubricgym.agents.logs import GroupLog

    rows = [json.dumps({"kind": "group", "step": s, "trajectories": []}) for s in (0, 1, 2)]
    (tmp_path / "groups.jsonl").write_text("\n".join(rows) + "\n" + rows[2][:17])  # killed during the write
    with pytest.warns(UserWarning, match="dropped 1 unreadable row.*line 4"):
        GroupLog(tmp_path).restore(2)
    assert [json.loads(line)["step"] for line in (tmp_path / "groups.jsonl").read_text().splitlines()] == [0, 1]


@pytest.mark.parametrize("row, problem", [
    ({"kind": "group", "step": 0, "group_info": {}, "trajectories": 5}, "line 2"),
    ({"kind": "group", "step": 0, "group_info": {}, "trajectories": [{"messages": 5}]}, "line 2"),
    ({"kind": "group", "step": "x", "group_info": {}, "trajectories": []}, "'step' must be a number"),
    ({"kind": "group", "step": 0, "group_info": {}, "trajectories": [{"reward": "high", "messages": []}]}, "line 2"),
    ({"kind": "group", "step": 0, "trajectories": []}, "group_info"),
])
def test_view_names_the_row_it_cannot_show(tmp_path, row, problem):
    from rubricgym.app.view import render

    good = {"kind": "group", "step": 0, "task_id": "t", "source": "train", "group_info": {}, "trajectories": []}
    path = tmp_path / "groups.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(SystemExit, match="groups.jsonl:2: this group row cannot be shown") as raised:
        render(path)
    assert problem in str(raised.value) or problem == "line 2"
    path.write_text(json.dumps(good) + "\n[1, 2]\n")
    with pytest.raises(SystemExit, match="groups.jsonl:2: a row must be a JSON object"):
        render(path)


# -- the fuzzer -------------------------------------------------------------------------------------

def test_the_fuzzer_draws_the_classes_it_missed():
    import random

    from rubricgym.testing.hostile import ESCAPES, FaultyJudge, hostile_action

    rng = random.Random(0)
    texts, dicts = [], []
    for _ in range(400):  # seed 0 draws every class below by draw 135 (3000 draws took 100 s for nothing more)
        action = hostile_action(rng)
        (dicts if isinstance(action, dict) else texts).append(action)
    flat = [a for a in texts if isinstance(a, str)]
    assert any("9" * 4301 in a for a in flat)  # huge JSON integers
    assert any(a.count("<tool_call>") >= 2500 for a in flat)  # floods
    assert any("\\text{" + " " * 6400 in a for a in flat)  # nested LaTeX
    assert any('"score": 9999' in a for a in flat)  # a rubric with absurd numbers
    calls = [c for d in dicts for c in (d.get("tool_calls") if isinstance(d.get("tool_calls"), list) else [])]
    assert any(len(d.get("tool_calls") or []) == 10_001 for d in dicts if isinstance(d.get("tool_calls"), list))
    arguments = [c["function"]["arguments"] for c in calls if isinstance(c["function"]["arguments"], dict)]
    assert any(type(v).__module__ == "numpy" for a in arguments for v in a.values())
    assert any(isinstance(k, (int, tuple)) and not isinstance(k, bool) for a in arguments for k in a)
    assert "huge_int" in FaultyJudge.MODES and len(ESCAPES) >= 80
