"""A hand-written reward function as a reward component.

:class:`FunctionScorer` calls ``fn(messages, info)`` at the end of each episode (``info`` is the
episode result's metadata plus ``episode`` and ``reward_components``; any callable; exceptions
and non-finite values are caught and reported in ``info["<name>_error"]``, never raised into
the env loop), records the value as ``info["reward_components"][name]`` and combines it with
the env's reward. :class:`FunctionReward` puts it on one env; the ``...Function-v0`` ids put it
on groups too.

Examples:
    >>> def brevity(messages, info):
    ...     return -0.01 * len(messages[-1]["content"].split())
    >>> env = FunctionReward(gym.make("Math-v0"), brevity, name="brevity", combine="sum")  # doctest: +SKIP
"""

from __future__ import annotations

import math
import importlib
from typing import Any, Callable, Sequence

import gymnasium as gym

from rubricgym.judges.base import Combine, GroupScore, Member, MemberScore, combine_reward

from .episode import EpisodeReward
from .scheme import RewardScheme

RewardFn = Callable[[list, dict], float]


class FunctionScorer:
    """Scores each member alone with ``fn(messages, info)`` (not relative: no history)."""

    relative = False

    def __init__(self, fn: RewardFn, name: str = "function", combine: Combine = "sum"):
        combine_reward(0.0, {name: 0.0}, combine)  # a bad combine fails at construction
        self.fn, self.name, self.combine = fn, name, combine

    def _one(self, member: Member) -> MemberScore:
        episode = member.episode
        info = {**episode.metadata, "episode": episode, "reward_components": dict(episode.reward_components)}
        try:
            value = float(self.fn(member.messages, info))
            if not math.isfinite(value):
                raise ValueError(f"the reward function returned {value}")
        except Exception as err:  # a broken reward function keeps the env reward and says why
            return MemberScore(reward=member.env_reward, components={"env": member.env_reward},
                               info={f"{self.name}_error": f"{type(err).__name__}: {err}"})
        return MemberScore(reward=combine_reward(member.env_reward, {self.name: value}, self.combine),
                           components={"env": member.env_reward, self.name: value})

    async def score_group(self, task_id: str, members: Sequence[Member]) -> GroupScore:
        return GroupScore([self._one(m) for m in members])


class FunctionReward(EpisodeReward):
    """Adds ``fn(messages, info)`` as the reward component ``name`` on the terminal step."""

    def __init__(self, env: gym.Env, fn: RewardFn, name: str = "function", combine: Combine = "sum"):
        super().__init__(env, FunctionScorer(fn, name, combine), history_size=0)
        self.fn, self.name, self.combine = fn, name, combine


def function_scorer(knobs: dict[str, Any]) -> FunctionScorer:
    """The scorer of a ``...Function-v0`` id: ``fn`` (a callable or ``"module:attribute"``), ``name``, ``combine``."""
    if "fn" not in knobs:
        raise TypeError("a Function variant needs fn=<callable or 'module:attribute'>")
    fn = knobs.pop("fn")
    if not callable(fn):
        module, attribute = str(fn).split(":")
        fn = getattr(importlib.import_module(module), attribute)
    return FunctionScorer(fn, **knobs)


FUNCTION = RewardScheme(name="function", suffix="Function", summary="a hand-written reward function",
                        knobs=frozenset({"fn", "name", "combine"}), build_scorer=function_scorer)
"""``<Family>Function-v0`` for families that name a reward function (``function={"fn": ...}``)."""
