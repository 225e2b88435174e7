"""Registered environment ids: ``gym.make(id)`` for one env, ``gym.make_vec(id, ...)`` for groups.

Each env family registers its own ids from its package (a ``register()`` function named under
the ``rubricgym.envs`` entry-point group in ``pyproject.toml``; third-party packages can add
families the same way). :func:`register_family` registers a family's base id ``<Name>-v0`` and
its reward variants (``<Name>Ruler-v0``, ``<Name>Rubric-v0``, ``<Name>Function-v0``), each built
by one generic factory in :mod:`rubricgym.wrappers.variants` on top of the base env. The
registry records every variant's base id and scheme (:data:`ENVS`), so no code has to guess
them from id strings. Entry points are strings, so the kernel imports no env or wrapper.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym

#: The reward schemes a family can offer: scheme -> (id suffix, single-env factory, vector factory).
SCHEMES: dict[str, tuple[str, str, str]] = {
    "ruler": ("Ruler", "rubricgym.wrappers.variants:make_variant_env", "rubricgym.wrappers.variants:make_variant_vector_env"),
    "rubric": ("Rubric", "rubricgym.wrappers.variants:make_variant_env", "rubricgym.wrappers.variants:make_variant_vector_env"),
    "function": ("Function", "rubricgym.wrappers.variants:make_variant_env", "rubricgym.wrappers.variants:make_variant_vector_env"),
}

SCHEME_SUMMARIES = {
    "ruler": "+ RULER group judge (judge=local by default)",
    "rubric": "+ self-evolving rubrics (RLCER): the policy also writes rubrics (role 'rubricator')",
    "function": "+ a hand-written reward function",
}


@dataclass(frozen=True)
class EnvInfo:
    """One registered id: where it is built, what it is, and what it derives from."""

    id: str
    entry_point: str
    summary: str
    vector_entry_point: str | None = None
    """Where the group version is not "the group vector env of this id" (reward wrappers on top)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    base: str | None = None
    """The base env id of a reward variant (None for a base env)."""
    scheme: str | None = None
    """The reward scheme of a variant (``ruler``, ``rubric``, ``function``); None for a base env."""


#: Every registered rubricgym id, in registration order.
ENVS: dict[str, EnvInfo] = {}


class GroupVectorEntryPoint:
    """``gym.make_vec(id, num_envs=..., group_size=...)``: the group vector env of ``id``."""

    def __init__(self, env_id: str):
        self.env_id = env_id

    def __call__(self, num_envs: int = 1, group_size: int = 1, **kwargs: Any):
        import importlib

        # a string, resolved at call time: the kernel imports no wrappers
        factory = getattr(importlib.import_module("rubricgym.wrappers.group"), "make_group_vector_env")
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


def register_family(name: str, env: type | str, summary: str | None = None, **variants: dict[str, Any]) -> None:
    """Register ``<name>-v0`` (the env class, or its ``"module:Class"``) and one
    ``<name><Suffix>-v0`` per reward scheme given as a keyword (``ruler``, ``rubric``,
    ``function``) with the variant's default kwargs; users override any of them in ``gym.make``.
    The summary defaults to the first line of the class docstring.

    Example:
        >>> register_family("Demo", "rubricgym.envs.math:MathEnv", "a demo", ruler={"combine": "sum"})
        >>> ENVS["DemoRuler-v0"].base, ENVS["DemoRuler-v0"].scheme, ENVS["DemoRuler-v0"].summary
        ('Demo-v0', 'ruler', 'Demo-v0 + RULER group judge (judge=local by default); combine=sum')
    """
    base_id = f"{name}-v0"
    entry_point = env if isinstance(env, str) else f"{env.__module__}:{env.__qualname__}"
    if summary is None:
        summary = "" if isinstance(env, str) else (env.__doc__ or "").strip().splitlines()[0]
    register_env(EnvInfo(base_id, entry_point, summary))
    for scheme, defaults in variants.items():
        if scheme not in SCHEMES:
            raise ValueError(f"unknown reward scheme {scheme!r}; known: {sorted(SCHEMES)}")
        suffix, single, vector = SCHEMES[scheme]
        described = f"{base_id} {SCHEME_SUMMARIES[scheme]}"
        if "combine" in defaults:
            described += f"; combine={defaults['combine']}"
        register_env(EnvInfo(f"{name}{suffix}-v0", single, described, vector_entry_point=vector,
                             kwargs={"base_env": base_id, "scheme": scheme, **defaults}, base=base_id, scheme=scheme))


def base_env_id(env_id: str) -> str:
    """The base env of a registered id (the id itself for a base env).

    Example:
        >>> base_env_id("MathRuler-v0"), base_env_id("Math-v0")
        ('Math-v0', 'Math-v0')
    """
    info = ENVS.get(env_id)
    if info is None:
        if env_id not in gym.registry:
            raise gym.error.UnregisteredEnv(f"{env_id!r} is not a registered id; `rubricgym envs` lists them")
        return env_id
    return base_env_id(info.base) if info.base else env_id


def scheme_of(env_id: str) -> str | None:
    """The reward scheme of a registered variant id (``ruler``, ``rubric``, ``function``), else None."""
    info = ENVS.get(env_id)
    return info.scheme if info else None


def register_envs() -> None:
    """Register every family named under the ``rubricgym.envs`` entry-point group (idempotent)."""
    for entry in entry_points(group="rubricgym.envs"):
        entry.load()()
