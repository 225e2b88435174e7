"""The group vector env: N sub-envs in groups of ``group_size`` that share one task.

Relative rewards (RULER, rubric validity, GRPO advantages) need several rollouts of the same
scenario. :class:`GroupVectorEnv` is a :class:`gymnasium.vector.VectorEnv` whose sub-envs come
in groups reset to the same task. Semantics, per member:

* while its own episode runs, a member steps normally (``info["active"]`` is true;
  ``info["member_done"]`` marks the step where its own episode ended);
* when its episode ends but others in the group are still running, it waits in an absorbing
  state: reward 0, ``terminated`` and ``truncated`` false, its actions ignored,
  ``info["active"]`` false, the observation frozen at its final one;
* its own final reward and final info (reward components, extracted answer ...) are held back
  and delivered at the group's terminal step, when every member ends *in the same step* with
  its own ``terminated`` / ``truncated`` flag. Group reward wrappers write into that step;
  ``info["trajectory"]`` carries each member's :class:`~rubricgym.records.Trajectory` there;
* autoreset is Gymnasium's ``NEXT_STEP`` mode: the step after a group ends resets that group
  to a new shared task (reward 0, actions ignored).

Examples:
    >>> import gymnasium as gym, rubricgym
    >>> envs = gym.make_vec("Math-v0", num_envs=4, group_size=2, levels=(1,))
    >>> obs, info = envs.reset(seed=0)
    >>> info["task_id"][0] == info["task_id"][1], info["task_id"][2] == info["task_id"][3]
    (True, True)
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rubricgym.records import Group, SeededIds, TrajectoryRecorder


class GroupVectorEnv(VectorEnv):
    """Vector env of ``num_envs`` sub-envs in groups of ``group_size`` sharing one task per group."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], group_size: int):
        if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)):
            raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
        if not env_fns or group_size < 1 or len(env_fns) % group_size:
            raise ValueError(f"num_envs ({len(env_fns)}) must be a positive multiple of group_size ({group_size})")
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        self.group_size = group_size
        self.num_groups = self.num_envs // group_size
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {**self.envs[0].metadata, "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = self.envs[0].render_mode
        self.spec = None
        self._obs: list[Any] = [None] * self.num_envs
        self._member_done = np.zeros(self.num_envs, dtype=bool)
        self._pending: list[tuple[float, bool, bool, dict[str, Any]] | None] = [None] * self.num_envs
        self._group_needs_reset = np.zeros(self.num_groups, dtype=bool)
        self._group_task_ids: list[str | None] = [None] * self.num_groups
        self.recorders = [TrajectoryRecorder() for _ in range(self.num_envs)]
        self._trajectory_ids = SeededIds()  # reseeded by reset(seed=...): same seed, same trajectory ids

    # -- helpers -------------------------------------------------------------------------------

    def members(self, group: int) -> range:
        """Indices of the sub-envs in ``group``."""
        return range(group * self.group_size, (group + 1) * self.group_size)

    def group_of(self, index: int) -> int:
        return index // self.group_size

    def _reset_group(self, group: int, seed: int | None, task_id: str | None) -> list[dict[str, Any]]:
        infos = []
        for rank, i in enumerate(self.members(group)):
            member_seed = None if seed is None else seed + rank
            options = None if task_id is None else {"task_id": task_id}
            obs, info = self.envs[i].reset(seed=member_seed, options=options)
            if task_id is None:  # the first member picks the task; the rest follow it
                task_id = info.get("task_id")
            self._obs[i] = obs
            self._member_done[i] = False
            self._pending[i] = None
            self.recorders[i].start(obs, info, trajectory_id=self._trajectory_ids.next())
            infos.append({**info, "active": True, "group": group})
        self._group_task_ids[group] = task_id
        self._group_needs_reset[group] = False
        return infos

    def group_trajectories(self, group: int) -> Group:
        """The current :class:`~rubricgym.records.Group` record of ``group``."""
        return Group(
            task_id=self._group_task_ids[group],
            trajectories=[self.recorders[i].trajectory for i in self.members(group)],
        )

    # -- VectorEnv API -------------------------------------------------------------------------

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None):
        """Reset every group. ``options``: ``{"task_ids": [...]}`` (one per group) or ``{"task_id": id}``."""
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options must be a dict such as {{'task_ids': [...]}} or None, got {type(options).__name__}")
        options = options or {}
        task_ids = options.get("task_ids")
        if task_ids is not None and (isinstance(task_ids, (str, bytes)) or not isinstance(task_ids, Sequence)
                                     or len(task_ids) != self.num_groups):
            raise ValueError(f"task_ids needs a list of one id per group ({self.num_groups}), got {task_ids!r:.80}")
        if isinstance(seed, (list, tuple, np.ndarray)):
            if len(seed) != self.num_envs or not all(s is None or _is_int(s) for s in seed):
                raise ValueError(f"seed as a list needs one int (or None) per sub-env ({self.num_envs}), got {seed!r:.80}")
            seeds = [None if s is None else int(s) for s in seed[:: self.group_size]]
        elif seed is None or _is_int(seed):
            seeds = [None if seed is None else int(seed) + g * self.group_size for g in range(self.num_groups)]
        else:
            raise ValueError(f"seed must be an int, None or a list of one per sub-env, got {seed!r:.80}")
        self._trajectory_ids.reseed(seeds[0])
        infos: dict[str, Any] = {}
        for group in range(self.num_groups):
            task_id = task_ids[group] if task_ids is not None else options.get("task_id")
            for i, info in zip(self.members(group), self._reset_group(group, seeds[group], task_id)):
                infos = self._add_info(infos, info, i)
        return tuple(self._obs), infos

    def step(self, actions: Sequence[Any]):
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(actions)}")
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=bool)
        truncations = np.zeros(self.num_envs, dtype=bool)
        member_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]

        for group in range(self.num_groups):
            if self._group_needs_reset[group]:  # NEXT_STEP autoreset: this step only resets
                for i, info in zip(self.members(group), self._reset_group(group, None, None)):
                    member_infos[i] = {**info, "active": False}  # this step's actions were not applied
                continue
            for i in self.members(group):
                if self._member_done[i]:
                    member_infos[i] = {"active": False, "group": group, "task_id": self._group_task_ids[group]}
                    continue
                obs, reward, terminated, truncated, info = self.envs[i].step(actions[i])
                self.recorders[i].add(actions[i], reward, obs, terminated, truncated, info)
                self._obs[i] = obs
                member_infos[i] = {**info, "active": True, "group": group, "member_done": bool(terminated or truncated)}
                if terminated or truncated:
                    self._member_done[i] = True
                    self._pending[i] = (float(reward), bool(terminated), bool(truncated), info)
                else:
                    rewards[i] = reward
            if all(self._member_done[i] for i in self.members(group)):
                self._finish_group(group, rewards, terminations, truncations, member_infos)

        infos: dict[str, Any] = {}
        for i, info in enumerate(member_infos):
            infos = self._add_info(infos, info, i)
        return tuple(self._obs), rewards, terminations, truncations, infos

    def _finish_group(self, group, rewards, terminations, truncations, member_infos) -> None:
        for i in self.members(group):
            reward, terminated, truncated, final_info = self._pending[i]
            rewards[i] = reward
            terminations[i], truncations[i] = terminated, truncated
            active = member_infos[i].get("active", False)
            member_infos[i] = {**final_info, "active": active, "group": group, "group_done": True,
                               "trajectory": self.recorders[i].trajectory}
        self._group_needs_reset[group] = True

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()

    def render(self):
        return [env.render() for env in self.envs]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_group_shape(num_envs: Any, group_size: Any) -> None:
    """Refuse a ``num_envs`` or ``group_size`` that is not a positive integer (at most 4,096), naming it."""
    for name, value in (("num_envs", num_envs), ("group_size", group_size)):
        if not _is_int(value) or not 1 <= value <= 4_096:
            raise ValueError(f"{name} must be an integer between 1 and 4,096, got {value!r:.60}")


def make_group_vector_env(env_id: str, num_envs: int = 1, group_size: int = 1, **kwargs: Any) -> GroupVectorEnv:
    """Build the group vector env of ``env_id`` (what ``gym.make_vec(env_id, ...)`` calls)."""
    kwargs.pop("max_episode_steps", None)
    check_group_shape(num_envs, group_size)

    def make_member() -> gym.Env:
        return gym.make(env_id, disable_env_checker=True, **deepcopy(kwargs))

    return GroupVectorEnv([make_member] * num_envs, group_size=group_size)
