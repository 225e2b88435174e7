"""Scripted agents for ``Math-v0`` (no model needed): the calculator agent and a no-tool
estimator, the env loop's non-learning reference points (``rubricgym baseline``), and the
calculator agent's solved episodes as supervised rows, the warm start that shows a small model
what a tool call looks like before RL (``rubricgym baseline --write-sft``, ``TrainConfig.warm_start``).

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
from typing import Any

from rubricgym.chatenv import scripted_sft_rows as chatenv_rows
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


def scripted_sft_rows(policy: str = "calculator", episodes: int = 64, seed: int = 0,
                      env_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """SFT rows ``{"messages": observation, "completion": reply}`` from the turns of the scripted
    ``policy``'s *solved* episodes of ``Math-v0`` (train split and calculator unless ``env_kwargs``
    say otherwise: pass the training env's kwargs so the rows show the prompts training will).

    Examples:
        >>> rows = scripted_sft_rows(episodes=1, env_kwargs={"levels": (3,)})
        >>> [row["completion"][:40] for row in rows]
        ['Let me compute it.<tool_call>{"name": "c', 'The calculator says -21, so the answer i']
    """
    import gymnasium as gym

    import rubricgym  # noqa: F401  (registers the ids)

    if policy not in POLICIES:
        raise ValueError(f"unknown scripted policy {policy!r}; choose from {', '.join(POLICIES)}")
    act = POLICIES[policy]
    kwargs = {"tools": ["calculator"], "split": "train", **(env_kwargs or {})}
    return chatenv_rows(gym.make("Math-v0", **kwargs).unwrapped, lambda messages, env: act(messages), episodes, seed)
