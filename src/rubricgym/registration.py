"""Registered environment ids: ``gym.make(id)`` for one env, ``gym.make_vec(id, ...)`` for groups.

Two entry-point groups fill the registry, so the kernel names no family, scheme or wrapper:

* ``rubricgym.schemes``: one reward-scheme object each (``name``, ``suffix``, ``summary``,
  ``derive(env_class)``, ``make_env`` and ``make_vector_env``; :class:`rubricgym.wrappers.scheme.RewardScheme`);
* ``rubricgym.envs``: one ``register()`` function per env family, which calls
  :func:`register_family`. A family gets ``<Name>-v0`` and one ``<Name><Suffix>-v0`` per scheme
  it names (with its own defaults for that scheme) or that the scheme derives for every family
  it fits (RULER fits every family).

``rubricgym.vector`` names the factory of the group vector env (``gym.make_vec``). Third-party
packages add families and schemes the same way. The registry records every variant's base id
and scheme (:data:`ENVS`), so no code guesses them from id strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym

#: Registered reward schemes by name (filled from the ``rubricgym.schemes`` entry points).
SCHEMES: dict[str, Any] = {}


@dataclass(frozen=True)
class EnvInfo:
    """One registered id: where it is built, what it is, and what it derives from."""

    id: str
    entry_point: Any
    summary: str
    vector_entry_point: Any = None
    """Where the group version is not "the group vector env of this id" (reward wrappers on top)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    base: str | None = None
    """The base env id of a reward variant (None for a base env)."""
    scheme: str | None = None
    """The reward scheme's name of a variant; None for a base env."""


#: Every registered rubricgym id, in registration order.
ENVS: dict[str, EnvInfo] = {}

_DEFAULT: list[str] = []


class GroupVectorEntryPoint:
    """``gym.make_vec(id, num_envs=..., group_size=...)``: the group vector env of ``id`` (the
    factory named under the ``rubricgym.vector`` entry point)."""

    def __init__(self, env_id: str):
        self.env_id = env_id

    def __call__(self, num_envs: int = 1, group_size: int = 1, **kwargs: Any):
        factory = next(iter(entry_points(group="rubricgym.vector"))).load()
        return factory(self.env_id, num_envs=num_envs, group_size=group_size, **kwargs)

    def __repr__(self) -> str:
        return f"GroupVectorEntryPoint({self.env_id!r})"


def register_env(info: EnvInfo) -> None:
    """Record ``info`` and register it with Gymnasium (idempotent)."""
    ENVS[info.id] = info
    if info.id in gym.registry:
        return
    gym.register(id=info.id, entry_point=info.entry_point,
                 vector_entry_point=info.vector_entry_point or GroupVectorEntryPoint(info.id), kwargs=dict(info.kwargs))


def register_scheme(scheme: Any) -> None:
    """Add a reward scheme (an object with ``name``, ``suffix``, ``summary``, ``derive``,
    ``make_env`` and ``make_vector_env``); families registered afterwards get its variants."""
    SCHEMES[scheme.name] = scheme


def _env_class(env: type | str) -> type:
    if isinstance(env, str):
        from gymnasium.envs.registration import load_env_creator

        return load_env_creator(env)
    return env


def default_env() -> str:
    """The base id that runs use when they name none (the family registered with ``default=True``)."""
    if not _DEFAULT:
        raise LookupError("no env family is registered as the default; name an id")
    return _DEFAULT[0]


def register_family(name: str, env: type | str, summary: str | None = None, default: bool = False,
                    derived: bool = True, **variants: dict[str, Any]) -> None:
    """Register ``<name>-v0`` (the env class, or its ``"module:Class"``) and its reward variants:
    one ``<name><Suffix>-v0`` per scheme named as a keyword (its value: the family's defaults for
    that scheme's knobs) and per scheme that derives itself for this env class. Users override any
    default in ``gym.make``. The summary defaults to the first line of the class docstring;
    ``default=True`` makes ``<name>-v0`` the id of runs that name none; ``derived=False`` adds
    only the variants named (no scheme derives itself for this family).

    Examples:
        >>> import rubricgym
        >>> register_family("Demo", "rubricgym.envs.math:MathEnv", "a demo", ruler={"combine": "replace"})
        >>> ENVS["DemoRuler-v0"].base, ENVS["DemoRuler-v0"].scheme, ENVS["DemoRuler-v0"].kwargs["combine"]
        ('Demo-v0', 'ruler', 'replace')
        >>> for env_id in [i for i in ENVS if i.startswith("Demo")]:  # the example's family leaves no trace
        ...     _ = ENVS.pop(env_id), gym.registry.pop(env_id, None)
    """
    base_id = f"{name}-v0"
    # a class given is its own entry point (a class defined in a script or notebook has no import path)
    entry_point = env
    env_class = _env_class(env)
    if summary is None:
        summary = (env_class.__doc__ or "").strip().splitlines()[0] if env_class.__doc__ else ""
    register_env(EnvInfo(base_id, entry_point, summary))
    if default and base_id not in _DEFAULT:
        _DEFAULT.insert(0, base_id)
    unknown = set(variants) - set(SCHEMES)
    if unknown:
        raise ValueError(f"unknown reward scheme(s) {sorted(unknown)}; registered: {sorted(SCHEMES)}")
    for scheme in SCHEMES.values():
        if scheme.name not in variants and not (derived and scheme.derive(env_class)):
            continue
        defaults = variants.get(scheme.name) or {}
        described = f"{base_id} + {scheme.summary}"
        if "combine" in defaults:
            described += f"; combine={defaults['combine']}"
        register_env(EnvInfo(f"{name}{scheme.suffix}-v0", scheme.make_env, described,
                             vector_entry_point=scheme.make_vector_env, kwargs={"base_env": base_id, **defaults},
                             base=base_id, scheme=scheme.name))


def base_env_id(env_id: str) -> str:
    """The base env of a registered id (the id itself for a base env).

    Examples:
        >>> base_env_id("MathRuler-v0"), base_env_id("Math-v0")
        ('Math-v0', 'Math-v0')
    """
    info = ENVS.get(env_id)
    if info is None:
        if env_id not in gym.registry:
            raise gym.error.UnregisteredEnv(f"{env_id!r} is not a registered id; `rubricgym envs` lists them")
        return env_id
    return base_env_id(info.base) if info.base else env_id


def scheme_of(env_id: str) -> Any:
    """The reward scheme object of a registered variant id, else None.

    Examples:
        >>> scheme_of("MathRuler-v0").name, scheme_of("Math-v0")
        ('ruler', None)
    """
    info = ENVS.get(env_id)
    return SCHEMES.get(info.scheme) if info and info.scheme else None


def env_class(env_id: str) -> type:
    """The env class behind a registered id (its base env's class for a variant)."""
    return _env_class(gym.spec(base_env_id(env_id)).entry_point)


def family_class(env_id: str) -> type | None:
    """The :class:`~rubricgym.chatenv.ChatEnv` class behind ``env_id``, or None for an env of
    another kind (``OpenEnv-v0``, a plugin's plain ``gym.Env``), which has none of the family hooks."""
    from rubricgym.chatenv import ChatEnv

    cls = env_class(env_id)
    return cls if isinstance(cls, type) and issubclass(cls, ChatEnv) else None


def _family_defaults(env_id: str):
    cls = family_class(env_id)
    return cls.training if cls is not None else None


def split_kwargs(env_id: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the base env's kwargs, every other kwarg of the run: the scheme's knobs and its one-env
    settings such as ``history_size``), split by the id's scheme (:meth:`RewardScheme.split` copies)."""
    scheme = scheme_of(env_id)
    if scheme is None:
        return dict(kwargs), {}
    env_kwargs, _, _ = scheme.split(kwargs)
    return env_kwargs, {k: v for k, v in kwargs.items() if k not in env_kwargs}


def training_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A run's kwargs on ``env_id`` over its family's training defaults.

    Examples:
        >>> import rubricgym
        >>> training_kwargs("MathRuler-v0", {"judge": "oracle:1.0"})
        {'levels': (1,), 'judge': 'oracle:1.0'}
    """
    defaults = _family_defaults(env_id)
    return {**(defaults.env_kwargs if defaults else {}), **kwargs}


def held_out(env_id: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The base id and kwargs that measure held-out success of a run on ``env_id`` with ``kwargs``:
    the base env (its verified success, no judge) on the family's held-out tasks.

    Examples:
        >>> import rubricgym
        >>> held_out("MathRuler-v0", {"levels": (1,), "judge": "oracle:1.0"})
        ('Math-v0', {'levels': (1,), 'split': 'test'})
    """
    env_kwargs, _ = split_kwargs(env_id, training_kwargs(env_id, kwargs))
    cls = family_class(env_id)
    return base_env_id(env_id), cls.held_out_kwargs(env_kwargs) if cls is not None else env_kwargs


CORRECTION_KNOB = "correction"
"""The knob of a judged scheme that takes a judge's calibrated error profile (RULER's)."""


def with_judge_correction(env_id: str, kwargs: dict[str, Any], profile: str) -> dict[str, Any]:
    """``kwargs`` with the judge correction of the profile file ``profile`` (``--judge-correction``);
    refused for an env whose scheme has no judge to correct, and for a missing or unusable profile.

    Examples:
        >>> with_judge_correction("Math-v0", {}, "judge_profile.json")
        Traceback (most recent call last):
        ...
        ValueError: --judge-correction corrects a judge's scores: Math-v0 has none (use a RULER variant such as MathRuler-v0)
    """
    from rubricgym.judges.correction import JudgeCorrection

    scheme = scheme_of(env_id)
    if scheme is None or CORRECTION_KNOB not in scheme.knobs:
        raise ValueError(f"--judge-correction corrects a judge's scores: {env_id} has none "
                         f"(use a RULER variant such as {base_env_id(env_id).removesuffix('-v0')}Ruler-v0)")
    JudgeCorrection.load(profile)
    return {**kwargs, CORRECTION_KNOB: profile}


def check_env_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    """Refuse an unknown id, unknown or invalid family knobs, or a scheme knob the scheme lacks,
    with the family's own message: a run calls this before it loads a model."""
    env_kwargs, _ = split_kwargs(env_id, kwargs)
    cls = family_class(env_id)
    if cls is not None:
        cls.check_kwargs(env_kwargs)


def _load_plugin(entry: Any) -> Any:
    """An entry point's object, or None with a warning when it fails: a broken plugin of another
    package must not break ``import rubricgym`` (its ids are missing, and the warning says why)."""
    try:
        return entry.load()
    except Exception as error:  # any import-time failure of someone else's package
        import warnings

        warnings.warn(f"rubricgym: entry point {entry.name!r} ({entry.value}, group {entry.group}) failed to load "
                      f"and is skipped: {type(error).__name__}: {error}", RuntimeWarning, stacklevel=3)
        return None


def register_envs() -> None:
    """Register every scheme, then every family, named under the entry points (idempotent); an
    entry point that fails to load (or whose ``register()`` raises) warns and is skipped."""
    for entry in entry_points(group="rubricgym.schemes"):
        scheme = _load_plugin(entry)
        if scheme is not None:
            register_scheme(scheme)
    for entry in entry_points(group="rubricgym.envs"):
        register = _load_plugin(entry)
        if register is None:
            continue
        try:
            register()
        except Exception as error:
            import warnings

            warnings.warn(f"rubricgym: the register() of entry point {entry.name!r} ({entry.value}) raised and its ids "
                          f"are skipped: {type(error).__name__}: {error}", RuntimeWarning, stacklevel=2)
