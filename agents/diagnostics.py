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
from rubricgym.tools import MALFORMED_CALL, OPEN_TAG, TOOL_ERROR


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


def tool_use_stats(groups: Sequence[Any]) -> dict[str, float]:
    """Where episodes may call tools: ``tool_call_rate`` (the share of episodes with at least one
    call, well-formed or not), ``valid_call_rate`` (the share of calls that ran without an error; a
    malformed call counts as one that did not; calls that are never run count when they parse) and ``tool_calls_per_episode``; {} when no episode
    was offered a tool.

    Examples:
        >>> from rubricgym.records import EpisodeResult, Group, Trajectory
        >>> tools = [{"type": "function", "function": {"name": "calculator"}}]
        >>> def member(*messages):
        ...     episode = EpisodeResult(task_id="t", specification="", task="", tools=tools)
        ...     return Trajectory(messages=[{"role": r, "content": c} for r, c in messages], episode=episode)
        >>> stats = tool_use_stats([Group(trajectories=[
        ...     member(("tool", "42")), member(("tool", "Error: division by zero"), ("user", "Tool call error: bad JSON")),
        ...     member()])])
        >>> stats["tool_call_rate"], stats["valid_call_rate"], stats["tool_calls_per_episode"]
        (0.6666666666666666, 0.3333333333333333, 1.0)

        Calls that are the answer and never run (``FunctionCall-v0``) are read from the replies:

        >>> answer = member(("assistant", "<tool_call>{...}</tool_call><tool_call>{bad"))
        >>> answer.messages[0]["tool_calls"] = [{"function": {"name": "f", "arguments": "{}"}}]
        >>> stats = tool_use_stats([Group(trajectories=[answer])])
        >>> stats["tool_call_rate"], stats["valid_call_rate"], stats["tool_calls_per_episode"]
        (1.0, 0.5, 2.0)
    """
    episodes = [t for group in groups for t in group.trajectories if t.episode is not None and t.episode.tools]
    if not episodes:
        return {}
    calls = [[str(m.get("content") or "") for m in t.messages if m.get("role") == "tool"
              or (m.get("role") == "user" and str(m.get("content") or "").startswith(MALFORMED_CALL))] for t in episodes]
    for member, trajectory in zip(calls, episodes):
        if not member:  # calls that are the answer and never run (FunctionCall-v0): read from the replies
            for m in trajectory.messages:
                if m.get("role") == "assistant":
                    parsed = len(m.get("tool_calls") or [])
                    member += ["ok"] * parsed + [MALFORMED_CALL] * max(str(m.get("content") or "").count(OPEN_TAG) - parsed, 0)
    results = [text for member in calls for text in member]
    stats = {"tool_call_rate": float(np.mean([bool(member) for member in calls])),
             "tool_calls_per_episode": len(results) / len(episodes)}
    if results:
        stats["valid_call_rate"] = float(np.mean([not text.startswith((TOOL_ERROR, MALFORMED_CALL)) for text in results]))
    return stats
