"""RULER reward wrappers: an LLM judge ranks the N trajectories of one scenario against each
other (the judge core is :mod:`rubricgym.judges.ruler`; these classes only put it in the env loop).

Examples:
    >>> envs = RulerGroupReward(gym.make_vec("Math-v0", num_envs=8, group_size=4), judge="local")  # doctest: +SKIP
    >>> env = RulerReward(gym.make("Math-v0"), judge="openai/gpt-4o-mini")                          # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import gymnasium as gym

from rubricgym.judges.base import Combine
from rubricgym.judges.ruler import RulerConfig, RulerScorer

from .episode import EpisodeReward, GroupReward
from .scheme import RewardScheme

RULER_CONFIG_KNOBS = frozenset(f.name for f in fields(RulerConfig))


class RulerGroupReward(GroupReward):
    """RULER on each finished group of a group vector env: ``info["reward_components"]["ruler"]``
    and ``["env"]``, ``info["ruler_score"]``, ``info["ruler_explanation"]``,
    ``info["ruler_failed"]``; reward = ``combine_reward(env_reward, {"ruler": score}, combine)``."""

    def __init__(self, env: gym.vector.VectorEnv, judge: Any = "local", config: RulerConfig | None = None,
                 combine: Combine = "sum", api_base: str | None = None):
        super().__init__(env, RulerScorer(judge, config, combine, api_base))
        self.judge, self.config, self.combine = self.scorer.judge, self.scorer.config, combine


class RulerReward(EpisodeReward):
    """RULER on one env: the finished trajectory is judged against the last ``history_size``
    finished trajectories of its task (relative), or alone when there are none (absolute);
    ``info["ruler_relative_to"]`` says how many it was compared with."""

    def __init__(self, env: gym.Env, judge: Any = "local", config: RulerConfig | None = None, combine: Combine = "sum",
                 history_size: int = 3, api_base: str | None = None):
        super().__init__(env, RulerScorer(judge, config, combine, api_base), history_size)
        self.judge, self.config, self.combine = self.scorer.judge, self.scorer.config, combine


def ruler_scorer(knobs: dict[str, Any], scorer_class: type[RulerScorer] = RulerScorer) -> RulerScorer:
    """A RULER scorer (or a subclass's) from the variant's knobs (``judge``, ``api_base``,
    ``combine`` and any :class:`RulerConfig` field)."""
    config = RulerConfig(**{k: knobs.pop(k) for k in list(knobs) if k in RULER_CONFIG_KNOBS})
    return scorer_class(config=config, **knobs)


def every_family(env_class: type) -> bool:
    return True


RULER = RewardScheme(
    name="ruler", suffix="Ruler", summary="RULER group judge (judge=local by default)",
    knobs=frozenset({"judge", "api_base", "combine", *RULER_CONFIG_KNOBS}), build_scorer=ruler_scorer,
    judge_knob="judge", defaults={"combine": "sum"}, derive=every_family)
"""``<Family>Ruler-v0`` for every family: the judge reads the system prompt as the specification."""
