"""Fuzz every registered env id with a hostile agent and a hostile judge, and try to get out of
the python tool's sandbox. Counts crashes (any exception out of reset / step), slow steps (over
5 s beyond the env's tool budget, ``ChatEnv.max_tool_seconds``, for ids with tools), lost
trajectories (a finished episode without its episode result, or a judged group that returned
fewer trajectories than it was given), observations outside the observation space, judge faults
injected, and sandbox escapes. Single envs, group vector envs of judged ids, and Gymnasium's
AsyncVectorEnv (observations through shared memory, where a lone surrogate once killed workers),
and raw protocol messages to a served env (Hypothesis strategies: any JSON-like value, known
message types with any data, hostile actions), each of which must get a typed answer. Around the
step (rubricgym.testing.configs, Hypothesis): every knob of every id and scheme at construction,
reset options, close / copy lifecycles and the group env's own arguments, each refused by name or
working; and the protocol the other way: ``OpenEnv-v0`` against a server that damages its replies
(rubricgym.testing.misbehaving), which must never raise from a step or hand the agent a
non-finite reward or an observation outside its space. Each problem a probe reports is a crash.

    python benchmarks/fuzz.py                 # 20,000+ actions over all ids, 98 escape attempts
    python benchmarks/fuzz.py --actions 300   # a quick look

Ends with ``RESULT actions=<n> crashes=0 slow_steps=0 lost_trajectories=0 invalid_observations=0
judge_faults=<n> config_probes=<p> misbehaving_scripts=<s> sandbox_escapes=0 of <k>``.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

import rubricgym  # noqa: E402
from rubricgym.testing.hostile import ESCAPES, FaultyJudge, FuzzReport, fuzz_env, hostile_action, try_escapes  # noqa: E402
from rubricgym.llm import LLM, LLMConfig  # noqa: E402
from rubricgym.registration import scheme_of  # noqa: E402
from rubricgym.sandbox import run_python  # noqa: E402
from rubricgym.openenv.server import make_app, serve_in_thread  # noqa: E402
from rubricgym.spaces import ChatSpace  # noqa: E402
from rubricgym.app.flags import add_smoke_flag  # noqa: E402


def without_order_enforcing(env: gym.Env) -> gym.Env:
    """Stepping before the first reset is part of the test; gym.make's OrderEnforcing would raise
    Gymnasium's documented ResetNeeded there instead of reaching the env."""
    return env.env if isinstance(env, gym.wrappers.OrderEnforcing) else env


#: the env that OpenEnv-v0 ids play, served over OpenEnv for the whole run (``url`` set in main)
SERVED: dict = {"env_id": "Math-v0", "url": None}


def faulty_judge(backend: FaultyJudge) -> LLM:
    return LLM(backend, LLMConfig(cache_dir=None, timeout_s=0.05, max_retries=1, backoff_initial_s=0.001, backoff_max_s=0.002))


def env_kwargs(env_id: str, backend: FaultyJudge) -> dict:
    scheme = scheme_of(env_id)
    kwargs: dict = {}
    if scheme is not None and scheme.judge_knob:
        kwargs = {scheme.judge_knob: faulty_judge(backend), **({"max_fixes": 1} if "max_fixes" in scheme.knobs else {})}
    base = rubricgym.ENVS[env_id].base or env_id
    if base == "OpenEnv-v0":  # the OpenEnv client plays the served env (see main)
        kwargs["url"] = SERVED["url"]
    if base == "FunctionCall-v0":
        kwargs["dataset"] = "simple_python"
    if base == "Math-v0":
        kwargs["tools"] = ["calculator", "python"]  # the hostile agent's python calls run in the real sandbox
    if base == "RagSupport-v0":
        kwargs["mode"] = "agentic"  # the search tool
    return kwargs


def slow_limit(env_id: str) -> float:
    """Seconds a step may take: 5, plus the tool time its calls may share where the env runs tools
    (for OpenEnv ids, the served env's limit and a second for the loopback round trip)."""
    if (rubricgym.ENVS[env_id].base or env_id) == "OpenEnv-v0":
        return slow_limit(SERVED["env_id"]) + 1.0
    env = gym.make(env_id, disable_env_checker=True, **env_kwargs(env_id, FaultyJudge()))
    base = env.unwrapped
    limit = 5.0 + (base.max_tool_seconds if base.tools and base.execute_tools else 0.0)
    env.close()
    return limit


def fuzz_async(env_id: str, rng: random.Random, steps: int, report: FuzzReport) -> None:
    """Hostile actions through Gymnasium's AsyncVectorEnv (observations cross shared memory)."""
    envs = gym.make_vec(env_id, num_envs=2, vectorization_mode="async", **env_kwargs(env_id, FaultyJudge()))
    try:
        envs.reset(seed=rng.randrange(10**6))
        for _ in range(steps):
            action = hostile_action(rng)
            try:  # AsyncVectorEnv sends actions to its workers with pickle: what pickle refuses never leaves
                pickle.dumps(action)  # the caller (Gymnasium's transport, not an env), so it is not drawn here
            except (RecursionError, pickle.PicklingError, TypeError):
                continue
            report.actions += 2
            try:
                observations, rewards, *_ = envs.step([action, rng.choice(("\ud800", "\udfff \\boxed{1}"))])
                if not all(ChatSpace().contains(list(o)) for o in observations) or not np.isfinite(rewards).all():
                    report.invalid_observations += 1
                    report.invalid.append(f"{env_id} (async): observation outside the space or reward {rewards}")
            except Exception as err:  # what this harness counts
                report.crashes.append(f"{env_id} (async): {type(err).__name__}: {str(err)[:200]}")
                break
    finally:
        envs.close(terminate=True)


def fuzz_groups(env_id: str, backend: FaultyJudge, rng: random.Random, steps: int, report: FuzzReport,
                slow_s: float = 5.0) -> None:
    """Hostile actions through the group vector env (where group judges write back)."""
    envs = gym.make_vec(env_id, num_envs=4, group_size=2, **env_kwargs(env_id, backend))
    envs.reset(seed=rng.randrange(10**6))
    for _ in range(steps):
        report.actions += 4
        start = time.perf_counter()
        try:
            _, rewards, terminated, truncated, info = envs.step([hostile_action(rng) for _ in range(4)])
            done = np.asarray(info.get("group_done", np.zeros(4, bool))) & np.asarray(info.get("_group_done", np.zeros(4, bool)))
            if done.any():
                report.episodes += int(done.sum())
                trajectories = [info["trajectory"][i] for i in np.flatnonzero(done)]
                report.lost_trajectories += sum(t is None or t.episode is None for t in trajectories)
                if not np.isfinite(rewards[done]).all():
                    report.invalid_observations += 1
                    report.invalid.append(f"{env_id} (group): rewards {rewards[done]}")
        except Exception as err:  # what this harness counts
            report.crashes.append(f"{env_id} (group): {type(err).__name__}: {str(err)[:200]}")
            envs = gym.make_vec(env_id, num_envs=4, group_size=2, **env_kwargs(env_id, backend))
            envs.reset(seed=rng.randrange(10**6))
        if time.perf_counter() - start > slow_s * 4:  # four members' steps
            report.slow_steps.append(f"{env_id} (group)")
    envs.close()


def fuzz_served_protocol(url: str, sessions: int, report: FuzzReport) -> None:
    """Raw messages to a served env over its WebSocket (Hypothesis draws them, derandomized): each
    reply must be an observation, a state or a typed error, and the session must still play an
    episode after them. A reply that is not, a session that is not, or a server gone is a crash."""
    import contextlib
    import json as jsonlib

    import websockets.sync.client as ws_client
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from rubricgym.openenv.sessions import ERROR_CODES, ServeLimits
    from rubricgym.testing.hostile import frame_bytes, protocol_frame, protocol_messages

    ws_url = url.replace("http://", "ws://") + "/ws"
    stack = contextlib.ExitStack()  # the sockets of the session being drawn

    def ask(socket, frame: str) -> dict:
        socket.send(frame)
        return jsonlib.loads(socket.recv(timeout=60))

    limit = ServeLimits().max_message_bytes

    @settings(max_examples=sessions, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(protocol_messages(), min_size=1, max_size=8))
    def session(messages):
        socket = None
        try:
            for message in messages:
                frame = protocol_frame(message)
                if frame is None:
                    continue
                socket = socket or stack.enter_context(ws_client.connect(ws_url, open_timeout=60, max_size=None))
                report.actions += 1
                started = time.perf_counter()
                reply = ask(socket, frame)
                if time.perf_counter() - started > 5.0 + slow_limit(SERVED["env_id"]):
                    report.slow_steps.append("served protocol")
                if frame_bytes(frame) > limit:  # answered, then the connection closed (1009): a fresh one goes on
                    if reply.get("data", {}).get("code") != "ACTION_TOO_LARGE":
                        report.crashes.append(f"served protocol: a message over the limit answered {str(reply)[:200]}")
                    socket = None
                elif reply.get("type") == "error" and reply.get("data", {}).get("code") not in ERROR_CODES:
                    report.crashes.append(f"served protocol: an untyped error {str(reply)[:200]}")
                elif reply.get("type") not in ("observation", "state", "error"):
                    report.crashes.append(f"served protocol: a reply of type {reply.get('type')!r}")
                elif reply["type"] == "observation" and reply["data"].get("done"):
                    report.episodes += 1
            socket = socket or stack.enter_context(ws_client.connect(ws_url, open_timeout=60, max_size=None))
            if ask(socket, jsonlib.dumps({"type": "reset", "data": {"seed": 1}}))["type"] != "observation":
                report.crashes.append("served protocol: the session could not reset after hostile messages")
        except Exception as err:  # what this harness counts: a closed socket, a missing reply, a dead server
            report.crashes.append(f"served protocol: {type(err).__name__}: {str(err)[:200]}")
        finally:
            stack.close()

    session()


def fuzz_configs(ids: list[str], examples: int, url: str, report: FuzzReport) -> int:
    """Every knob of every id at construction, reset options, close / copy lifecycles and the group
    env's own arguments (Hypothesis draws them; rubricgym.testing.configs probes them): each problem
    a probe reports (an unclear refusal, an exception from an env it accepted, a non-finite reward,
    an observation out of the space) is a crash. Returns the number of probes."""
    import warnings

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from rubricgym.testing.configs import (LIFECYCLE_OPS, base_kwargs, group_arguments, knob_values, knobs_of,
                                           option_values, probe_group, probe_knobs, probe_lifecycle, probe_options,
                                           reset_seeds)

    drawn = dict(max_examples=examples, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    probes = 0

    def count(problems: list[str]) -> None:
        nonlocal probes
        probes += 1
        report.crashes.extend(problems)

    for env_id in tqdm(ids, desc="fuzzing knobs, options, lifecycles"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the judged ids' judge-failure warnings
            settings(**drawn)(given(st.dictionaries(st.sampled_from(knobs_of(env_id)), knob_values(), min_size=1, max_size=3))(
                lambda knobs: count(probe_knobs(env_id, knobs, url))))()
            env = gym.make(env_id, disable_env_checker=True, **base_kwargs(env_id, url))
            settings(**drawn)(given(st.integers(0, 10**6), option_values())(
                lambda seed, options: count(probe_options(env, env_id, seed, options))))()
            env.close()
            settings(**{**drawn, "max_examples": max(1, examples // 4)})(given(
                st.lists(st.sampled_from(LIFECYCLE_OPS), max_size=8), st.integers(0, 1000))(
                lambda ops, seed: count(probe_lifecycle(env_id, ops, seed, url))))()
            if not env_id.startswith("OpenEnv"):
                settings(**{**drawn, "max_examples": max(1, examples // 8)})(given(
                    group_arguments(), reset_seeds(), st.none() | option_values(), st.integers(0, 1000))(
                    lambda arguments, seed, options, actions_seed: count(probe_group(env_id, arguments, seed, options, actions_seed))))()
    return probes


def fuzz_misbehaving_server(examples: int, report: FuzzReport) -> int:
    """``OpenEnv-v0`` against a server that damages its replies (rubricgym.testing.misbehaving; Hypothesis
    draws the damage): each problem is a crash, each call past its deadlines a slow step. Returns the
    number of scripts played."""
    import warnings

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from rubricgym.testing.misbehaving import MisbehavingServer, faults, play_against

    with serve_in_thread(make_app("WordSort-v0")) as upstream:
        server = MisbehavingServer(upstream)
        with serve_in_thread(server.app()) as url:

            @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(st.lists(faults(), max_size=6), st.none() | faults())
            def play(script, schema_fault):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    problems, slow = play_against(server, url, script, schema_fault)
                report.actions += len(script) + 1
                report.crashes.extend(f"misbehaving server: {p}" for p in problems)
                report.slow_steps.extend(f"misbehaving server: {s}" for s in slow)

            play()
    return examples


def fuzz_ids(ids: list[str], args: argparse.Namespace, rng: random.Random, report: FuzzReport, backend: FaultyJudge) -> None:
    """Single envs of every id, groups of every judged id, AsyncVectorEnv of every base id."""
    for env_id in tqdm(ids, desc="fuzzing ids"):
        kwargs = env_kwargs(env_id, backend)
        slow_s = slow_limit(env_id)
        fuzz_env(lambda: without_order_enforcing(gym.make(env_id, disable_env_checker=True, **kwargs)), rng,
                 args.actions, slow_s=slow_s, report=report, label=env_id)
        if scheme_of(env_id) is not None and scheme_of(env_id).judge_knob:
            fuzz_groups(env_id, backend, rng, args.group_steps, report, slow_s)
        if scheme_of(env_id) is None:
            fuzz_async(env_id, rng, args.async_steps, report)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=1200, help="single-env actions per registered id")
    parser.add_argument("--group-steps", type=int, default=60, help="group-env steps per judged id")
    parser.add_argument("--async-steps", type=int, default=40, help="AsyncVectorEnv steps per family's base id")
    parser.add_argument("--served-sessions", type=int, default=1000,
                        help="WebSocket sessions of up to 8 raw messages each to a served env (Hypothesis draws them)")
    parser.add_argument("--config-examples", type=int, default=200,
                        help="Hypothesis examples per id: knob sets and reset options (a quarter as many lifecycles, "
                             "an eighth as many group-env shapes)")
    parser.add_argument("--misbehaving-scripts", type=int, default=500,
                        help="scripts of damaged replies OpenEnv-v0 plays against a misbehaving server")
    parser.add_argument("--seed", type=int, default=0)
    add_smoke_flag(parser, actions=10, group_steps=2, async_steps=2, served_sessions=10, config_examples=2,
                   misbehaving_scripts=5)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    report = FuzzReport()
    backend = FaultyJudge()
    ids = sorted(rubricgym.ENVS)
    started = time.perf_counter()
    with serve_in_thread(make_app(SERVED["env_id"], **env_kwargs(SERVED["env_id"], backend))) as url:
        SERVED["url"] = url
        fuzz_ids(ids, args, rng, report, backend)
        fuzz_served_protocol(url, args.served_sessions, report)
        probes = fuzz_configs(ids, args.config_examples, url, report)
    scripts = fuzz_misbehaving_server(args.misbehaving_scripts, report)
    escaped = try_escapes(lambda code: run_python(code)[0])
    minutes = (time.perf_counter() - started) / 60
    print(f"ids: {len(ids)}; episodes finished: {report.episodes}; invalid observations or rewards: "
          f"{report.invalid_observations}; judge calls {backend.calls} ({backend.faults} faulty); {probes} knob / option / "
          f"lifecycle / group probes; {scripts} misbehaving-server scripts; {minutes:.1f} min")
    for line in (report.crashes + report.slow_steps + report.invalid + escaped)[:20]:
        print("  ", line)
    print(f"RESULT actions={report.actions} crashes={len(report.crashes)} slow_steps={len(report.slow_steps)} "
          f"lost_trajectories={report.lost_trajectories} invalid_observations={report.invalid_observations} "
          f"judge_faults={backend.faults} config_probes={probes} misbehaving_scripts={scripts} "
          f"sandbox_escapes={len(escaped)} of {len(ESCAPES)}")
    sys.exit(1 if report.crashes or report.slow_steps or report.lost_trajectories or report.invalid or escaped else 0)


if __name__ == "__main__":
    main()
