"""What every judge core shares, with no gym: group members, their scores, combining rewards,
rescoring finished trajectories, and running a coroutine from sync code.

A *group scorer* (RULER, RLCER rubrics, a hand-written function) takes the members of one
scenario's group, each a :class:`Member` (its messages and the env's
:class:`~rubricgym.records.EpisodeResult`), and returns a :class:`GroupScore`: per member the
combined reward, the added reward components, per-role rewards (RLCER) and info keys. The
wrappers in :mod:`rubricgym.wrappers.episode` write a GroupScore into the env loop;
:func:`rescore_group` writes one into finished :class:`~rubricgym.records.Trajectory` records
(for other trainers and offline rescoring).
"""

from __future__ import annotations

import asyncio
import os
import threading
from itertools import combinations
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, Union

from rubricgym.records import EpisodeResult, Group, Trajectory

Message = dict[str, Any]


@dataclass
class Member:
    """One finished episode of a group, as a scorer sees it."""

    messages: list[Message]
    episode: EpisodeResult
    rubric_text: str | None = None
    """The rubric this member's policy wrote as rubricator (RLCER policy mode), if any."""

    @property
    def env_reward(self) -> float:
        return float(self.episode.reward)

    @classmethod
    def from_trajectory(cls, trajectory: Trajectory) -> "Member":
        """The member of a recorded trajectory (its final messages and episode result)."""
        if trajectory.episode is None:
            raise ValueError(f"trajectory {trajectory.id} has no episode result: was it recorded to its end?")
        last = trajectory.transitions[-1].info if trajectory.transitions else {}
        return cls(list(trajectory.messages), trajectory.episode, last.get("rubric_text"))


@dataclass
class MemberScore:
    """A scorer's verdict on one member."""

    reward: float
    """The member's new episode return (the env reward combined with the added components)."""
    components: dict[str, float] = field(default_factory=dict)
    """Added reward components (e.g. ``{"env": -1.0, "ruler": 0.7}``); a failed source is absent."""
    role_rewards: dict[str, float] | None = None
    """Per-role returns (RLCER: reasoner, rubricator); None for single-role scorers."""
    info: dict[str, Any] = field(default_factory=dict)
    """Keys for the member's step ``info`` (explanations, failure flags, rubric statistics)."""


@dataclass
class GroupScore:
    members: list[MemberScore]
    failed: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)
    """The group's statistics for training metrics (logged as ``<scorer name>_<key>``, averaged over groups)."""


class GroupScorer(Protocol):
    """Scores the members of one group; ``relative`` scorers compare members with each other."""

    name: str
    relative: bool

    async def score_group(self, task_id: str, members: Sequence[Member]) -> GroupScore: ...


#: ``"replace"`` (the added component alone), ``"sum"`` (env reward + component), or weights
#: ``{"env": w_env, "<component>": w, ...}`` for a weighted sum.
Combine = Union[str, Mapping[str, float]]


def combine_reward(env_reward: float, added: Mapping[str, float | None], combine: Combine) -> float:
    """The scalar reward from the env's reward and the added components.

    A component that is ``None`` (its source failed) contributes nothing; with ``"replace"``
    the env reward is kept instead, so a failed judge never zeroes a rollout.

    Examples:
        >>> combine_reward(1.0, {"ruler": 0.25}, "sum"), combine_reward(1.0, {"ruler": 0.25}, "replace")
        (1.25, 0.25)
        >>> combine_reward(1.0, {"ruler": 0.5}, {"env": 0.5, "ruler": 2.0})
        1.5
        >>> combine_reward(-1.0, {"ruler": None}, "replace")
        -1.0
    """
    present = {k: float(v) for k, v in added.items() if v is not None}
    if isinstance(combine, str):
        if combine == "sum":
            return float(env_reward) + sum(present.values())
        if combine == "replace":
            return sum(present.values()) if present else float(env_reward)
        raise ValueError(f"combine must be 'replace', 'sum' or a dict of weights, got {combine!r}")
    if not isinstance(combine, Mapping):
        raise ValueError(f"combine must be 'replace', 'sum' or a dict of weights, got {type(combine).__name__} {combine!r:.60}")
    unknown = set(combine) - {"env", *added}
    if unknown:
        raise ValueError(f"combine: weights for unknown components {sorted(map(str, unknown))}; known: env, {', '.join(added)}")
    total = combine.get("env", 0.0) * float(env_reward)
    return total + sum(combine.get(name, 0.0) * value for name, value in present.items())


def apply_member_score(trajectory: Trajectory, score: MemberScore, group: GroupScore | None = None,
                       scorer: str = "") -> None:
    """Write ``score`` into a finished trajectory: components, what the judge said (in
    ``metadata["judged"]``, with the group's info), and the return on its transitions (each role's
    reward on that role's last transition when the scorer gives per-role rewards)."""
    trajectory.reward_components.update({k: float(v) for k, v in score.components.items()})
    trajectory.metadata["judged"] = {**score.info, "group": group.info if group else {}, "scorer": scorer}
    if score.role_rewards is None:
        trajectory.set_return(score.reward)
        return
    last_of_role: dict[str, Any] = {}
    for transition in trajectory.transitions:
        transition.reward = 0.0
        last_of_role[transition.info.get("role", "reasoner")] = transition
    for role, reward in score.role_rewards.items():
        if role in last_of_role:
            last_of_role[role].reward = float(reward)
    trajectory.reward = float(score.reward)


async def score_or_fail(scorer: GroupScorer, task_id: str, members: Sequence[Member]) -> GroupScore:
    """``scorer.score_group``, where a scorer that raises (a bug, an absurd reply no parser
    expected) or returns the wrong number of members is a failed judgement: each member keeps its
    env reward and the group is never lost.

    Examples:
        >>> class Broken:
        ...     name, relative = "broken", True
        ...     async def score_group(self, task_id, members): raise ValueError("Exceeds the limit (4300 digits)")
        >>> episode = EpisodeResult(task_id="t", specification="", task="", reward=-1.0)
        >>> result = run_sync(score_or_fail(Broken(), "t", [Member([], episode)]))
        >>> result.failed, result.members[0].reward, result.info["error"][:10]
        (True, -1.0, 'ValueError')
    """
    try:
        result = await scorer.score_group(task_id, members)
        if len(result.members) == len(members):
            return result
        error = f"the scorer returned {len(result.members)} scores for {len(members)} members"
    except Exception as err:  # whatever it was, the group keeps its env rewards
        error = f"{type(err).__name__}: {str(err)[:300]}"
    return GroupScore([MemberScore(m.env_reward, info={f"{scorer.name}_failed": True}) for m in members],
                      failed=True, info={"error": error})


async def rescore_group(group: Group, scorer: GroupScorer) -> GroupScore:
    """Score a recorded :class:`~rubricgym.records.Group` in place (the one way to rescore
    finished trajectories); every trajectory is kept, also when the scorer failed."""
    members = [Member.from_trajectory(t) for t in group.trajectories]
    result = await score_or_fail(scorer, str(group.task_id), members)
    for trajectory, score in zip(group.trajectories, result.members):
        apply_member_score(trajectory, score, result, scorer.name)
    group.metadata.update({f"{scorer.name}_failed": result.failed, **result.info})
    return result


class _JudgeLoop:
    """One event loop in a daemon thread that runs every judge call of the process.

    Sync callers (env steps, rollout waves in threads) submit coroutines to it and wait, so the
    calls of concurrent callers share one loop: the LLM client's concurrency limit holds across
    them, LiteLLM builds its HTTP client once instead of once per ``asyncio.run`` (about a second
    of Python work that would compete with generation for the GIL), and a wave's judge calls
    overlap the next wave's generation. A forked child starts its own loop on first use.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:  # the parent's loop thread does not exist in a forked child
        self._lock = threading.Lock()
        self.loop, self.thread = None, None

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self.loop is None or self.loop.is_closed() or not (self.thread and self.thread.is_alive()):
                self.loop = asyncio.new_event_loop()
                self.thread = threading.Thread(target=self.loop.run_forever, name="rubricgym-judge-loop", daemon=True)
                self.thread.start()
            return self.loop


_JUDGE_LOOP = _JudgeLoop()


def run_sync(coroutine):
    """Run a coroutine from sync code on the process's judge loop (also from threads, and when an
    event loop is already running in this thread, as in notebooks)."""
    if threading.current_thread() is _JUDGE_LOOP.thread:  # sync code called from a judge coroutine
        box: dict[str, Any] = {}

        def target():
            try:
                box["value"] = asyncio.run(coroutine)
            except BaseException as err:  # re-raised in the caller's thread
                box["error"] = err

        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["value"]
    return asyncio.run_coroutine_threadsafe(coroutine, _JUDGE_LOOP.get()).result()


def pair_outcomes(scores: list[float], gold: list[float]) -> list[tuple[bool, float]]:
    """For each pair of members with different gold, in presentation order: whether the better one
    is shown first, and whether ``scores`` order the pair as the gold does (1, 0; a tie 0.5).

    Examples:
        >>> pair_outcomes([0.6, 0.9, 0.95], [0, 1, 0])
        [(False, 1.0), (True, 0.0)]
    """
    return [(gold[i] > gold[j], 0.5 if scores[i] == scores[j] else float((scores[i] > scores[j]) == (gold[i] > gold[j])))
            for i, j in combinations(range(len(gold)), 2) if gold[i] != gold[j]]


def pair_agreement(scores: list[float], gold: list[float]) -> float:
    """Share of the pairs with different gold that ``scores`` order the same way (ties half).

    Examples:
        >>> pair_agreement([0.9, 0.1, 0.5], [1, 0, 0])
        1.0
        >>> pair_agreement([0.2, 0.2], [1, 0])
        0.5
    """
    return mean_agreement(pair_outcomes(scores, gold))


def mean_agreement(outcomes: Sequence[tuple[bool, float]]) -> float:
    """The mean agreement of :func:`pair_outcomes` (an error when no pair has different gold)."""
    if not outcomes:
        raise ValueError("no pair of members has different gold")
    return sum(agreement for _, agreement in outcomes) / len(outcomes)
