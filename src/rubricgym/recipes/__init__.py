"""Recipes: each ``rubricgym`` command is a config dataclass plus ``run(config)``.

A recipe is importable and called by name (benchmarks do), and the command line is generated
from its config in one place (:mod:`rubricgym.app.cli`, flags by :mod:`rubricgym.app.flags`):

    >>> import rubricgym.recipes as recipes
    >>> config = recipes.parse(["eval", "--env", "WordSort-v0", "--tasks", "8"])
    >>> type(config).__name__, config.env.env, config.tasks
    ('EvalRecipe', 'WordSort-v0', 8)
    >>> recipes.parse(["bench", "--quick"]).bench.seeds     # a preset is a named config
    (0, 1, 2)

Settings several commands share are declared once, here: :class:`JudgeSettings` (``--judge``,
``--api-base``) and :class:`EnvSettings` (``--env``, ``--env-kwargs``).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable

from rubricgym.app.flags import add_config_flags, build_config, command_line, given


@dataclass
class JudgeSettings:
    """The judge of a command (the only declaration of ``--judge``)."""

    judge: str | None = None
    """The judge, or the rubric verifier of a rubric scheme: a LiteLLM model string, 'local' (the in-process
    default model), 'local:<checkpoint>' (a judge trained by rubricgym train-judge), 'oracle:<accuracy>' (simulated),
    'proxy:<url>' (rubricgym judge-proxy) or 'random'."""
    api_base: str | None = None
    """The judge's OpenAI-compatible server (with --judge openai/<name>)."""


@dataclass
class EnvSettings:
    """The env of a command (the only declaration of ``--env`` and ``--env-kwargs``)."""

    env: str = ""
    """A registered id (`rubricgym envs`); empty: the default family's base id."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """The family's knobs and the reward scheme's, as a JSON object, e.g. '{"levels": [1, 2]}' (over the family's
    training defaults; checked before the model loads)."""

    def env_id(self) -> str:
        """The id named, else the default family's."""
        from rubricgym.registration import default_env

        return self.env or default_env()


def judge_kwargs(env_id: str, settings: JudgeSettings) -> dict[str, Any]:
    """``--judge`` / ``--api-base`` as the knobs of ``env_id``'s reward scheme (RULER's ``judge``,
    the rubrics' ``verifier`` ...); an id whose scheme takes no judge refuses them."""
    from rubricgym.registration import base_env_id, scheme_of

    if not settings.judge:
        return {}
    base_env_id(env_id)  # an unknown id says so first
    scheme = scheme_of(env_id)
    if scheme is None or scheme.judge_knob is None:
        raise SystemExit(f"error: --judge applies to judged ids (e.g. {base_env_id(env_id).replace('-v0', 'Ruler-v0')}); "
                         f"{env_id} takes no judge")
    return {scheme.judge_knob: settings.judge, **({"api_base": settings.api_base} if settings.api_base else {})}


@dataclass(frozen=True)
class Recipe:
    """One command: its config class, what runs it, and how its flags are laid out."""

    name: str
    config: type
    run: Callable[[Any], int]
    help: str
    presets: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = field(default_factory=dict)
    """``--<name>``: (help, a function returning the named config's values by field path); the flags
    given go over them, and the config is made once, from both."""
    prefixes: dict[str, str] = field(default_factory=dict)
    """Flag prefixes of nested configs by field path (``{"train.grpo": "grpo_"}``)."""
    skip: tuple[str, ...] = ()
    """Field paths without a flag (set by ``run`` from other settings)."""
    positional: tuple[str, ...] = ()
    short: dict[str, str] = field(default_factory=dict)
    command: str = ""
    """The field path that records the command line run (a bench table names it), if any."""


RECIPES: dict[str, Recipe] = {}


def recipe(**kwargs: Any) -> Callable[[Callable[[Any], int]], Callable[[Any], int]]:
    """Register the decorated ``run(config)`` as the command ``name``."""
    def register(run: Callable[[Any], int]) -> Callable[[Any], int]:
        RECIPES[kwargs["name"]] = Recipe(run=run, **kwargs)
        return run
    return register


def _load() -> dict[str, Recipe]:
    from . import bench, judging, serving, training  # noqa: F401  (each registers its commands)

    return RECIPES


def parser() -> argparse.ArgumentParser:
    """The ``rubricgym`` parser: one subcommand per recipe, every flag generated from its config."""
    top = argparse.ArgumentParser(prog="rubricgym", description="Gymnasium envs and reward wrappers for LLM RL.")
    commands = top.add_subparsers(dest="command", required=True)
    for item in _load().values():
        sub = commands.add_parser(item.name, help=item.help, description=item.help)
        paths = add_config_flags(sub, item.config, skip=item.skip, prefixes=item.prefixes,
                                 positional=item.positional, short=item.short)
        if item.presets:
            named = sub.add_mutually_exclusive_group()
            for preset, (text, _) in item.presets.items():
                named.add_argument(f"--{preset}", dest="preset", action="store_const", const=preset, help=text)
        sub.set_defaults(recipe=item, paths=paths)
    return top


def parse(argv: list[str]) -> Any:
    """The config that ``rubricgym <argv>`` runs (its recipe's ``run`` takes it)."""
    args = parser().parse_args(argv)
    item, values = args.recipe, given(args, args.paths)
    preset = vars(args).get("preset")
    if item.command:  # rebuilt from what was parsed, so the recorded line is the one that gives this config
        named = f" --{preset}" if preset else ""
        values[item.command] = f"rubricgym {item.name}{named} {command_line(values, args.paths)}".strip()
    return build_config(item.config, {**(item.presets[preset][1]() if preset else {}), **values})


def run(name: str, config: Any) -> int:
    """Run the recipe ``name`` with ``config`` (what ``rubricgym <name> ...`` does)."""
    item = _load()[name]
    if not isinstance(config, item.config):
        raise TypeError(f"recipe {name!r} takes a {item.config.__name__}, got {type(config).__name__}")
    return item.run(config)


def recipe_of(config: Any) -> Recipe:
    """The recipe whose config ``config`` is."""
    return next(item for item in _load().values() if isinstance(config, item.config))
