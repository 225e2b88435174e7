"""Transition, trajectory and group records: what every env, wrapper and trainer exchanges.

All three are pydantic models, so ``model_dump_json()`` / ``model_validate_json()`` give a
lossless JSON round trip (numpy values in ``info`` are converted to plain Python first).
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, field_validator

Message = dict[str, Any]
Action = str | dict[str, Any]


class SeededIds:
    """Record ids drawn from their own seeded generator, so a seeded run names its records the same way twice.

    Kept apart from the env's ``np_random`` (drawing ids there would shift every task and sample
    that follows). ``reseed(None)`` keeps the current stream, as Gymnasium's ``reset(seed=None)`` does.

    Examples:
        >>> a, b = SeededIds(seed=7), SeededIds(seed=7)
        >>> [a.next() for _ in range(2)] == [b.next() for _ in range(2)]
        True
        >>> len(SeededIds(seed=7).next())
        12
    """

    def __init__(self, seed: int | None = None) -> None:
        self._generator = np.random.default_rng(seed)

    def reseed(self, seed: int | None) -> None:
        if seed is not None:
            self._generator = np.random.default_rng(seed)

    def next(self) -> str:
        return self._generator.bytes(6).hex()


#: deeper values are recorded as a note, not followed (a hostile action may nest without end, or hold itself)
MAX_RECORD_DEPTH = 64


def to_jsonable(value: Any, depth: int = 0) -> Any:
    """Convert numpy scalars / arrays and tuples nested in ``value`` to JSON-friendly Python; past
    :data:`MAX_RECORD_DEPTH` levels the rest is a note (recording never raises RecursionError).

    Examples:
        >>> deep = {}
        >>> deep["self"] = deep                                  # a dict that holds itself
        >>> str(to_jsonable(deep)).count("self") == MAX_RECORD_DEPTH
        True
    """
    if depth >= MAX_RECORD_DEPTH:
        return f"(nested deeper than {MAX_RECORD_DEPTH} levels: not recorded)"
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, depth + 1) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist(), depth + 1)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


class EpisodeResult(BaseModel):
    """What an env reports about a finished episode, in ``info["episode"]`` on its final step.

    Judges and rubric wrappers read only this (never family-specific info keys), so any env
    built on :class:`rubricgym.chatenv.ChatEnv` gets its RULER and rubric variants for free.

    Examples:
        >>> result = EpisodeResult(task_id="t1", specification="Answer briefly.", task="2+2?", answer="4",
        ...                        reference="4", correct=True, reward=1.0, reward_components={"outcome": 1.0})
        >>> result.correct, result.model_dump()["reference"]
        (True, '4')
    """

    task_id: str
    specification: str
    """The agent's system prompt: what a judge scores against."""
    task: str
    """The request as the agent first saw it (the first user message)."""
    reference: str | None = None
    """The reference answer, when the task has one (never shown to the agent)."""
    answer: str | None = None
    """The agent's final reply text (None when the episode ended without a valid final answer)."""
    correct: bool | None = None
    """Whether the answer was verified correct; None where the env cannot tell."""
    reward: float = 0.0
    """The env's own reward for the episode."""
    reward_components: dict[str, float] = Field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None
    """The OpenAI schemas of the tools the agent had."""
    truncated: bool = False
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Family-specific extras (level, extracted answer, cited ids ...)."""

    @field_validator("metadata", mode="before")
    @classmethod
    def _jsonable_metadata(cls, value: Any) -> Any:
        return to_jsonable(value)


def episode_of(info: dict[str, Any]) -> EpisodeResult | None:
    """The episode result in a step's ``info`` (object or its dict form), or None on non-final steps."""
    value = info.get("episode") if isinstance(info, dict) else None
    if value is None or isinstance(value, EpisodeResult):
        return value
    return EpisodeResult.model_validate(value)


class Transition(BaseModel):
    """One (S, A, R, S') step of one episode."""

    obs: list[Message]
    action: Action | None
    reward: float
    next_obs: list[Message]
    terminated: bool
    truncated: bool
    info: dict[str, Any] = Field(default_factory=dict)

    @field_validator("info", mode="before")
    @classmethod
    def _jsonable_info(cls, value: Any) -> Any:
        return to_jsonable(value)


class Trajectory(BaseModel):
    """One episode: its chat messages, transitions, final reward and where the reward came from.

    ``reward`` is the episode's scalar return; ``reward_components`` keeps every source (env
    outcome, judge score, rubric reward ...) so that no wrapper's combination loses the others.
    """

    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    task_id: str | None = None
    messages: list[Message] = Field(default_factory=list)
    transitions: list[Transition] = Field(default_factory=list)
    reward: float = 0.0
    reward_components: dict[str, float] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    episode: EpisodeResult | None = None
    """The env's result of the episode (set by the recorder from the final step's info)."""

    @field_validator("metadata", mode="before")
    @classmethod
    def _jsonable_metadata(cls, value: Any) -> Any:
        return to_jsonable(value)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def system_prompt(self) -> str | None:
        for message in self.messages:
            if message.get("role") == "system":
                return message.get("content")
        return None

    def set_return(self, value: float) -> None:
        """Make ``value`` the episode's return after it ended (a group wrapper rescored it).

        The difference goes on the last transition, so the transitions still sum to ``reward``
        and a learner reading per-transition rewards sees what the env loop returned.

        Examples:
            >>> step = dict(obs=[], action="", next_obs=[], terminated=False, truncated=False)
            >>> t = Trajectory(transitions=[Transition(reward=0.0, **step), Transition(reward=-1.0, **step)], reward=-1.0)
            >>> t.set_return(0.25)
            >>> [x.reward for x in t.transitions], t.reward
            ([0.0, 0.25], 0.25)
        """
        if self.transitions:
            self.transitions[-1].reward += float(value) - sum(t.reward for t in self.transitions)
        self.reward = float(value)


class Group(BaseModel):
    """The N trajectories of one scenario (same task id), judged relative to each other."""

    task_id: str | None = None
    trajectories: list[Trajectory] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata", mode="before")
    @classmethod
    def _jsonable_metadata(cls, value: Any) -> Any:
        return to_jsonable(value)

    def __len__(self) -> int:
        return len(self.trajectories)


class TrajectoryRecorder:
    """Builds a :class:`Trajectory` from the reset / step results of one env.

    Examples:
        >>> recorder = TrajectoryRecorder()
        >>> recorder.start([{"role": "user", "content": "2+2?"}], {"task_id": "t1"})
        >>> recorder.add("\\\\boxed{4}", 1.0, [{"role": "user", "content": "2+2?"},
        ...     {"role": "assistant", "content": "\\\\boxed{4}"}], True, False,
        ...     {"reward_components": {"outcome": 1.0}})
        >>> recorder.trajectory.reward, recorder.trajectory.task_id
        (1.0, 't1')
    """

    #: info keys not copied into transitions: large and the same on every step (they stay in metadata).
    SKIP_KEYS = ("system_prompt", "tools", "trajectory")

    def __init__(self) -> None:
        self.trajectory = Trajectory()

    def start(self, obs: list[Message], info: dict[str, Any], trajectory_id: str | None = None) -> None:
        """Begin a new trajectory; ``trajectory_id`` names it (a fresh random id when None)."""
        self.trajectory = Trajectory(
            **({} if trajectory_id is None else {"id": trajectory_id}),
            task_id=None if info.get("task_id") is None else str(info.get("task_id")),
            messages=list(obs),
            metadata={k: v for k, v in info.items() if k != "trajectory"},
        )

    def add(
        self,
        action: Action | None,
        reward: float,
        next_obs: list[Message],
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> None:
        traj = self.trajectory
        traj.transitions.append(
            Transition(
                obs=traj.messages,
                # a dict's keys as strings (a non-string key is a malformed action, recorded as sent)
                action=action if isinstance(action, str) else to_jsonable(action) if isinstance(action, dict) else repr(action),
                reward=float(reward),
                next_obs=list(next_obs),
                terminated=bool(terminated),
                truncated=bool(truncated),
                info={k: v for k, v in info.items() if k not in self.SKIP_KEYS},
            )
        )
        traj.messages = list(next_obs)
        traj.reward += float(reward)
        traj.terminated, traj.truncated = bool(terminated), bool(truncated)
        episode = episode_of(info)
        if episode is not None:
            traj.episode = episode
        components = info.get("reward_components")
        if components:
            traj.reward_components.update({k: float(v) for k, v in components.items()})
