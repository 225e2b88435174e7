"""Self-evolving rubrics (RLCER) in the env loop: the rubricator's turn as a second role, rubric
hints, and the reward wrappers. The maths, prompts and LLM calls are the judge core in
:mod:`rubricgym.judges.rlcer`; this module only needs the env's episode result.

Examples:
    >>> env = RubricReward(RubricatorTurn(gym.make("Math-v0")), RubricConfig())  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import gymnasium as gym

from rubricgym.judges.rlcer import RUBRICATOR_SYSTEM, RUBRICATOR_USER, RubricBank, RubricConfig, RubricScorer, rubricator_messages
from rubricgym.records import episode_of

from .episode import EpisodeReward, GroupReward
from .scheme import RewardScheme


class RubricatorTurn(gym.Wrapper):
    """Turns the reasoner's final step into a rubricator turn: the agent is shown the task and
    its own response and must reply with a rubric (JSON). The episode then terminates with the
    reasoner's held-back reward and episode result; ``info`` carries ``role`` ("reasoner" or
    "rubricator"), ``cot`` and ``rubric_text``. The reasoner's last step has
    ``info["next_role"] = "rubricator"`` (and no episode result yet: the episode goes on).

    Examples:
        >>> env = RubricatorTurn(gym.make("Math-v0"))  # doctest: +SKIP
    """

    def __init__(self, env: gym.Env, system: str = RUBRICATOR_SYSTEM, user: str = RUBRICATOR_USER):
        super().__init__(env)
        self.system, self.user = system, user
        self._pending: dict[str, Any] | None = None
        self._stage = "reasoner"

    def reset(self, **kwargs):
        self._pending, self._stage = None, "reasoner"
        obs, info = self.env.reset(**kwargs)
        return obs, {**info, "role": "reasoner"}

    def step(self, action):
        if self._stage == "rubricator":
            pending = self._pending
            content = action.get("content") if isinstance(action, dict) else action
            text = content if isinstance(content, str) else ""
            obs = pending["rubricator_obs"] + [{"role": "assistant", "content": text}]
            info = {**pending["info"], "role": "rubricator", "cot": pending["cot"], "rubric_text": text}
            if not isinstance(content, str):
                info["error"] = f"a rubric must be a reply string, got {type(content).__name__}"
            self._stage = "done"
            return obs, pending["reward"], pending["terminated"], pending["truncated"], info
        if self._stage == "done":
            return self.env.step(action)  # the inner env reports the ended episode
        obs, reward, terminated, truncated, info = self.env.step(action)
        episode = episode_of(info) if (terminated or truncated) else None
        if episode is None:
            return obs, reward, terminated, truncated, {**info, "role": "reasoner"}
        cot = episode.answer or ""
        rubricator_obs = rubricator_messages(episode.task, cot, self.system, self.user)
        self._pending = {"reward": reward, "terminated": terminated, "truncated": truncated, "cot": cot,
                         "info": info, "rubricator_obs": rubricator_obs}
        self._stage = "rubricator"
        reasoner_info = {k: v for k, v in info.items() if k != "episode"}
        return rubricator_obs, 0.0, False, False, {**reasoner_info, "role": "reasoner", "cot": cot,
                                                   "next_role": "rubricator", "reward_components": {}}


class RubricHints(gym.Wrapper):
    """Appends a task's banked valid rubric items to its first user message at reset (through
    ``options["hint"]``, which every :class:`~rubricgym.chatenv.ChatEnv` shows)."""

    def __init__(self, env: gym.Env, bank: RubricBank):
        super().__init__(env)
        self.bank = bank

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        hint = self.bank.hint(str(info.get("task_id")))
        if hint:
            options = {**(kwargs.get("options") or {}), "task_id": info["task_id"], "hint": hint}
            obs, info = self.env.reset(options=options)
            info = {**info, "rubric_hint": hint}
        return obs, info


class RubricGroupReward(GroupReward):
    """RLCER rewards on each group's terminal step of a group vector env.

    Per member: ``reward`` = reasoner reward, plus the rubricator reward of the rubric it wrote
    (policy mode); ``info["role_rewards_<role>"]`` splits it, and the member's
    :class:`~rubricgym.records.Trajectory` gets each role's reward on that role's last
    transition. ``info["reward_components"]`` gains ``cot`` and ``rubricator``;
    ``info["rubric_stats"]`` holds the group's valid fraction, mean valid correlation, mean
    chain-of-thought reward and items.
    """

    def __init__(self, env: gym.vector.VectorEnv, config: RubricConfig | None = None, scorer: RubricScorer | None = None):
        super().__init__(env, scorer or RubricScorer(config))
        self.config, self.bank, self.tracker = self.scorer.config, self.scorer.bank, self.scorer.tracker


class RubricReward(EpisodeReward):
    """RLCER for a single env: each finished rollout forms a group with the last
    ``history_size`` finished rollouts of the same task (relative rewards); alone, the group is
    degenerate (reasoner reward = env reward; rubricator reward = format)."""

    def __init__(self, env: gym.Env, config: RubricConfig | None = None, scorer: RubricScorer | None = None):
        scorer = scorer or RubricScorer(config)
        super().__init__(env, scorer, scorer.config.history_size)
        self.config, self.bank, self.tracker = scorer.config, scorer.bank, scorer.tracker


def rubric_member_wrappers(env: gym.Env, scorer: RubricScorer) -> gym.Env:
    """Hints at reset (``rubric_hints``) and the rubricator's turn (policy mode)."""
    if scorer.config.rubric_hints:
        env = RubricHints(env, scorer.bank)
    if scorer.policy_rubricator:
        env = RubricatorTurn(env, scorer.config.rubricator_system, scorer.config.rubricator_user)
    return env


def rubric_scorer(knobs: dict[str, Any]) -> RubricScorer:
    return RubricScorer(RubricConfig(**knobs))


def rubric_single_wrapper(env: gym.Env, scorer: RubricScorer, history_size: int) -> RubricReward:
    return RubricReward(env, scorer=scorer)  # its history size is a RubricConfig knob


def rubric_group_wrapper(envs: gym.vector.VectorEnv, scorer: RubricScorer) -> RubricGroupReward:
    return RubricGroupReward(envs, scorer=scorer)


RUBRIC = RewardScheme(
    name="rubric", suffix="Rubric",
    summary="self-evolving rubrics (RLCER): the policy also writes rubrics (role 'rubricator')",
    knobs=frozenset(f.name for f in fields(RubricConfig)), build_scorer=rubric_scorer,
    judge_knob="verifier", member_wrappers=rubric_member_wrappers,
    single_wrapper=rubric_single_wrapper, group_wrapper=rubric_group_wrapper, history_size=7)
"""``<Family>Rubric-v0`` for families that name it (it needs a verified outcome: ``Score.correct``)."""
