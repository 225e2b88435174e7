"""Rollouts through the env loop: reset / step on a group vector env, never around it.

Each agent turn becomes a :class:`Turn` (prompt tokens, completion tokens, sampling log-probs).
Multi-turn episodes yield one turn per step; tool results and env messages only ever appear in
later *prompts*, so they are never part of a completion and never enter the loss.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from rubricgym.records import Group

from .policy import Policy, Sample


@dataclass
class Turn:
    """One agent action and what the trainers need about it."""

    sample: Sample
    env_index: int
    group: int
    role: str
    reward: float = 0.0
    """The return of this turn's role in its episode (the episode's reward for single-role envs)."""


@dataclass
class RolloutBatch:
    turns: list[Turn] = field(default_factory=list)
    episode_rewards: list[float] = field(default_factory=list)
    episode_correct: list[bool] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    """Per-group extras (rubric stats, judge flags) for the logs."""
    groups: list[Group] = field(default_factory=list)
    """The finished groups' records (trajectories with their rewards and what the judge said)."""
    steps: int = 0


def _member_role_returns(trajectory) -> dict[str, float]:
    returns: dict[str, float] = {}
    for transition in trajectory.transitions:
        role = transition.info.get("role", "reasoner")
        returns[role] = returns.get(role, 0.0) + transition.reward
    return returns


def collect_rollouts(envs, policy: Policy, seed: int | None = None, options: dict[str, Any] | None = None,
                     greedy: bool = False, max_steps: int = 64, generation_seed: int | None = None,
                     generation_lock: Any = None) -> RolloutBatch:
    """One episode for every member of every group, through ``envs.reset`` / ``envs.step``.

    ``generation_seed`` seeds torch before each generation call (from the seed, the env step and
    the role), so the samples do not depend on what else drew random numbers in between (other
    waves); ``generation_lock`` makes each generation call exclusive (waves share one model)."""
    import torch
    base = envs.unwrapped
    n = base.num_envs
    obs, info = envs.reset(seed=seed, options=options)
    waiting = np.zeros(n, dtype=bool)
    pending: list[list[tuple[Sample, str]]] = [[] for _ in range(n)]
    roles = list(info.get("role", ["reasoner"] * n))
    batch = RolloutBatch()
    group_finished = np.zeros(base.num_groups, dtype=bool)
    for _ in range(max_steps):
        acting = [i for i in range(n) if not waiting[i] and not group_finished[base.group_of(i)]]
        actions: list[Any] = [""] * n
        acting_roles = {i: str(roles[i]) if roles[i] is not None else "reasoner" for i in acting}
        for role_index, role in enumerate(sorted(set(acting_roles.values()))):
            members = [i for i in acting if acting_roles[i] == role]
            with generation_lock or contextlib.nullcontext():
                if generation_seed is not None:
                    torch.manual_seed(generation_seed + 7919 * batch.steps + role_index)
                samples = policy.sample([list(obs[i]) for i in members], greedy=greedy,
                                        max_new_tokens=policy.config.role_max_new_tokens.get(role))
            for i, sample in zip(members, samples):
                actions[i] = sample.text
                pending[i].append((sample, role))
        obs, rewards, terminated, truncated, info = envs.step(actions)
        batch.steps += 1
        member_done = info.get("member_done", np.zeros(n, dtype=bool))
        active = info.get("active", np.ones(n, dtype=bool))
        next_roles = info.get("next_role")  # set where the next action belongs to another role
        for i in range(n):
            if active[i] and member_done[i]:
                waiting[i] = True
            if next_roles is not None and info["_next_role"][i]:
                roles[i] = next_roles[i]
        for g in range(base.num_groups):
            members = list(base.members(g))
            if group_finished[g] or not (terminated[members] | truncated[members]).all():
                continue
            group_finished[g] = True
            extras = {}
            for key in ("group_stats", "group_failed"):
                if key in info and info.get("_" + key, np.ones(n, dtype=bool))[members[0]]:
                    extras[key] = info[key][members[0]]
            batch.infos.append(extras)
            batch.groups.append(Group(task_id=info["trajectory"][members[0]].task_id,
                                      trajectories=[info["trajectory"][i] for i in members], metadata={"group": g}))
            for i in members:
                trajectory = info["trajectory"][i]
                returns = _member_role_returns(trajectory)
                for sample, role in pending[i]:
                    batch.turns.append(Turn(sample, i, g, role, returns.get(role, float(rewards[i]))))
                batch.episode_rewards.append(float(rewards[i]))
                batch.episode_correct.append(any(bool(t.info.get("correct")) for t in trajectory.transitions))
        if group_finished.all():
            return batch
    raise RuntimeError(f"episodes did not finish within {max_steps} steps")


def collect_waves(waves: Sequence[Any], policy: Policy, seed: int, overlap: bool = True) -> RolloutBatch:
    """One step's groups played in waves (one group vector env each), merged into one batch.

    With ``overlap`` every wave runs in its own thread and generation calls take turns on the
    model: while one wave's ``envs.step`` waits for its judge (RULER's calls for the groups that
    just finished, under the judge client's own concurrency limit), the next wave generates.
    Without it the waves run one after the other. Each generation call is seeded from (seed,
    wave, env step), so both orders sample the same completions and score the same rewards.
    Wave ``w`` plays the tasks a single env would play at its group indices, so waves change
    when, not what.
    """
    lock = threading.Lock()

    def play(w: int) -> RolloutBatch:
        first_group = sum(envs.unwrapped.num_groups for envs in waves[:w])
        group_size = waves[w].unwrapped.group_size
        return collect_rollouts(waves[w], policy, seed=seed + first_group * group_size,
                                generation_seed=seed * 1_000_003 + 104_729 * w, generation_lock=lock)

    if overlap:
        with ThreadPoolExecutor(max_workers=len(waves), thread_name_prefix="rubricgym-wave") as pool:
            batches = list(pool.map(play, range(len(waves))))
    else:
        batches = [play(w) for w in range(len(waves))]
    merged = RolloutBatch()
    group_offset = env_offset = 0
    for envs, batch in zip(waves, batches):
        merged.turns += [Turn(t.sample, t.env_index + env_offset, t.group + group_offset, t.role, t.reward)
                         for t in batch.turns]
        merged.episode_rewards += batch.episode_rewards
        merged.episode_correct += batch.episode_correct
        merged.infos += batch.infos
        for group in batch.groups:
            group.metadata["group"] = group.metadata.get("group", 0) + group_offset
        merged.groups += batch.groups
        merged.steps = max(merged.steps, batch.steps)
        group_offset += envs.unwrapped.num_groups
        env_offset += envs.unwrapped.num_envs
    return merged


class EnvWaves(list):
    """The group vector envs of a run that plays its groups in waves."""

    def close(self) -> None:
        for envs in self:
            envs.close()
