"""Held-out evaluation through the env loop: greedy accuracy or pass@k on a group vector env."""

from __future__ import annotations

from typing import Any

import numpy as np

from rubricgym.registration import held_out

from .diagnostics import tool_use_stats
from .policy import Policy
from .rollout import collect_rollouts


def make_envs(env_id: str, num_envs: int, group_size: int, kwargs: dict[str, Any]):
    import gymnasium as gym

    import rubricgym  # noqa: F401  (registers the ids)

    return gym.make_vec(env_id, num_envs=num_envs, group_size=group_size, **kwargs)


held_out_kwargs = held_out
"""The base id and kwargs that measure held-out success of a run (the family decides: :func:`rubricgym.registration.held_out`)."""


def evaluate(policy: Policy, env_kwargs: dict[str, Any], tasks: int = 100, k: int = 1, seed: int = 12345, *,
             env_id: str, batch_groups: int = 16, progress: bool = False,
             per_task: bool = False, greedy: bool | None = None) -> dict[str, Any]:
    """Held-out accuracy (greedy, k=1) or pass@k (k samples at the policy's temperature; ``greedy=False``
    with k=1 is sampled pass@1) and mean reward, with the tool-use rates where the env offers tools
    (:func:`.diagnostics.tool_use_stats`); with ``per_task``, also ``solved``: one bool per task, in
    task order (the tasks depend only on ``seed``, so two policies evaluated alike are paired task by task)."""
    from tqdm import tqdm

    greedy = k == 1 if greedy is None else greedy
    batch_groups = max(1, min(batch_groups, tasks))  # a 4-task evaluation plays 4 groups, not 16
    correct_any, rewards, groups = [], [], []
    envs = make_envs(env_id, num_envs=batch_groups * k, group_size=k, kwargs=env_kwargs)
    done = 0
    with tqdm(total=tasks, desc=f"eval {env_id}" + ("" if greedy else f" pass@{k}"), unit="task", disable=not progress,
              leave=False) as bar:
        while done < tasks:
            batch = collect_rollouts(envs, policy, seed=seed + done, greedy=greedy)
            per_group: dict[int, list[bool]] = {}
            for index, c in enumerate(batch.episode_correct):
                per_group.setdefault(index // k, []).append(c)
            for g, values in per_group.items():
                if done + g < tasks:
                    correct_any.append(any(values))
                    groups.append(batch.groups[g])
            rewards.extend(batch.episode_rewards)
            done += batch_groups
            bar.update(min(batch_groups, tasks - bar.n))
            bar.set_postfix(acc=f"{np.mean(correct_any):.2f}")
    envs.close()
    key = "accuracy" if greedy and k == 1 else f"pass@{k}"
    result: dict[str, Any] = {key: float(np.mean(correct_any)), "mean_reward": float(np.mean(rewards)),
                              **tool_use_stats(groups)}
    if per_task:
        result["solved"] = [bool(c) for c in correct_any]
    return result
