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


def learning_point(policy: Policy, env_kwargs: dict[str, Any], tasks: int, step: int, minutes: float, *,
                   env_id: str, sampled: bool = False, seed: int = 777) -> dict[str, Any]:
    """One point of a learning curve: held-out greedy accuracy at ``step`` / ``minutes`` and, with
    ``sampled``, pass@1 at the policy's temperature with the tool-call and valid-call rates (a policy
    that calls a tool only when sampling shows here first). The tasks depend only on ``seed``, so
    every point of a curve, and both trainers' curves, read the same tasks."""
    greedy = evaluate(policy, env_kwargs, tasks=tasks, seed=seed, env_id=env_id)
    row = {"step": step, "minutes": minutes, "accuracy": greedy["accuracy"]}
    if "tool_call_rate" in greedy:
        row["tool_call_rate_greedy"] = greedy["tool_call_rate"]
    if sampled:
        drawn = evaluate(policy, env_kwargs, tasks=tasks, seed=seed, env_id=env_id, greedy=False)
        row.update(sampled_accuracy=drawn["pass@1"], tool_call_rate=drawn.get("tool_call_rate", 0.0),
                   valid_call_rate=drawn.get("valid_call_rate", 0.0))
    return row


def tool_learning_fields(first: dict[str, Any], warm: dict[str, Any] | None, last: dict[str, Any]) -> str:
    """The sampled accuracy and tool-call-rate fields of a tool-learning RESULT line: before, after
    the warm start (when there was one) and after RL, from :func:`learning_point` rows.

    Examples:
        >>> row = {"sampled_accuracy": 0.25, "tool_call_rate": 0.5}
        >>> tool_learning_fields(row, None, {"sampled_accuracy": 0.75, "tool_call_rate": 1.0})
        ' sampled_before=0.250 sampled_after=0.750 tool_call_rate=1.000 tool_call_rate_before=0.500'
    """
    fields = (f" sampled_before={first['sampled_accuracy']:.3f} sampled_after={last['sampled_accuracy']:.3f} "
              f"tool_call_rate={last['tool_call_rate']:.3f} tool_call_rate_before={first['tool_call_rate']:.3f}")
    if warm is not None:
        fields += (f" acc_warm={warm['accuracy']:.3f} sampled_warm={warm['sampled_accuracy']:.3f} "
                   f"tool_call_rate_warm={warm['tool_call_rate']:.3f}")
    return fields
