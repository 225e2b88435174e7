"""Cost of ``Math-v0.step`` against a bare math-verify call on the same answers.

Baseline: ``math_verify.verify(parse(gold), parse(reply))`` on the reply, the least a user
would run to grade a reply. Ours: ``env.step(reply)`` on a reset env (extraction, equivalence
under a hard time limit, reward components, observation). Both run in this process,
interleaved in alternating rounds, on the same replies; the equivalence cache is cleared
before every round so repeats cost what a fresh answer costs. Ends with one line
``RESULT overhead_ratio=<median step time / median bare time>`` (target <= 1.2).

    python benchmarks/env_overhead.py [--dataset math500|generated] [--n 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
from math_verify import parse, verify
from tqdm import tqdm

import rubricgym  # noqa: F401
from rubricgym.envs.math.grader import VERDICTS  # the verdict cache of answers_match
from rubricgym.app.flags import add_smoke_flag  # noqa: E402


def reply_for(answer: str, index: int) -> str:
    # every other reply is wrong, so both paths see matches and mismatches
    shown = answer if index % 2 == 0 else answer + "+1"
    return f"Step by step: combining the pieces gives the result.\nSo the answer is $\\boxed{{{shown}}}$."


def time_bare(pairs) -> float:
    start = time.perf_counter()
    for gold, text in pairs:
        verify(parse("\\boxed{" + gold + "}"), parse(text))
    return time.perf_counter() - start


def time_env(env, pairs, task_ids) -> float:
    total = 0.0
    for (gold, text), task_id in zip(pairs, task_ids):
        env.reset(options={"task_id": task_id})
        start = time.perf_counter()
        env.step(text)
        total += time.perf_counter() - start
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="math500")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    add_smoke_flag(parser, n=10, rounds=1)
    args = parser.parse_args()

    env = gym.make("Math-v0", dataset=args.dataset, disable_env_checker=True)
    tasks = env.unwrapped.tasks[: args.n]
    pairs = [(t.answer, reply_for(t.answer, i)) for i, t in enumerate(tasks)]
    task_ids = [t.id for t in tasks]
    # warm both paths once (imports, sympy caches) before timing
    time_bare(pairs[:5]), time_env(env, pairs[:5], task_ids[:5])

    bare_times, env_times = [], []
    for _ in tqdm(range(args.rounds), desc="rounds"):
        VERDICTS.clear()  # every round decides afresh
        bare_times.append(time_bare(pairs))
        VERDICTS.clear()  # every round decides afresh
        env_times.append(time_env(env, pairs, task_ids))
    bare, ours = statistics.median(bare_times), statistics.median(env_times)
    print(f"dataset={args.dataset} replies={len(pairs)} rounds={args.rounds}")
    print(f"bare math-verify: {1000 * bare / len(pairs):.3f} ms/reply   Math-v0.step: {1000 * ours / len(pairs):.3f} ms/reply")
    print(f"RESULT overhead_ratio={ours / bare:.3f}")


if __name__ == "__main__":
    main()
