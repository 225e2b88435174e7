"""A hand-written reward function as a reward component.

``FunctionReward(env, fn, name)`` calls ``fn(messages, info)`` at the end of each episode (any
callable; exceptions are caught and reported, never raised into the env loop), records the
value as ``info["reward_components"][name]`` and combines it with the env's reward.

Example:
    >>> def brevity(messages, info):
    ...     return -0.01 * len(messages[-1]["content"].split())
    >>> env = FunctionReward(gym.make("Math-v0"), brevity, name="brevity", combine="sum")  # doctest: +SKIP
"""

from __future__ import annotations

import math
from typing import Any, Callable

import gymnasium as gym

from .combine import Combine, combine_reward

RewardFn = Callable[[list, dict], float]


class FunctionReward(gym.Wrapper):
    """Adds ``fn(messages, info)`` as a reward component on the terminal step."""

    def __init__(self, env: gym.Env, fn: RewardFn, name: str = "function", combine: Combine = "sum"):
        super().__init__(env)
        self.fn, self.name, self.combine = fn, name, combine

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if not (terminated or truncated) or "the episode has ended" in str(info.get("error", "")):
            return obs, reward, terminated, truncated, info
        components = dict(info.get("reward_components") or {})
        components.setdefault("env", float(reward))
        try:
            value = float(self.fn(obs, info))
            if not math.isfinite(value):
                raise ValueError(f"the reward function returned {value}")
        except Exception as err:  # a broken reward function keeps the env reward and says why
            info = {**info, "reward_components": components, f"{self.name}_error": f"{type(err).__name__}: {err}"}
            return obs, reward, terminated, truncated, info
        components[self.name] = value
        return obs, combine_reward(float(reward), {self.name: value}, self.combine), terminated, truncated, {
            **info, "reward_components": components}


def math_shaped_reward(messages: list, info: dict[str, Any]) -> float:
    """A typical hand-written math reward: +0.2 for a ``\\boxed{}`` answer, minus 0.002 per
    character of the final reply beyond 200 (at most -0.5). Used with ``combine="sum"`` on top
    of the verified outcome."""
    reply = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "assistant"), "")
    format_bonus = 0.2 if info.get("extraction") == "boxed" else 0.0
    length_penalty = min(0.5, 0.002 * max(0, len(reply) - 200))
    return format_bonus - length_penalty


def make_math_function_env(**kwargs: Any) -> gym.Env:
    """``MathFunction-v0``: Math-v0 + :func:`math_shaped_reward` summed with the outcome."""
    env = gym.make("Math-v0", disable_env_checker=True, **kwargs).unwrapped
    return FunctionReward(env, math_shaped_reward, name="shaped", combine="sum")
