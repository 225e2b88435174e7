"""Data for judge training: groups of a policy's own episodes with their verified outcome, and a
teacher's judgements of them as supervised rows.

``record_groups`` plays groups of any registered id with a policy (the default model unless one
is given) and writes them as ``groups.jsonl`` rows, the format ``rubricgym view`` reads and the
``JudgeGroup`` family trains on (each trajectory keeps its ``correct`` flag, the gold).
``teacher_rows`` turns groups into (judge prompt, teacher reply) rows for supervised
distillation: the prompt is exactly what RULER sends, the reply the JSON a judge would write.

Examples:
    >>> from rubricgym.app.judge_data import record_groups
    >>> record_groups("Math-v0", {"levels": (1,)}, groups=8, group_size=4, out="groups.jsonl")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rubricgym.registration import training_kwargs


def scripted_trajectories(env_id: str, env_kwargs: dict[str, Any], task_id: str, agents: list[Any]) -> list[Any]:
    """One trajectory per scripted agent (``act(messages, env)``), every one on the task ``task_id``,
    recorded by the group env as a policy's are."""
    import gymnasium as gym

    envs = gym.make_vec(env_id, num_envs=len(agents), group_size=len(agents), **env_kwargs)
    try:
        obs, _ = envs.reset(options={"task_ids": [task_id]})
        members = envs.unwrapped.envs
        for _ in range(members[0].unwrapped.max_turns):
            actions = [act(list(o), member.unwrapped) for act, o, member in zip(agents, obs, members)]
            obs, _, terminated, truncated, info = envs.step(actions)
            if (terminated | truncated).all():
                return list(info["trajectory"])
        raise RuntimeError(f"{env_id}: scripted agents did not finish task {task_id} within the turn limit")
    finally:
        envs.close()


def with_scripted_members(row: dict[str, Any], env_id: str, env_kwargs: dict[str, Any], count: int, seed: int) -> dict[str, Any]:
    """``row`` (a recorded group) with ``count`` of the family's scripted agents' episodes on its task
    added (the agents taken in turn), members shuffled (seeded by the task) so that no position
    says who played it; each added member's id says which agent (``scripted:<name>``)."""
    import random

    from rubricgym.agents.logs import group_row
    from rubricgym.records import Group
    from rubricgym.registration import family_class

    family = family_class(env_id)
    agents = family.scripted_agents() if family is not None else {}
    if not agents:
        raise ValueError(f"{env_id}'s family has no scripted agents to mix into its judge groups (scripted_members=0)")
    names = [list(agents)[i % len(agents)] for i in range(count)]
    played = scripted_trajectories(env_id, env_kwargs, row["task_id"], [agents[name] for name in names])
    added = group_row(Group(task_id=row["task_id"], trajectories=played), row.get("step"), row["source"],
                      labels=[f"scripted:{name}" for name in names])["trajectories"]
    members = row["trajectories"] + added
    random.Random(f"{seed}:{row['task_id']}").shuffle(members)
    return {**row, "trajectories": members, "source": f"{row['source']} + scripted {','.join(names)}"}


def record_groups(env_id: str, env_kwargs: dict[str, Any], groups: int, group_size: int, out: str | Path,
                  seed: int = 0, policy: Any = None, groups_per_batch: int = 8, max_new_tokens: int | None = None,
                  progress: bool = True, scripted_members: int = 0) -> Path:
    """Play ``groups`` groups of ``group_size`` episodes of ``env_id`` (sampled at the policy's
    temperature) and append them to ``out`` as ``groups.jsonl`` rows; returns ``out``. With
    ``scripted_members``, each group also holds that many episodes of the family's scripted agents
    (an expert, a partly right one, a harmful one ...) on its task: where the policy rarely
    succeeds, a judge trained on its rollouts alone would never see a success."""
    from tqdm import tqdm

    from rubricgym.agents.evaluation import make_envs
    from rubricgym.agents.logs import group_row
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.agents.rollout import collect_rollouts

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    policy = policy or Policy(PolicyConfig(lora_r=0, **({"max_new_tokens": max_new_tokens} if max_new_tokens else {})))
    per_batch = max(1, min(groups_per_batch, groups))
    envs = make_envs(env_id, per_batch * group_size, group_size, training_kwargs(env_id, env_kwargs))
    written = 0
    try:
        with tqdm(total=groups, desc=f"recording {env_id} groups", unit="group", disable=not progress) as bar, \
                open(out, "a", encoding="utf-8") as handle:
            while written < groups:
                batch = collect_rollouts(envs, policy, seed=seed + written, generation_seed=seed + 104_729 * written)
                for group in batch.groups[: groups - written]:
                    row = group_row(group, None, f"record_groups {env_id} seed={seed}")
                    if scripted_members:
                        row = with_scripted_members(row, env_id, training_kwargs(env_id, env_kwargs), scripted_members, seed)
                    handle.write(json.dumps(row) + "\n")
                    written += 1
                    bar.update(1)
                handle.flush()
    finally:
        envs.close()
    return out
