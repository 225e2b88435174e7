"""One generic factory for the reward variants of any env: ``<Name>Ruler-v0``,
``<Name>Rubric-v0`` and ``<Name>Function-v0`` are the base env plus a scorer's wrapper, built
here from the registry's ``base_env`` and ``scheme`` (see :func:`rubricgym.registration.register_family`).

Keyword arguments are split: the scheme's knobs (``judge``, ``combine``, any ``RulerConfig`` or
``RubricConfig`` field, ``fn`` / ``name`` for functions) configure the scorer; the rest go to the
base env.

Example:
    >>> env = make_variant_env("Math-v0", "ruler", judge="local", levels=(1,))                    # doctest: +SKIP
    >>> envs = make_variant_vector_env(8, 4, "Math-v0", "rubric", verifier="openai/gpt-4o-mini")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from copy import deepcopy
from dataclasses import fields
from typing import Any, Callable

import gymnasium as gym

from rubricgym.judges.rlcer import RubricConfig, RubricScorer
from rubricgym.judges.ruler import RulerConfig, RulerScorer

from .episode import EpisodeReward, GroupReward
from .function import FunctionScorer
from .group import GroupVectorEnv
from .rubrics import RubricatorTurn, RubricGroupReward, RubricHints, RubricReward

RULER_KNOBS = {"judge", "api_base", "combine", *(f.name for f in fields(RulerConfig))}
RUBRIC_KNOBS = {f.name for f in fields(RubricConfig)}
FUNCTION_KNOBS = {"fn", "name", "combine"}
KNOBS = {"ruler": RULER_KNOBS, "rubric": RUBRIC_KNOBS, "function": FUNCTION_KNOBS}


def _resolve(fn: Callable | str) -> Callable:
    if callable(fn):
        return fn
    module, attribute = str(fn).split(":")
    return getattr(importlib.import_module(module), attribute)


def build_scorer(scheme: str, knobs: dict[str, Any]):
    """The scorer of ``scheme`` from its knobs (unknown knobs were left to the env)."""
    if scheme == "ruler":
        config = RulerConfig(**{k: knobs.pop(k) for k in list(knobs) if k in {f.name for f in fields(RulerConfig)}})
        return RulerScorer(config=config, **knobs)
    if scheme == "rubric":
        return RubricScorer(RubricConfig(**knobs))
    if scheme == "function":
        if "fn" not in knobs:
            raise TypeError("a Function variant needs fn=<callable or 'module:attribute'>")
        return FunctionScorer(_resolve(knobs.pop("fn")), **knobs)
    raise ValueError(f"unknown reward scheme {scheme!r}; known: {sorted(KNOBS)}")


def _split(scheme: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], int]:
    if scheme not in KNOBS:
        raise ValueError(f"unknown reward scheme {scheme!r}; known: {sorted(KNOBS)}")
    env_kwargs = dict(kwargs)
    # RLCER's history size is a RubricConfig field; the other schemes take it here
    history_size = env_kwargs.pop("history_size", 3) if scheme != "rubric" else 0
    env_kwargs.pop("max_episode_steps", None)
    knobs = {k: env_kwargs.pop(k) for k in list(env_kwargs) if k in KNOBS[scheme]}
    return env_kwargs, knobs, history_size


def _member_wrappers(env: gym.Env, scorer) -> gym.Env:
    """What a member env needs under ``scorer``: RLCER adds hints and the rubricator turn."""
    if isinstance(scorer, RubricScorer):
        if scorer.config.rubric_hints:
            env = RubricHints(env, scorer.bank)
        if scorer.policy_rubricator:
            env = RubricatorTurn(env, scorer.config.rubricator_system, scorer.config.rubricator_user)
    return env


def make_variant_env(base_env: str, scheme: str, **kwargs: Any) -> gym.Env:
    """One env: ``base_env`` + the scheme's wrapper (what ``gym.make("MathRuler-v0")`` builds)."""
    env_kwargs, knobs, history_size = _split(scheme, kwargs)
    scorer = build_scorer(scheme, knobs)
    env = _member_wrappers(gym.make(base_env, disable_env_checker=True, **env_kwargs).unwrapped, scorer)
    if isinstance(scorer, RubricScorer):
        return RubricReward(env, scorer=scorer)  # exposes the rubric bank and tracker
    return EpisodeReward(env, scorer, history_size)


def make_variant_vector_env(num_envs: int = 1, group_size: int = 1, base_env: str = "Math-v0", scheme: str = "ruler",
                            **kwargs: Any) -> GroupReward:
    """Group vector env: members of ``base_env`` in groups + the scheme's :class:`GroupReward`."""
    env_kwargs, knobs, _ = _split(scheme, kwargs)
    scorer = build_scorer(scheme, knobs)

    def make_member() -> gym.Env:
        return _member_wrappers(gym.make(base_env, disable_env_checker=True, **deepcopy(env_kwargs)), scorer)

    envs = GroupVectorEnv([make_member] * num_envs, group_size=group_size)
    if isinstance(scorer, RubricScorer):
        return RubricGroupReward(envs, scorer=scorer)  # exposes the rubric bank and tracker
    return GroupReward(envs, scorer)
