"""What serving over OpenEnv costs: Math-v0 (calculator) steps in-process against the same steps
through one and two `rubricgym serve` processes, and the memory a server keeps after abandoned sessions.

Every session plays the same episodes: reset, a calculator call, a final answer. Baseline: the
env in this process, its sessions stepped one after another (the GIL would serialize threads
anyway). Served: the same sessions as OpenEnv WebSocket sessions (OpenEnv's async client, one
event loop in this process) on one server, or split over two; every step's round trip is timed.
Added latency per step = the served round trip minus the in-process median time of the same step
kind (a tool call, a final answer), so it is what serving adds: transport, JSON, the server's
scheduling, and queueing behind the other sessions. Then 1,000 sessions are opened, reset,
stepped once and dropped without a close (clients that vanish mid-episode), and the server's
resident memory is compared with its figure after a warm-up of the same session count.

    python benchmarks/served_envs.py                      # 1, 16 and 64 sessions; 1,000 abandoned
    python benchmarks/served_envs.py --sessions 1,16 --episodes 20

Ends with ``RESULT overhead_ms_p50=<x> overhead_ms_p99=<y> sessions=<max> service_ms_per_step=<s>
steps_per_s_ratio=<served/in-process> two_servers_ratio=<r> abandoned=<n> rss_growth=<fraction>``
(targets: p50 <= 2 ms, p99 <= 20 ms at 64 sessions; memory back within 10 %), a table and a plot
under ``benchmarks/results/``. ``service_ms_per_step`` is the time serving adds to each step at
full load (1 / served rate - 1 / in-process rate): the cost without the queueing that the p50 and
p99 of a closed loop of 64 sessions include (each waits behind the others' steps).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import gymnasium as gym  # noqa: E402
from tqdm import tqdm  # noqa: E402

import rubricgym  # noqa: E402,F401
from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402
from rubricgym.app.provenance import provenance  # noqa: E402
from rubricgym.testing.loopback import free_port, server_process  # noqa: E402
from served_limits import ATTACKS, IDLE_TIMEOUT_S, beside_hostile, frozen_wave, good_sessions, rss_mb  # noqa: E402  (beside this script)

ENV_ID = "Math-v0"
ENV_KWARGS = {"levels": [1], "tools": ["calculator"]}
CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'
EPISODE = [("tool", CALL), ("final", "So the answer is \\boxed{42}.")]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def in_process(sessions: int, episodes: int) -> tuple[float, dict[str, float]]:
    """(steps per second, median ms per step kind) with ``sessions`` envs stepped in turn."""
    envs = [gym.make(ENV_ID, disable_env_checker=True, **ENV_KWARGS) for _ in range(sessions)]
    times: dict[str, list[float]] = {kind: [] for kind, _ in EPISODE}
    steps, start = 0, time.perf_counter()
    for episode in range(episodes):
        for index, env in enumerate(envs):
            env.reset(seed=episode * sessions + index)
            for kind, action in EPISODE:
                began = time.perf_counter()
                env.step(action)
                times[kind].append(time.perf_counter() - began)
                steps += 1
    elapsed = time.perf_counter() - start
    return steps / elapsed, {kind: 1000 * statistics.median(values) for kind, values in times.items()}


async def served(urls: list[str], sessions: int, episodes: int, local_ms: dict[str, float]) -> tuple[float, list[float]]:
    """(steps per second, added ms per step) with ``sessions`` WebSocket sessions spread over ``urls``."""
    from openenv.core.generic_client import GenericEnvClient

    clients = [GenericEnvClient(base_url=urls[i % len(urls)], message_timeout_s=120) for i in range(sessions)]
    for client in clients:
        await client.connect()
    added: list[float] = []

    async def play(client, index: int) -> int:
        steps = 0
        for episode in range(episodes):
            await client.reset(seed=episode * sessions + index)
            for kind, action in EPISODE:
                began = time.perf_counter()
                result = await client.step({"content": action})
                added.append(1000 * (time.perf_counter() - began) - local_ms[kind])
                steps += 1
            assert result.done, "an episode did not end where it ends in-process"
        return steps

    start = time.perf_counter()
    steps = sum(await asyncio.gather(*(play(client, i) for i, client in enumerate(clients))))
    elapsed = time.perf_counter() - start
    for client in clients:
        await client.close()
    return steps / elapsed, added


async def abandon(url: str, count: int, batch: int) -> None:
    """``count`` sessions, ``batch`` at a time: reset, one step, then the connection is cut without a close."""
    from websockets.asyncio.client import connect

    ws_url = url.replace("http://", "ws://") + "/ws"

    async def one(seed: int) -> None:
        socket = await connect(ws_url, open_timeout=30)
        await socket.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
        await socket.recv()
        await socket.send(json.dumps({"type": "step", "data": {"content": CALL}}))
        await socket.recv()
        socket.transport.abort()  # vanish: no close frame

    for first in tqdm(range(0, count, batch), desc="abandoned sessions", leave=False):
        await asyncio.gather(*(one(first + i) for i in range(min(batch, count - first))))


def serve_command(port: int, max_sessions: int, workers: int = 1) -> list[str]:
    return [sys.executable, "-m", "rubricgym", "serve", ENV_ID, "--env-kwargs", json.dumps(ENV_KWARGS), "--port", str(port),
            "--max-sessions", str(max_sessions), "--workers", str(workers), "--idle-timeout", str(IDLE_TIMEOUT_S),
            "--sessions-per-minute-per-client", "1000000"]  # every client of this benchmark is one address


def step_breakdown() -> dict[str, float]:
    """Median ms per step of each part that is not transport or waiting, timed here on a real step's
    messages: the gym env's step, the server's protocol work (read the message, validate the action,
    make the observation JSON-ready and serialise it) and the client's (write the message, read and
    parse the reply)."""
    from openenv.core.env_server.serialization import deserialize_action, serialize_observation
    from openenv.core.env_server.types import WSObservationResponse, WSStepMessage
    from openenv.core.generic_client import GenericEnvClient

    from rubricgym.openenv.server import ChatAction, RubricgymEnvironment

    env = RubricgymEnvironment(ENV_ID, ENV_KWARGS)
    parts: dict[str, list[float]] = {"env": [], "server_protocol": [], "client": []}
    client = GenericEnvClient(base_url="http://127.0.0.1:1")  # never connects: only its reply parser is timed
    for seed in range(40):
        env.reset(seed=seed)
        for _, text in EPISODE:
            began = time.perf_counter()
            raw = json.dumps({"type": "step", "data": {"content": text}})
            sent = time.perf_counter()
            action = deserialize_action(WSStepMessage(**json.loads(raw)).data, ChatAction)
            read = time.perf_counter()
            obs, reward, terminated, truncated, info = env.env.step(action.as_env_action())  # the gym env's own step
            stepped = time.perf_counter()
            observation = env._observation(obs, info, reward=float(reward), done=bool(terminated or truncated),
                                           truncated=bool(truncated))
            reply = WSObservationResponse(data=serialize_observation(observation)).model_dump_json()
            answered = time.perf_counter()
            client._parse_result(json.loads(reply)["data"])
            parsed = time.perf_counter()
            parts["env"].append(stepped - read)
            parts["server_protocol"].append((read - sent) + (answered - stepped))
            parts["client"].append((sent - began) + (parsed - answered))
    env.close()
    return {name: 1000 * statistics.median(values) for name, values in parts.items()}


def over_cap(url: str, cap: int, extra: int) -> int:
    """Sessions granted beyond ``cap`` when ``cap + extra`` clients reset at once (0 when the cap holds)."""
    outcome = asyncio.run(frozen_wave(url.replace("http://", "ws://") + "/ws", cap + extra, freeze=False, hold=True))
    return max(0, outcome["played"] - cap)


def plot(rows: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    sessions = [row["sessions"] for row in rows]
    for key, label in (("in_process", "in-process"), ("one_server", "one server process"), ("workers", "one server, --workers")):
        left.plot(sessions, [row[key] for row in rows], marker="o", label=label)
    left.set(xscale="log", xlabel="concurrent sessions", ylabel="env steps per second", title=f"{ENV_ID} + calculator")
    left.legend()
    right.plot(sessions, [row["p50_ms"] for row in rows], marker="o", label="p50")
    right.plot(sessions, [row["p99_ms"] for row in rows], marker="o", label="p99")
    right.set(xscale="log", yscale="log", xlabel="concurrent sessions", ylabel="added ms per step (--workers server)",
              title="what serving adds to a step")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1,16,64", help="concurrent session counts, comma-separated")
    parser.add_argument("--steps", type=int, default=2000, help="steps per measurement (episodes = steps / 2 / sessions)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="server processes of the --workers server")
    parser.add_argument("--abandoned", type=int, default=1000, help="sessions opened and abandoned for the memory figure")
    parser.add_argument("--hostile-seconds", type=float, default=20.0, help="length of the phases with and without hostile clients")
    add_smoke_flag(parser, sessions="1,4", steps=16, abandoned=16, hostile_seconds=2.0)
    args = parser.parse_args()
    counts = [int(n) for n in args.sessions.split(",")]
    most = max(counts)
    rows = []
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    cap = most + 8  # room for the hostile clients beside the sessions
    with server_process(serve_command(ports[0], cap), urls[0] + "/health") as first, \
            server_process(serve_command(ports[1], most * args.workers, args.workers), urls[1] + "/health"):
        for url in urls:  # warm both paths (and every worker process of the second)
            in_process(1, 3), asyncio.run(served([url], 2 * args.workers, 3, {"tool": 0.0, "final": 0.0}))
        for sessions in tqdm(counts, desc="session counts"):
            episodes = max(1, args.steps // (len(EPISODE) * sessions))
            local_rate, local_ms = in_process(sessions, episodes)
            one_rate, _ = asyncio.run(served(urls[:1], sessions, episodes, local_ms))
            workers_rate, added = asyncio.run(served(urls[1:], sessions, episodes, local_ms))
            rows.append({"sessions": sessions, "episodes": episodes, "in_process": local_rate, "one_server": one_rate,
                         "workers": workers_rate, "p50_ms": percentile(added, 50), "p99_ms": percentile(added, 99),
                         "local_ms": local_ms})
            print(f"sessions={sessions}: in-process {local_rate:,.0f} steps/s (median step {local_ms}), one server process "
                  f"{one_rate:,.0f}, --workers {args.workers} {workers_rate:,.0f}; added ms p50 {rows[-1]['p50_ms']:.2f} "
                  f"p99 {rows[-1]['p99_ms']:.2f}")
        breakdown = step_breakdown()
        one_session_ms = rows[0]["p50_ms"] + statistics.mean(rows[0]["local_ms"].values())
        breakdown["transport_and_waiting"] = one_session_ms - sum(breakdown.values())
        print("per step at 1 session, ms: " + ", ".join(f"{k} {v:.2f}" for k, v in breakdown.items()))
        # a normal session's step time beside 8 hostile clients (2 of each attack), side by side
        ws_url = urls[0].replace("http://", "ws://") + "/ws"
        _, calm = asyncio.run(good_sessions(ws_url, 1, args.hostile_seconds))
        _, stormy, _ = asyncio.run(beside_hostile(urls[0], ws_url, 1, args.hostile_seconds, ATTACKS))
        hostile_slowdown = statistics.median(stormy) / statistics.median(calm)
        print(f"a normal session's step p50 {statistics.median(calm):.2f} ms alone, {statistics.median(stormy):.2f} ms "
              f"beside 8 hostile clients ({hostile_slowdown:.2f}x)")
        sessions_over_cap = over_cap(urls[0], cap, extra=16)
        # memory: a warm-up of `most` sessions, then many abandoned ones
        asyncio.run(served(urls[:1], most, 1, {"tool": 0.0, "final": 0.0}))
        time.sleep(2)
        start_mb = rss_mb(first.pid)
        asyncio.run(abandon(urls[0], args.abandoned, batch=most))
        time.sleep(5)  # the server releases a session when its socket drops
        end_mb = rss_mb(first.pid)
        alive = first.poll() is None
    last = rows[-1]
    growth = end_mb / start_mb - 1
    print(f"server RSS after a {most}-session warm-up {start_mb:.1f} MB, after {args.abandoned} abandoned sessions "
          f"{end_mb:.1f} MB ({growth:+.1%}); server alive: {alive}")
    folder = results_dir(__file__)
    folder.mkdir(parents=True, exist_ok=True)
    table = [f"| sessions | in-process steps/s | one server process | --workers {args.workers} | added ms p50 | added ms p99 |",
             "| --- | --- | --- | --- | --- | --- |"]
    table += [f"| {r['sessions']} | {r['in_process']:,.0f} | {r['one_server']:,.0f} | {r['workers']:,.0f} | {r['p50_ms']:.2f} | "
              f"{r['p99_ms']:.2f} |" for r in rows]
    table.append("\nPer step at 1 session (ms): " + ", ".join(f"{k} {v:.2f}" for k, v in breakdown.items()) + ".")
    table.append(f"\nServer RSS: {start_mb:.1f} MB after a {most}-session warm-up, {end_mb:.1f} MB after {args.abandoned} "
                 f"sessions abandoned mid-episode ({growth:+.1%}).")
    (folder / "served_envs.md").write_text("\n".join(table) + "\n")
    (folder / "served_envs.json").write_text(json.dumps({
        "rows": rows, "breakdown_ms": breakdown, "hostile_slowdown": hostile_slowdown, "sessions_over_cap": sessions_over_cap,
        "rss_start_mb": start_mb, "rss_end_mb": end_mb, "provenance": provenance({"benchmark": "served_envs", **vars(args)})},
        indent=1))
    plot(rows, folder / "served_envs.png")
    print(f"RESULT served_over_inprocess={last['workers'] / last['in_process']:.3f} "
          f"one_process_over_inprocess={last['one_server'] / last['in_process']:.3f} sessions={last['sessions']} "
          f"workers={args.workers} overhead_ms_p50={last['p50_ms']:.2f} overhead_ms_p99={last['p99_ms']:.2f} "
          f"hostile_slowdown={hostile_slowdown:.2f} sessions_over_cap={sessions_over_cap} "
          f"rss_after_abandon_pct={100 * growth:+.1f} abandoned={args.abandoned}")
    sys.exit(0 if alive else 1)


if __name__ == "__main__":
    main()
