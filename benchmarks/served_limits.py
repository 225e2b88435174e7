"""What hostile clients cost the well-behaved ones on one `rubricgym serve` (#53), and the memory
a server keeps after frozen clients.

One server (`Math-v0` with the calculator, `--idle-timeout 5`). The baseline: ``--sessions``
well-behaved sessions play episodes in a closed loop for ``--seconds`` (reset, a calculator call,
an answer math-verify has to check: ``\\frac{2k}{2}`` with k drawn, so few verdicts are cached).
Then the same sessions for the same time beside hostile clients: loops of HTTP ``/metadata`` and
``/reset`` calls (each built an env on the event loop before), sessions sending malformed
messages, and sessions whose answers use up the grader's CPU budget (``2^{2^{2^{5}}}+k``: 3 s
each, undecided). Measured in one run, side by side: the good sessions' steps/s and p99 step
time, hostile over baseline (the mean of a baseline phase first and one last). Then ``--frozen`` clients connect and reset in waves of 100 and go
silent without closing; the server closes each one idle (``SESSION_EXPIRED``), and its resident
memory after the last wave is compared with its figure after a warm-up of the same waves played
and closed.

    python benchmarks/served_limits.py                  # 8 good sessions, 20 s each phase, 1,000 frozen
    python benchmarks/served_limits.py --smoke

Ends with ``RESULT steps_per_s_ratio=<hostile/baseline> p99_ms_baseline=<a> p99_ms_hostile=<b>
frozen=<n> expired=<e> refused=<r> rss_growth=<fraction>`` (targets: the ratio near 1, memory back
within 10 %), and writes ``benchmarks/results/served_limits.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402
from rubricgym.app.provenance import provenance  # noqa: E402
from rubricgym.testing.loopback import free_port, server_process  # noqa: E402

ENV_ID = "Math-v0"
ENV_KWARGS = {"levels": [1], "tools": ["calculator"]}
CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'
IDLE_TIMEOUT_S = 5
WAVE = 100


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


async def ask(socket, message: dict) -> dict:
    await socket.send(json.dumps(message))
    return json.loads(await socket.recv())


async def good_sessions(ws_url: str, sessions: int, seconds: float) -> tuple[int, list[float]]:
    """Steps done and each step's round trip (ms) by ``sessions`` closed-loop players."""
    from websockets.asyncio.client import connect

    times: list[float] = []
    stop = time.monotonic() + seconds

    async def player(index: int) -> None:
        draw = random.Random(index)
        async with connect(ws_url, open_timeout=60, max_size=None) as socket:
            while time.monotonic() < stop:
                for message in ({"type": "reset", "data": {"seed": draw.randrange(10**6)}},
                                {"type": "step", "data": {"content": CALL}},
                                {"type": "step", "data": {"content": f"\\boxed{{\\frac{{{2 * draw.randrange(10**6)}}}{{2}}}}"}}):
                    started = time.perf_counter()
                    reply = await ask(socket, message)
                    assert reply["type"] == "observation", reply
                    if message["type"] == "step":
                        times.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(*(player(i) for i in range(sessions)))
    return len(times), times


ATTACKS = ("metadata", "http_reset", "malformed", "slow_answers")


async def hostile_clients(url: str, ws_url: str, stop: asyncio.Event, attacks: tuple[str, ...]) -> dict[str, int]:
    """Two clients of each of ``attacks`` looping until ``stop``; how many requests of each were answered."""
    import httpx
    from websockets.asyncio.client import connect

    counts = dict.fromkeys(attacks, 0)

    async def metadata_loop() -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            while not stop.is_set():
                await client.get(url + "/metadata")
                counts["metadata"] += 1

    async def reset_loop() -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            while not stop.is_set():
                await client.post(url + "/reset", json={"seed": 1})
                counts["http_reset"] += 1

    async def malformed_loop() -> None:
        async with connect(ws_url, open_timeout=60) as socket:
            while not stop.is_set():
                for raw in ("[]", "{not json", "[" * 50_000, json.dumps({"type": "fly"})):
                    await socket.send(raw)
                    await socket.recv()
                    counts["malformed"] += 1

    async def slow_answer_loop(index: int) -> None:
        async with connect(ws_url, open_timeout=60) as socket:
            k = 0
            while not stop.is_set():
                k += 1
                await ask(socket, {"type": "reset", "data": {"seed": k}})
                await ask(socket, {"type": "step", "data": {"content": f"\\boxed{{2^{{2^{{2^{{5}}}}}}+{index * 10**6 + k}}}"}})
                counts["slow_answers"] += 1

    loops = {"metadata": metadata_loop, "http_reset": reset_loop, "malformed": malformed_loop, "slow_answers": slow_answer_loop}
    await asyncio.gather(*(loops[name]() if name != "slow_answers" else loops[name](i) for name in attacks for i in range(2)))
    return counts


async def beside_hostile(url: str, ws_url: str, sessions: int, seconds: float,
                         attacks: tuple[str, ...]) -> tuple[int, list[float], dict[str, int]]:
    """The good sessions while the hostile clients run in a process of their own (in this one they
    would share the good sessions' event loop, and their cost would count as the server's)."""
    attacker = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--attack", url, "--attacks", ",".join(attacks), stdout=asyncio.subprocess.PIPE)
    assert (await attacker.stdout.readline()).startswith(b"attacking"), "the attacking process did not start"
    steps, times = await good_sessions(ws_url, sessions, seconds)
    attacker.terminate()  # it prints what it did and leaves
    answered = json.loads((await attacker.stdout.read()).decode() or "{}")
    await attacker.wait()
    return steps, times, answered


def attack(url: str, attacks: tuple[str, ...]) -> None:
    """``--attack``: the hostile clients until SIGTERM, then how many requests of each were answered."""
    import signal

    async def run() -> dict[str, int]:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        print("attacking", flush=True)
        hostile = asyncio.create_task(hostile_clients(url, url.replace("http://", "ws://") + "/ws", stop, attacks))
        await stop.wait()
        try:
            return await asyncio.wait_for(hostile, timeout=30)
        except (asyncio.TimeoutError, OSError, ConnectionError):  # a slow check in flight: count what was answered
            return {}

    print(json.dumps(asyncio.run(run())), flush=True)


async def frozen_wave(ws_url: str, count: int, freeze: bool, hold: bool = False) -> dict[str, int]:
    """``count`` clients connect and reset; frozen ones then go silent until the server closes them
    (``hold``: all stay connected until every one has its answer, so they hold their slots at once)."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    outcome = {"played": 0, "refused": 0, "expired": 0}
    answered, everyone = [0], asyncio.Event()

    async def all_answered() -> None:  # with hold: wait until every client has its answer
        answered[0] += 1
        if answered[0] == count:
            everyone.set()
        if hold:
            await everyone.wait()

    async def one(seed: int) -> None:
        counted = False
        try:
            async with connect(ws_url, open_timeout=60) as socket:
                reply = await ask(socket, {"type": "reset", "data": {"seed": seed}})
                counted = True
                await all_answered()
                if reply["type"] != "observation":
                    outcome["refused"] += 1
                    return
                outcome["played"] += 1
                if freeze:  # silent: the server must close it, with its reason
                    message = json.loads(await asyncio.wait_for(socket.recv(), timeout=IDLE_TIMEOUT_S * 12))
                    if message.get("data", {}).get("code") == "SESSION_EXPIRED":
                        outcome["expired"] += 1
                    await socket.wait_closed()
        except ConnectionClosed:
            outcome["refused"] += 1
            if not counted:
                await all_answered()

    await asyncio.gather(*(one(i) for i in range(count)))
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=8, help="well-behaved sessions")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--frozen", type=int, default=1000, help="clients that reset then go silent")
    parser.add_argument("--max-sessions", type=int, default=64)
    parser.add_argument("--attack", default="", help=argparse.SUPPRESS)  # the hostile clients' own process
    parser.add_argument("--attacks", default=",".join(ATTACKS), help=argparse.SUPPRESS)
    add_smoke_flag(parser, sessions=2, seconds=3.0, frozen=20)
    args = parser.parse_args()
    if args.attack:
        return attack(args.attack, tuple(args.attacks.split(",")))

    port = free_port()
    url, ws_url = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}/ws"
    command = [sys.executable, "-m", "rubricgym", "serve", ENV_ID, "--env-kwargs", json.dumps(ENV_KWARGS), "--port", str(port),
               "--max-sessions", str(args.max_sessions), "--idle-timeout", str(IDLE_TIMEOUT_S),
               "--sessions-per-minute-per-client", "1000000"]  # every client here is one address
    with server_process(command, url + "/health") as server:
        asyncio.run(good_sessions(ws_url, args.sessions, min(args.seconds, 5.0)))  # warm-up: imports, the grader's workers
        # the baseline first and last (the machine drifts), the attacks between
        phases = {"baseline": ()} | {name: (name,) for name in ATTACKS} | {"all": ATTACKS, "baseline_again": ()}
        measured = {}
        for phase, attacks in phases.items():
            if attacks:
                steps, times, answered = asyncio.run(beside_hostile(url, ws_url, args.sessions, args.seconds, attacks))
            else:
                (steps, times), answered = asyncio.run(good_sessions(ws_url, args.sessions, args.seconds)), {}
            measured[phase] = {"steps_per_s": steps / args.seconds, "p99_ms": sorted(times)[int(0.99 * (len(times) - 1))],
                               "p50_ms": sorted(times)[len(times) // 2], "hostile_answered": answered}
            print(f"{phase:>12}: good sessions {measured[phase]['steps_per_s']:.1f} steps/s, p50 {measured[phase]['p50_ms']:.1f} ms, "
                  f"p99 {measured[phase]['p99_ms']:.1f} ms; hostile requests answered {answered}", flush=True)
        base_rate = (measured["baseline"]["steps_per_s"] + measured["baseline_again"]["steps_per_s"]) / 2
        waves = [min(WAVE, args.frozen - first) for first in range(0, args.frozen, WAVE)]
        for size in waves:  # warm-up: the same waves played and closed
            asyncio.run(frozen_wave(ws_url, size, freeze=False))
        start_mb = rss_mb(server.pid)
        frozen = {"played": 0, "refused": 0, "expired": 0}
        for size in waves:
            for key, value in asyncio.run(frozen_wave(ws_url, size, freeze=True)).items():
                frozen[key] += value
        end_mb = rss_mb(server.pid)
    growth = end_mb / start_mb - 1
    print(f"server RSS {start_mb:.1f} MB after the warm-up waves, {end_mb:.1f} MB after {args.frozen} frozen clients "
          f"({growth:+.1%}); {frozen}")
    folder = results_dir(__file__)
    folder.mkdir(parents=True, exist_ok=True)
    record = {"settings": vars(args), "phases": measured, "frozen": frozen, "rss_start_mb": start_mb, "rss_end_mb": end_mb,
              "provenance": provenance({"benchmark": "served_limits", **vars(args)})}
    (folder / "served_limits.json").write_text(json.dumps(record, indent=1))
    ratios = " ".join(f"{name}_ratio={measured[name]['steps_per_s'] / base_rate:.3f}" for name in ATTACKS)
    print(f"RESULT steps_per_s_ratio={measured['all']['steps_per_s'] / base_rate:.3f} {ratios} "
          f"p99_ms_baseline={measured['baseline']['p99_ms']:.1f} p99_ms_hostile={measured['all']['p99_ms']:.1f} frozen={args.frozen} expired={frozen['expired']} refused={frozen['refused']} "
          f"rss_growth={growth:+.3f}")


if __name__ == "__main__":
    main()
