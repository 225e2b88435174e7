"""A reward scheme as one object: its name, how it wraps a base env, its knobs and defaults.

Every judged id (``<Family><Suffix>-v0``) is a base env plus one :class:`RewardScheme`. Schemes
are registered like families, through entry points (the ``rubricgym.schemes`` group in
pyproject.toml names one object per scheme); ids, ``rubricgym envs``, the CLI's ``--judge``, the
bench's scheme list and the docs all read the registered objects, so a new scheme is one file
and one entry-point line.

Keyword arguments of a variant are split here: the scheme's knobs configure its scorer, the
rest go to the base env.

Examples:
    >>> import gymnasium as gym, rubricgym
    >>> from rubricgym.registration import SCHEMES
    >>> ruler = SCHEMES["ruler"]
    >>> ruler.suffix, ruler.judge_knob, ruler.split({"judge": "oracle:1.0", "levels": (1,)})
    ('Ruler', 'judge', ({'levels': (1,)}, {'combine': 'sum', 'judge': 'oracle:1.0'}, 3))
    >>> env = gym.make("MathRuler-v0", judge="oracle:1.0", levels=(1,))
    >>> type(env.unwrapped).__name__
    'MathEnv'
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any, Callable

import gymnasium as gym

from rubricgym.judges.base import GroupScorer

from .episode import EpisodeReward, GroupReward
from .group import GroupVectorEnv, check_group_shape


def no_member_wrappers(env: gym.Env, scorer: GroupScorer) -> gym.Env:
    return env


def never(env_class: type) -> bool:
    return False


@dataclass(frozen=True)
class RewardScheme:
    """One reward scheme (see the module docstring); every field named, typed and documented."""

    name: str
    """Registry key, CLI and bench name (``ruler``)."""
    suffix: str
    """Id suffix: ``<Family><suffix>-v0``."""
    summary: str
    """One line for ``rubricgym envs`` and the docs' scheme table."""
    knobs: frozenset[str]
    """Keyword arguments that configure the scorer; every other keyword goes to the base env."""
    build_scorer: Callable[[dict[str, Any]], GroupScorer]
    """The scorer from its knobs."""
    judge_knob: str | None = None
    """The knob that ``--judge`` sets (``judge`` for RULER, ``verifier`` for rubrics); None: no judge."""
    defaults: dict[str, Any] = field(default_factory=dict)
    """Knob defaults for every family (a family's own defaults override them)."""
    derive: Callable[[type], bool] = never
    """Which families get this variant without naming it (given the env class); others opt in."""
    member_wrappers: Callable[[gym.Env, GroupScorer], gym.Env] = no_member_wrappers
    """What each member env needs under the scorer (RLCER: hints and the rubricator turn)."""
    single_wrapper: Callable[[gym.Env, GroupScorer, int], gym.Env] = EpisodeReward
    """The one-env reward wrapper, given (env, scorer, history_size)."""
    group_wrapper: Callable[[gym.vector.VectorEnv, GroupScorer], gym.vector.VectorEnv] = GroupReward
    """The group reward wrapper, given (group vector env, scorer)."""
    history_size: int = 3
    """One env: earlier rollouts of the same task judged with the new one (``history_size`` kwarg)."""

    @property
    def combines(self) -> bool:
        """Whether the scheme takes a ``combine`` knob (its score can replace the env reward)."""
        return "combine" in self.knobs

    def split(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], int]:
        """(base env kwargs, scorer knobs, one-env history size) of a variant's kwargs."""
        env_kwargs = dict(kwargs)
        history_size = self.history_size if "history_size" in self.knobs else env_kwargs.pop("history_size", self.history_size)
        if not (isinstance(history_size, int) and not isinstance(history_size, bool) and 0 <= history_size <= 1_000):
            raise ValueError(f"history_size must be an integer between 0 and 1,000, got {history_size!r:.60}")
        env_kwargs.pop("max_episode_steps", None)
        knobs = {**self.defaults, **{k: env_kwargs.pop(k) for k in list(env_kwargs) if k in self.knobs}}
        return env_kwargs, knobs, history_size

    def make_env(self, base_env: str, **kwargs: Any) -> gym.Env:
        """One env: ``base_env`` + the scheme's wrapper (what ``gym.make("<Family><Suffix>-v0")`` builds)."""
        env_kwargs, knobs, history_size = self.split(kwargs)
        scorer = self.build_scorer(knobs)
        env = gym.make(base_env, disable_env_checker=True, **env_kwargs).unwrapped
        return self.single_wrapper(self.member_wrappers(env, scorer), scorer, history_size)

    def make_vector_env(self, num_envs: int = 1, group_size: int = 1, base_env: str = "", **kwargs: Any):
        """Group vector env: members of ``base_env`` in groups + the scheme's group wrapper."""
        check_group_shape(num_envs, group_size)
        env_kwargs, knobs, _ = self.split(kwargs)
        scorer = self.build_scorer(knobs)

        def make_member() -> gym.Env:
            return self.member_wrappers(gym.make(base_env, disable_env_checker=True, **deepcopy(env_kwargs)), scorer)

        return self.group_wrapper(GroupVectorEnv([make_member] * num_envs, group_size=group_size), scorer)
