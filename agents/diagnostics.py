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

from typing import Any, Sequence

import numpy as np

from rubricgym.judges.base import pair_outcomes


def reward_diagnostics(groups: Sequence[Any]) -> dict[str, float]:
    """``group_reward_std`` (mean within-group standard deviation of the episode reward),
    ``zero_variance_fraction`` (groups whose members all got one reward) and, over the pairs of
    members whose verified outcomes differ, ``reward_verifier_agreement`` (the share the reward
    orders as the verifier does, ties half; absent when no group has such a pair)."""
    spreads, agreements = [], []
    for group in groups:
        rewards = [float(t.reward) for t in group.trajectories]
        if len(rewards) < 2:
            continue
        spreads.append(float(np.std(rewards)))
        verified = [(reward, float(t.episode.correct)) for reward, t in zip(rewards, group.trajectories)
                    if t.episode is not None and t.episode.correct is not None]
        agreements += [agreement for _, agreement in pair_outcomes(*map(list, zip(*verified)))] if verified else []
    if not spreads:
        return {}
    stats = {"group_reward_std": float(np.mean(spreads)), "zero_variance_fraction": float(np.mean([s == 0 for s in spreads]))}
    if agreements:
        stats["reward_verifier_agreement"] = float(np.mean(agreements))
    return stats
