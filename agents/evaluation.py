"""Held-out evaluation through the env loop: greedy accuracy or pass@k on a group vector env."""

from __future__ import annotations

from typing import Any

import numpy as np

from rubricgym.registration import base_env_id
from rubricgym.wrappers.variants import KNOBS

from .policy import Policy
from .rollout import collect_rollouts

#: every reward-variant knob (judge, verifier, combine ...): none of them applies to a base env
VARIANT_KNOBS = frozenset({"history_size"}.union(*KNOBS.values()))


def make_envs(env_id: str, num_envs: int, group_size: int, kwargs: dict[str, Any]):
    import gymnasium as gym

    import rubricgym  # noqa: F401  (registers the ids)

    return gym.make_vec(env_id, num_envs=num_envs, group_size=group_size, **kwargs)


def held_out_kwargs(env_id: str, env_kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The base env and kwargs that measure held-out success of a run on ``env_id``: the base env
    (its verified outcome, no judge), the test split where the env has one."""
    kwargs = {k: v for k, v in env_kwargs.items() if k not in VARIANT_KNOBS}
    if kwargs.get("dataset", "generated") == "generated":
        kwargs["split"] = "test"
    return base_env_id(env_id), kwargs


def evaluate(policy: Policy, env_kwargs: dict[str, Any], tasks: int = 100, k: int = 1, seed: int = 12345,
             env_id: str = "Math-v0", batch_groups: int = 16, progress: bool = False,
             per_task: bool = False) -> dict[str, Any]:
    """Held-out accuracy (greedy, k=1) or pass@k (k samples at the policy's temperature) and mean
    reward; with ``per_task``, also ``solved``: one bool per task, in task order (the tasks depend
    only on ``seed``, so two policies evaluated alike are paired task by task)."""
    from tqdm import tqdm

    greedy = k == 1
    correct_any, rewards = [], []
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
            rewards.extend(batch.episode_rewards)
            done += batch_groups
            bar.update(min(batch_groups, tasks - bar.n))
            bar.set_postfix(acc=f"{np.mean(correct_any):.2f}")
    envs.close()
    key = "accuracy" if greedy else f"pass@{k}"
    result: dict[str, Any] = {key: float(np.mean(correct_any)), "mean_reward": float(np.mean(rewards))}
    if per_task:
        result["solved"] = [bool(c) for c in correct_any]
    return result
