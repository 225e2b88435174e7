"""Rollouts through the env loop: reset / step on a group vector env, never around it.

Each agent turn becomes a :class:`Turn` (prompt tokens, completion tokens, sampling log-probs).
Multi-turn episodes yield one turn per step; tool results and env messages only ever appear in
later *prompts*, so they are never part of a completion and never enter the loss.
"""

from __future__ import annotations

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
    generation_batches: list[list[tuple]] = field(default_factory=list)
    """Waves merged by a :class:`WaveBatcher`: each model call's members as (wave, member, turn)."""


def _member_role_returns(trajectory) -> dict[str, float]:
    returns: dict[str, float] = {}
    for transition in trajectory.transitions:
        role = transition.info.get("role", "reasoner")
        returns[role] = returns.get(role, 0.0) + transition.reward
    return returns


def collect_rollouts(envs, policy: Policy, seed: int | None = None, options: dict[str, Any] | None = None,
                     greedy: bool = False, max_steps: int = 64, generation_seed: int | None = None,
                     batcher: "WaveBatcher | None" = None, wave: int = 0) -> RolloutBatch:
    """One episode for every member of every group, through ``envs.reset`` / ``envs.step``.

    ``generation_seed`` gives every member's every turn its own random stream (from the seed, the
    env step, the role and the member), so a completion does not depend on what else was sampled
    in its batch or before it; ``batcher`` merges this wave's generation calls with other waves'
    (whatever turn they are at). A member's cached prompt (the policy's prefix cache) is dropped
    when its episode ends."""
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
            # one stream per (run seed, env step, role, member): SeedSequence mixes them without collisions
            seeds = None if generation_seed is None else \
                [int(np.random.SeedSequence([generation_seed, batch.steps, role_index, i]).generate_state(1)[0])
                 for i in members]
            conversations = [list(obs[i]) for i in members]
            max_new_tokens = policy.config.role_max_new_tokens.get(role)
            if batcher is not None:
                samples = batcher.sample(conversations, seeds, greedy, max_new_tokens,
                                         tags=[(wave, i, batch.steps + 1) for i in members])
            else:
                samples = policy.sample(conversations, greedy=greedy, max_new_tokens=max_new_tokens, seeds=seeds)
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
                if pending[i]:
                    policy.forget([pending[i][-1][0]])
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


def collect_waves(waves: Sequence[Any], policy: Policy, seed: int, overlap: bool = True,
                  concurrency: int = 0, gather_s: float = 0.2) -> RolloutBatch:
    """One step's groups played in waves (one group vector env each), merged into one batch.

    With ``overlap`` every wave runs in its own thread (``concurrency`` at a time, 0: all; a wave
    starts when another ends) and their generation calls are merged into one batch by a
    :class:`WaveBatcher`, whatever turn each member is at: while one wave's ``envs.step`` waits
    for its judge, the others generate, and when a wave's episodes end early the next wave's
    first turn joins the others' later turns. Without it the waves run one after the other. Each
    member's turn is sampled from its own seed (seed, wave, env step, member), so both orders, any
    concurrency and any batching sample the same completions and score the same rewards. Wave
    ``w`` plays the tasks a single env would play at its group indices, so waves change when,
    not what.
    """
    concurrency = min(concurrency or len(waves), len(waves))
    batcher = WaveBatcher(policy, waves=len(waves), concurrency=concurrency, gather_s=gather_s) if overlap else None

    def play(w: int) -> RolloutBatch:
        first_group = sum(envs.unwrapped.num_groups for envs in waves[:w])
        group_size = waves[w].unwrapped.group_size
        try:
            return collect_rollouts(waves[w], policy, seed=seed + first_group * group_size,
                                    generation_seed=seed * 1_000_003 + 104_729 * w, batcher=batcher, wave=w)
        finally:
            if batcher is not None:
                batcher.wave_done()

    if overlap:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rubricgym-wave") as pool:
            batches = list(pool.map(play, range(len(waves))))
    else:
        batches = [play(w) for w in range(len(waves))]
    merged = RolloutBatch(generation_batches=batcher.batches if batcher is not None else [])
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


@dataclass
class _Request:
    conversations: list
    seeds: list[int] | None
    greedy: bool
    max_new_tokens: int | None
    tags: list
    samples: list[Sample] | None = None
    error: BaseException | None = None


class WaveBatcher:
    """Merges the generation calls of waves that play in threads into one batch per model call.

    A wave asks for its members' next turns and blocks; a call runs when every wave still playing
    (at most ``concurrency``) has asked, or ``gather_s`` after the first request (a wave inside a
    long judge call does not hold the others up). The call takes every waiting request with the
    same sampling settings, so members at different turns of different waves share one batch.
    ``batches`` records each call's member tags ``(wave, member, turn)``.

    Examples:
        >>> batcher = WaveBatcher(policy, waves=4, concurrency=2)                    # doctest: +SKIP
        >>> samples = batcher.sample(conversations, seeds, greedy=False, max_new_tokens=48, tags=tags)  # doctest: +SKIP
    """

    def __init__(self, policy: Policy, waves: int, concurrency: int | None = None, gather_s: float = 0.2):
        self.policy, self.gather_s = policy, gather_s
        self.remaining, self.concurrency = waves, concurrency or waves
        self.queue: list[_Request] = []
        self.running = False
        self.batches: list[list[tuple]] = []
        self._condition = threading.Condition()

    def _expected(self) -> int:
        return max(min(self.concurrency, self.remaining), 1)

    def wave_done(self) -> None:
        with self._condition:
            self.remaining -= 1
            self._condition.notify_all()

    def sample(self, conversations: list, seeds: list[int] | None, greedy: bool, max_new_tokens: int | None,
               tags: list) -> list[Sample]:
        import time

        request = _Request(conversations, seeds, greedy, max_new_tokens, tags)
        with self._condition:
            self.queue.append(request)
            self._condition.notify_all()
            first_at = time.monotonic()
            while request.samples is None and request.error is None:
                waited = time.monotonic() - first_at
                if not self.running and (len(self.queue) >= self._expected() or waited >= self.gather_s):
                    self._run_locked(request)
                else:
                    self._condition.wait(timeout=max(self.gather_s - waited, 0.005) if not self.running else None)
        if request.error is not None:
            raise request.error
        return request.samples

    def _run_locked(self, leader: _Request) -> None:
        """Take the waiting requests that sample like ``leader`` and run them as one batch
        (called with the condition held; released while the model runs)."""
        key = (leader.greedy, leader.max_new_tokens, leader.seeds is None)
        taken = [r for r in self.queue if (r.greedy, r.max_new_tokens, r.seeds is None) == key]
        self.queue = [r for r in self.queue if r not in taken]
        self.running = True
        self.batches.append([tag for r in taken for tag in r.tags])
        self._condition.release()
        try:
            samples = self.policy.sample([c for r in taken for c in r.conversations], greedy=leader.greedy,
                                         max_new_tokens=leader.max_new_tokens,
                                         seeds=None if leader.seeds is None else [s for r in taken for s in r.seeds])
            start = 0
            for r in taken:
                r.samples, start = samples[start:start + len(r.conversations)], start + len(r.conversations)
        except BaseException as err:  # every waiting wave learns of it, not only the one that ran the call
            for r in taken:
                r.error = err
        finally:
            self._condition.acquire()
            self.running = False
            self._condition.notify_all()


class EnvWaves(list):
    """The group vector envs of a run that plays its groups in waves."""

    def close(self) -> None:
        for envs in self:
            envs.close()
