"""The two reward wrappers every scorer uses: one for groups, one for a single env.

Both read only the env's typed episode result (``info["episode"]`` on the final step) and hand
the finished members to a group scorer (:mod:`rubricgym.judges`: RULER, RLCER rubrics, a
function); the scorer's verdict is written back here, once, for every scheme.

* :class:`GroupReward` (on a group vector env): on each group's terminal step, the members'
  rewards become the scorer's combined rewards, ``info["reward_components"]`` gains the added
  components (Gymnasium's vector layout: an array per name plus its ``_name`` mask; a failed
  source is masked out), each member's info keys are added the same way, and each member's
  :class:`~rubricgym.records.Trajectory` is updated so that its transitions sum to the new
  return (per role for RLCER). Groups that end in the same step are scored concurrently.
* :class:`EpisodeReward` (on one env): a *relative* scorer judges the finished episode against
  the last ``history_size`` finished episodes of the same task (absolutely when there are
  none); ``reset(seed=...)`` clears that history so seeded runs repeat.

Examples:
    >>> from rubricgym.judges.ruler import RulerScorer
    >>> envs = GroupReward(gym.make_vec("Math-v0", num_envs=8, group_size=4), RulerScorer("local"))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from typing import Any

import gymnasium as gym
import numpy as np

from rubricgym.judges.base import GroupScorer, Member, apply_member_score, run_sync, score_or_fail
from rubricgym.records import episode_of


class GroupReward(gym.vector.VectorWrapper):
    """Scores each finished group of a group vector env with ``scorer``."""

    def __init__(self, env: gym.vector.VectorEnv, scorer: GroupScorer):
        super().__init__(env)
        self.scorer = scorer

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        done = infos.get("group_done")
        if done is None:
            return obs, rewards, terminated, truncated, infos
        base = self.env.unwrapped
        mask = np.asarray(infos.get("_group_done", done), dtype=bool) & np.asarray(done, dtype=bool)
        groups = sorted({base.group_of(i) for i in np.flatnonzero(mask)})
        if not groups:
            return obs, rewards, terminated, truncated, infos
        trajectories = {g: [infos["trajectory"][i] for i in base.members(g)] for g in groups}

        async def score_all():
            return await asyncio.gather(*(score_or_fail(self.scorer, str(trajectories[g][0].task_id),
                                                        [Member.from_trajectory(t) for t in trajectories[g]]) for g in groups))

        results = run_sync(score_all())
        rewards = np.asarray(rewards, dtype=np.float64).copy()
        for g, result in zip(groups, results):
            for i, trajectory, score in zip(base.members(g), trajectories[g], result.members):
                rewards[i] = score.reward
                apply_member_score(trajectory, score, result, self.scorer.name)  # the record keeps what the judge said
                infos = base._add_info(infos, {"reward_components": dict(score.components)}, i)
                member_info = dict(score.info)
                if score.role_rewards is not None:
                    member_info.update({f"role_rewards_{role}": value for role, value in score.role_rewards.items()})
                # scheme-neutral keys the trainer logs: whether the group's scoring failed, and its statistics
                member_info["group_failed"] = bool(result.failed)
                member_info["group_stats"] = {f"{self.scorer.name}_{k}": float(v) for k, v in result.stats.items()}
                for key, value in member_info.items():
                    _set_vector_info(infos, key, i, value, len(rewards))
        return obs, rewards, terminated, truncated, infos


def _set_vector_info(infos: dict[str, Any], key: str, index: int, value: Any, n: int) -> None:
    """Gymnasium's vector-info layout (an array per key plus its ``_key`` mask), but a dict value
    stays one object (Gymnasium's own helper would split it into nested arrays)."""
    if key not in infos:
        if isinstance(value, bool):
            infos[key] = np.zeros(n, dtype=bool)
        elif isinstance(value, (int, float)):
            infos[key] = np.full(n, np.nan)
        else:
            infos[key] = np.full(n, None, dtype=object)
        infos["_" + key] = np.zeros(n, dtype=bool)
    infos[key][index] = value
    infos["_" + key][index] = True


class EpisodeReward(gym.Wrapper):
    """Scores each finished episode of one env with ``scorer`` (relative to recent ones of its task)."""

    def __init__(self, env: gym.Env, scorer: GroupScorer, history_size: int = 3):
        super().__init__(env)
        self.scorer = scorer
        self.history_size = history_size if scorer.relative else 0
        self.history: dict[str, deque] = defaultdict(lambda: deque(maxlen=max(1, self.history_size)))
        self._task_id: str | None = None

    def reset(self, **kwargs):
        if kwargs.get("seed") is not None:
            # an explicit seed starts a fresh, reproducible stream: earlier history is dropped
            self.history.clear()
        obs, info = self.env.reset(**kwargs)
        self._task_id = str(info.get("task_id"))
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        episode = episode_of(info) if (terminated or truncated) else None
        if episode is None:  # a non-final step, or a step after the end (info["episode_ended"])
            return obs, reward, terminated, truncated, info
        member = Member(list(obs), episode, info.get("rubric_text"))
        history = self.history[self._task_id] if self.history_size else deque()
        members = list(history) + [member]
        result = run_sync(score_or_fail(self.scorer, self._task_id, members))
        if self.history_size:
            history.append(member)
        score = result.members[-1]
        components = {**(info.get("reward_components") or {}), **score.components}
        info = {**info, **score.info, "reward_components": components}
        if self.history_size:
            info[f"{self.scorer.name}_relative_to"] = len(members) - 1
        if score.role_rewards is not None:
            info["role_rewards"] = dict(score.role_rewards)
        return obs, float(score.reward), terminated, truncated, info
