"""``rubricgym baseline``: the scripted agents of :mod:`rubricgym.envs.math.scripted` played
through the group vector env of ``Math-v0``, accuracy per level."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rubricgym.envs.math.scripted import POLICIES


def run_baseline(policy: str = "calculator", episodes: int = 120, group_size: int = 4, seed: int = 0,
                 levels: tuple[int, ...] = (1, 2, 3, 4, 5, 6), split: str = "test") -> dict[str, Any]:
    """Run ``policy`` through the group vector env of ``Math-v0`` and return accuracy per level."""
    import gymnasium as gym
    from tqdm import tqdm

    import rubricgym  # noqa: F401  (registers the ids)

    act = POLICIES[policy]
    num_envs = group_size * 2
    envs = gym.make_vec("Math-v0", num_envs=num_envs, group_size=group_size, tools=["calculator"],
                        levels=levels, split=split)
    correct_by_level: dict[int, list[bool]] = defaultdict(list)
    obs, _ = envs.reset(seed=seed)
    done_episodes = 0
    with tqdm(total=episodes, desc=f"{policy} baseline", unit="ep") as progress:
        while done_episodes < episodes:
            actions = [act(list(o)) for o in obs]
            obs, rewards, terminated, truncated, infos = envs.step(actions)
            for i in range(num_envs):
                if infos.get("_group_done", [False] * num_envs)[i] and infos["group_done"][i]:
                    correct_by_level[int(infos["level"][i])].append(bool(infos["correct"][i]))
                    done_episodes += 1
                    progress.update(1)
            if done_episodes:
                progress.set_postfix(acc=f"{sum(sum(v) for v in correct_by_level.values()) / done_episodes:.2f}")
    envs.close()
    total = [c for values in correct_by_level.values() for c in values]
    return {
        "policy": policy,
        "episodes": len(total),
        "accuracy": sum(total) / max(1, len(total)),
        "by_level": {level: sum(v) / len(v) for level, v in sorted(correct_by_level.items())},
    }
