"""Hypothesis strategies for every knob of every registered id, and the probes a fuzzer runs with
them: construction (a knob is refused where the config is made, naming it, or the env works),
reset options, close / copy lifecycles, and the group vector env's own arguments.

    >>> problems = probe_knobs("WordSort-v0", {"max_words": float("nan")})
    >>> problems
    []

Each probe returns the problems it found (empty: none). A problem is what an env must never do:
raise anything but a ``ValueError`` / ``TypeError`` naming the knob (or option) at construction
or reset, raise from a step or a close of an env it accepted, emit a non-finite reward or an
observation outside its space, or break the original when a copy is closed. (Hypothesis is a
test dependency: the strategies import it when asked for.)
"""

from __future__ import annotations

import copy
import math
import random
from dataclasses import fields
from typing import Any

import gymnasium as gym

from rubricgym.registration import ENVS, family_class, scheme_of
from rubricgym.testing.hostile import hostile_action

#: knobs whose value is a file, a URL or a model to load: drawn only from values that cannot reach
#: the network or load weights (a refusal is what is checked there), or held at the base value
HELD = {"url", "api_base", "fn", "groups", "token"}
JUDGE_VALUES = ("oracle:1.0", "oracle:0.5", "oracle:nan", "oracle:2", "oracle:", "oracle:x", "local:/nonexistent")


def base_kwargs(env_id: str, url: str | None = None) -> dict[str, Any]:
    """What an id needs to be built here without network or weights: a simulated judge for judged
    schemes, the served env's ``url`` for OpenEnv ids, BFCL's bundled rows for FunctionCall."""
    scheme = scheme_of(env_id)
    kwargs: dict[str, Any] = {}
    if scheme is not None and scheme.judge_knob:
        kwargs[scheme.judge_knob] = "oracle:1.0"
        if "rubricator" in scheme.knobs:
            kwargs["rubricator"] = "oracle:1.0"
    base = ENVS[env_id].base or env_id
    if base == "OpenEnv-v0":
        kwargs.update(url=url, connect_timeout_s=5.0, message_timeout_s=10.0)
    if base == "FunctionCall-v0":
        kwargs["dataset"] = "simple_python"
    return kwargs


def knobs_of(env_id: str) -> list[str]:
    """Every knob ``gym.make(env_id, ...)`` takes: the family's config fields, the scheme's knobs
    and, for judged schemes, the one-env ``history_size``."""
    base = ENVS[env_id].base or env_id
    cls = family_class(base)
    config_class = getattr(cls, "config_class", None)
    if config_class is None and base == "OpenEnv-v0":
        from rubricgym.openenv.client import OpenEnvConfig

        config_class = OpenEnvConfig
    names = [f.name for f in fields(config_class)] if config_class is not None else []
    scheme = scheme_of(env_id)
    if scheme is not None:
        names += sorted(scheme.knobs)
        if scheme.judge_knob:
            names.append("history_size")
    return [name for name in dict.fromkeys(names) if name not in HELD]


def knob_values():
    """A Hypothesis strategy for a hostile knob value: wrong types, NaN and infinities, integers past
    64 bits, zero and negatives, lone surrogates, paths, nested lists and dicts with non-string keys."""
    from hypothesis import strategies as st

    from rubricgym.testing.hostile import json_like_values

    scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.sampled_from([0, -1, 1, 2, 3, 10**6, 10**12])
               | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
               | st.sampled_from(["", "5", "nan", "\ud800", "/etc/passwd", "/tmp", ".", "../..", "test", "train",
                                  "agentic", "bm25", "calculator", "replace", *JUDGE_VALUES]))
    return st.one_of(scalars, json_like_values(),
                     st.lists(scalars, max_size=4), st.tuples(scalars, scalars),
                     st.dictionaries(st.integers() | st.text(max_size=6), scalars, max_size=3),
                     st.just(object()))


def _finite_float(value: Any) -> bool:
    return type(value) is float and math.isfinite(value)


def _named(error: Exception, names: list[str]) -> bool:
    text = str(error)
    return any(name in text for name in names)


def _action(env: gym.Env) -> Any:
    """A plausible reply for any family (a boxed number and words): what an accepted env must step."""
    return "\\boxed{1} alpha, beta"


def _built(make: Any, names: list[str], label: str) -> tuple[Any, list[str]]:
    """``make()``, or None with the problem when it raised anything but a ValueError / TypeError
    naming one of ``names`` (a refusal that names it is no problem)."""
    try:
        return make(), []
    except (ValueError, TypeError) as error:
        return None, [] if _named(error, names) else [f"{label}: refused without naming {'/'.join(names)}: {error!s:.200}"]
    except Exception as error:
        return None, [f"{label}: construction raised {type(error).__name__}: {error!s:.200}"]


def _closed(env: Any, label: str, problems: list[str]) -> None:
    """``env.close()``, a raise recorded as a problem."""
    try:
        env.close()
    except Exception as error:
        problems.append(f"{label}: close raised {type(error).__name__}: {error!s:.200}")


def _play(env: gym.Env, label: str, problems: list[str], seed: int = 0, options: Any = None, steps: int = 2) -> None:
    observation, info = env.reset(seed=seed, options=options)
    if not env.observation_space.contains(observation):
        problems.append(f"{label}: reset's observation is out of the space")
    for _ in range(steps):
        observation, reward, terminated, truncated, info = env.step(_action(env))
        if not env.observation_space.contains(observation):
            problems.append(f"{label}: a step's observation is out of the space")
        if not _finite_float(reward):
            problems.append(f"{label}: a step's reward is {reward!r}")
        if terminated or truncated:
            break


def probe_knobs(env_id: str, knobs: dict[str, Any], url: str | None = None) -> list[str]:
    """``gym.make(env_id, **knobs)``: refused with a ValueError / TypeError naming one of the knobs,
    or an env that resets, steps (finite rewards, observations in the space) and closes."""
    label = f"{env_id} {', '.join(f'{k}={v!r:.40}' for k, v in knobs.items())}"
    env, problems = _built(lambda: gym.make(env_id, disable_env_checker=True, **{**base_kwargs(env_id, url), **knobs}),
                           list(knobs), label)
    if env is None:
        return problems
    try:
        _play(env, label, problems)
    except Exception as error:  # accepted at construction, so it must work
        problems.append(f"{label}: accepted, then raised {type(error).__name__}: {error!s:.200}")
    _closed(env, label, problems)
    return problems


def option_values():
    """A Hypothesis strategy for ``reset(options=...)``: anything JSON-like, or a dict of the
    options families read (``task_id``, ``hint``, ``split``) with hostile values."""
    from hypothesis import strategies as st

    from rubricgym.testing.hostile import json_like_values

    known = st.dictionaries(st.sampled_from(["task_id", "hint", "split", "seed", "question"]), knob_values(), max_size=3)
    return st.one_of(st.none(), json_like_values(), known, st.just("x"), st.just([1]))


def probe_options(env: gym.Env, label: str, seed: int, options: Any) -> list[str]:
    """``reset(seed, options)`` on ``env``: refused with a ValueError / TypeError naming the options
    (or the option), or an episode that plays; either way the env then plays a plain episode."""
    problems: list[str] = []
    names = ["option", *(options if isinstance(options, dict) else ())]
    try:
        _play(env, f"{label} options={options!r:.60}", problems, seed=seed, options=options)
    except (ValueError, TypeError) as error:
        if not _named(error, [str(n) for n in names]):
            problems.append(f"{label}: options {options!r:.60} refused without naming them: {error!s:.200}")
    except Exception as error:
        problems.append(f"{label}: options {options!r:.60} raised {type(error).__name__}: {error!s:.200}")
    try:
        _play(env, f"{label} after options", problems, seed=seed)
    except Exception as error:
        problems.append(f"{label}: after options {options!r:.60}, a plain episode raised {type(error).__name__}: {error!s:.200}")
    return problems


LIFECYCLE_OPS = ("reset", "step", "close", "copy", "close_copy", "step_copy", "reset_copy")


def probe_lifecycle(env_id: str, ops: list[str], seed: int = 0, url: str | None = None) -> list[str]:
    """A sequence of lifecycle operations (:data:`LIFECYCLE_OPS`) on one env and its deep copy: no
    exception from any of them (a step before a reset or after ``close()`` is answered as after the
    end; ``reset()`` after ``close()`` starts again), and closing the copy never breaks the original."""
    label = f"{env_id} {'/'.join(ops)}"
    problems: list[str] = []
    rng = random.Random(seed)
    env = gym.make(env_id, disable_env_checker=True, **base_kwargs(env_id, url))
    env = env.env if isinstance(env, gym.wrappers.OrderEnforcing) else env  # a step before reset is part of the test
    twin = None
    try:
        for op in ops:
            target = twin if op.endswith("_copy") else env
            if op.endswith("_copy") and twin is None:
                continue
            try:
                if op == "copy":
                    twin = copy.deepcopy(env)
                elif op.startswith("close"):
                    target.close()
                elif op.startswith("reset"):
                    observation, _ = target.reset(seed=rng.randrange(1000))
                    if not target.observation_space.contains(observation):
                        problems.append(f"{label}: {op}'s observation is out of the space")
                else:
                    observation, reward, *_ = target.step(hostile_action(rng, 2_000) if rng.random() < 0.5 else _action(target))
                    if not target.observation_space.contains(observation) or not _finite_float(reward):
                        problems.append(f"{label}: {op} gave reward {reward!r} / an observation out of the space")
            except Exception as error:
                problems.append(f"{label}: {op} raised {type(error).__name__}: {error!s:.200}")
        _play(env, f"{label} then play", problems, seed=seed)  # the original still plays, whatever its copy did
    except Exception as error:
        problems.append(f"{label}: the original no longer plays: {type(error).__name__}: {error!s:.200}")
    finally:
        for each in (twin, env):
            if each is not None:
                _closed(each, label, problems)
    return problems


def probe_group(env_id: str, arguments: dict[str, Any], seed: Any, options: Any, actions_seed: int) -> list[str]:
    """``gym.make_vec(env_id, **arguments)`` (``num_envs``, ``group_size``) then ``reset(seed, options)``
    and two steps of hostile actions: refused with a ValueError / TypeError naming the argument, or
    finite rewards and one flag per member."""
    import numpy as np

    label = f"{env_id} make_vec {arguments!r:.60} seed={seed!r:.30} options={options!r:.40}"
    envs, problems = _built(lambda: gym.make_vec(env_id, **{**base_kwargs(env_id), **arguments}), list(arguments), label)
    if envs is None:
        return problems
    rng = random.Random(actions_seed)
    try:
        try:
            envs.reset(seed=seed, options=options)
        except (ValueError, TypeError) as error:
            if not _named(error, ["seed", "option", "task_id"]):
                problems.append(f"{label}: reset refused without naming what: {error!s:.200}")
            envs.reset(seed=0)
        for _ in range(2):
            actions = [hostile_action(rng, 2_000) for _ in range(envs.num_envs)]
            _, rewards, terminated, truncated, _ = envs.step(actions)
            if len(rewards) != envs.num_envs or not np.isfinite(np.asarray(rewards, dtype=float)).all():
                problems.append(f"{label}: rewards {rewards!r:.80}")
            if len(terminated) != envs.num_envs or len(truncated) != envs.num_envs:
                problems.append(f"{label}: flags of the wrong length")
    except Exception as error:
        problems.append(f"{label}: raised {type(error).__name__}: {error!s:.200}")
    finally:
        _closed(envs, label, problems)
    return problems


def group_arguments():
    """A Hypothesis strategy for ``gym.make_vec``'s ``num_envs`` / ``group_size``: mostly a shape that
    plays (1 to 3 groups of 1 to 3), else hostile values for either."""
    from hypothesis import strategies as st

    playable = st.builds(lambda groups, size: {"num_envs": groups * size, "group_size": size},
                         st.integers(1, 3), st.integers(1, 3))
    hostile = st.fixed_dictionaries({}, optional={"num_envs": knob_values(), "group_size": knob_values()})
    return st.one_of(playable, playable, hostile)


def reset_seeds():
    """A Hypothesis strategy for a vector env's ``reset(seed=...)``: None, an integer, one per member, or hostile."""
    from hypothesis import strategies as st

    return st.one_of(st.none(), st.integers(0, 2**31), st.lists(st.integers(0, 2**31) | st.none(), max_size=9), knob_values())
