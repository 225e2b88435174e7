"""Reward diagnostics of one training step, from its groups alone (any algorithm, any scheme):
whether the reward can teach anything, visible in the first step rather than after an hour.

A judge that cannot tell the members of a group apart gives them one reward, and GRPO learns
nothing from that group (Razin et al.: reward variance, not accuracy alone, sets how fast a
policy learns); a judge that orders them against the verifier teaches the wrong thing. So each
step logs the within-group spread of the training reward, the share of groups without any, and,
where the env verifies outcomes (math, word sorting ...), how often the training reward orders two
members of a group as the verifier does.

Examples:
    >>> from rubricgym.records import EpisodeResult, Group, Trajectory
    >>> def member(reward, correct):
    ...     episode = EpisodeResult(task_id="t", specification="", task="", correct=correct, reward=reward)
    ...     return Trajectory(reward=reward, episode=episode)
    >>> groups = [Group(trajectories=[member(0.9, True), member(0.2, False)]),
    ...           Group(trajectories=[member(0.5, True), member(0.5, False)])]
    >>> stats = reward_diagnostics(groups)
    >>> stats["zero_variance_fraction"], stats["reward_verifier_agreement"]
    (0.5, 0.75)
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Sequence

import numpy as np


def reward_diagnostics(groups: Sequence[Any]) -> dict[str, float]:
    """``group_reward_std`` (mean within-group standard deviation of the episode reward),
    ``zero_variance_fraction`` (groups whose members all got one reward) and, over the pairs of
    members whose verified outcomes differ, ``reward_verifier_agreement`` (the share the reward
    orders as the verifier does, ties half; absent when no group has such a pair)."""
    spreads, agree, pairs = [], 0.0, 0
    for group in groups:
        rewards = [float(t.reward) for t in group.trajectories]
        if len(rewards) < 2:
            continue
        spreads.append(float(np.std(rewards)))
        correct = [None if t.episode is None else t.episode.correct for t in group.trajectories]
        for i, j in combinations(range(len(rewards)), 2):
            if correct[i] is None or correct[j] is None or correct[i] == correct[j]:
                continue
            pairs += 1
            agree += 0.5 if rewards[i] == rewards[j] else float((rewards[i] > rewards[j]) == bool(correct[i]))
    if not spreads:
        return {}
    stats = {"group_reward_std": float(np.mean(spreads)), "zero_variance_fraction": float(np.mean([s == 0 for s in spreads]))}
    if pairs:
        stats["reward_verifier_agreement"] = agree / pairs
    return stats
