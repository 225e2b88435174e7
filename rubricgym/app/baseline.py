"""Scripted baseline policies for the math env (no model needed): the env loop end to end.

* ``calculator``: copies the arithmetic expression out of a "What is ...?" problem, asks the
  calculator tool, then answers ``\\boxed{result}``. It cannot read word problems or equations,
  so it guesses the last number there: an honest, non-learning reference point.
* ``estimate``: no tools, no reading of word problems: rounds every number of a "What is ...?"
  expression to one significant digit and computes that (exact when all operands are single
  digits, so it marks how much of a level needs real arithmetic); elsewhere it answers 0.
  (It replaced a last-number guesser that scored 0.000 at every level and told nobody anything.)
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from rubricgym.tools import format_tool_call

EXPRESSION = re.compile(r"What is (.+)\?$")


def _last_number(text: str) -> str:
    numbers = re.findall(r"-?\d+", text)
    return numbers[-1] if numbers else "0"


def calculator_policy(messages: list[dict[str, Any]]) -> str:
    """One turn of the scripted calculator agent, given the conversation so far."""
    last = messages[-1]
    if last["role"] == "tool":
        return f"The calculator says {last['content']}, so the answer is \\boxed{{{last['content']}}}."
    problem = next(m["content"] for m in messages if m["role"] == "user")
    match = EXPRESSION.search(problem.strip())
    if match and last["role"] == "user":
        return "Let me compute it." + format_tool_call("calculator", {"expression": match.group(1)})
    return f"I am not sure; my guess is \\boxed{{{_last_number(problem)}}}."


def _one_significant_digit(number: re.Match) -> str:
    value = int(number.group())
    return str(round(value, -(len(str(value)) - 1)))


def estimate_policy(messages: list[dict[str, Any]]) -> str:
    """A one-significant-digit estimate of an arithmetic problem, without tools."""
    from rubricgym.envs.math.calculator import calculate

    problem = next(m["content"] for m in messages if m["role"] == "user")
    match = EXPRESSION.search(problem.strip())
    if not match:
        return "\\boxed{0}"
    rounded = re.sub(r"\d+", _one_significant_digit, match.group(1))
    return f"Roughly \\boxed{{{calculate(rounded)}}}."


POLICIES = {"calculator": calculator_policy, "estimate": estimate_policy}


def run_baseline(policy: str = "calculator", episodes: int = 120, group_size: int = 4, seed: int = 0,
                 levels: tuple[int, ...] = (1, 2, 3, 4, 5, 6), split: str = "test") -> dict[str, Any]:
    """Run ``policy`` through the group vector env of ``Math-v0`` and return accuracy per level."""
    import gymnasium as gym
    from tqdm import tqdm

    import rubricgym  # noqa: F401  (registers the ids)

    act = POLICIES[policy]
    num_envs = group_size * 2
    envs = gym.make_vec("Math-v0", num_envs=num_envs, group_size=group_size, tools=["calculator"],
                        levels=levels, split=split)
    correct_by_level: dict[int, list[bool]] = defaultdict(list)
    obs, _ = envs.reset(seed=seed)
    done_episodes = 0
    with tqdm(total=episodes, desc=f"{policy} baseline", unit="ep") as progress:
        while done_episodes < episodes:
            actions = [act(list(o)) for o in obs]
            obs, rewards, terminated, truncated, infos = envs.step(actions)
            for i in range(num_envs):
                if infos.get("_group_done", [False] * num_envs)[i] and infos["group_done"][i]:
                    correct_by_level[int(infos["level"][i])].append(bool(infos["correct"][i]))
                    done_episodes += 1
                    progress.update(1)
            if done_episodes:
                progress.set_postfix(acc=f"{sum(sum(v) for v in correct_by_level.values()) / done_episodes:.2f}")
    envs.close()
    total = [c for values in correct_by_level.values() for c in values]
    return {
        "policy": policy,
        "episodes": len(total),
        "accuracy": sum(total) / max(1, len(total)),
        "by_level": {level: sum(v) / len(v) for level, v in sorted(correct_by_level.items())},
    }
