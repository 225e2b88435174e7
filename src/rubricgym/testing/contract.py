"""The family contract as checks: what every registered env family must do, written once.

``tests/test_family_contract.py`` runs every check in :data:`CHECKS` over every family in the
registry (:func:`family_ids`), so a family registered in one line gets all of them; the same test
file defines a throwaway family inside a test and runs them on it, with no other file changed.

Each check takes the base id and a :class:`ContractRun` (a scratch folder and the tiny test
model) and raises ``AssertionError`` naming what broke. The checks use the family's training
knobs (``TrainingDefaults.env_kwargs``), the actions of :func:`script` (a call of the family's
first tool, then a final reply: every family answers both), and the oracle judge for the judged
variant, so no check needs a network or a model server.

Examples:
    >>> import rubricgym
    >>> "WordSort-v0" in family_ids() and "OpenEnv-v0" not in family_ids()
    True
    >>> sorted(CHECKS)[:3]
    ['bad_actions', 'check_env', 'close_and_copy']
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import gymnasium as gym
import numpy as np

from rubricgym.registration import ENVS, family_class, register_family, training_kwargs


@dataclass
class ContractRun:
    """What a check may use besides the env id."""

    workdir: Path
    """A scratch folder of its own (training output)."""
    model: str
    """The tiny test model's folder (:mod:`rubricgym.testing.tiny`)."""


def family_ids() -> list[str]:
    """Every registered base id whose env is a :class:`~rubricgym.chatenv.ChatEnv`, in registration
    order (a plain ``gym.Env`` such as ``OpenEnv-v0`` has no family hooks)."""
    return [env_id for env_id, info in ENVS.items() if info.base is None and family_class(env_id) is not None]


def judged_variant(env_id: str, scheme: str = "ruler") -> str | None:
    """The registered ``scheme`` variant of the base id ``env_id``, or None."""
    return next((i for i, info in ENVS.items() if info.base == env_id and info.scheme == scheme), None)


def contract_kwargs(env_id: str) -> dict[str, Any]:
    """The knobs the checks build ``env_id`` with: the family's training knobs."""
    return training_kwargs(env_id, {})


def script(env: gym.Env) -> list[str]:
    """Two actions any family answers: a call of its first tool with no arguments (the tool's own
    error, or the answer where calls are the answer), then a final reply."""
    tools = [schema["function"]["name"] for schema in env.unwrapped.tool_schemas]
    first = f'<tool_call>{{"name": "{tools[0]}", "arguments": {{}}}}</tool_call>' if tools else "Let me think."
    return [first, 'The answer is \\boxed{3}. {"scores": {"A": 1, "B": 0}}']


def play(env: gym.Env, seed: int, actions: list[str]) -> list[Any]:
    """Everything an episode shows (observations, rewards, flags, components, the episode result),
    from ``reset(seed=seed)`` through ``actions`` or the episode's end."""
    obs, info = env.reset(seed=seed)
    steps: list[Any] = [("reset", [(m["role"], m.get("content")) for m in obs], info["task_id"])]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((reward, terminated, truncated, info.get("reward_components"),
                      [(m["role"], m.get("content")) for m in obs]))
        if terminated or truncated:
            steps.append(info["episode"].model_dump(exclude={"metadata"}))
            break
    return steps


def check_env_api(env_id: str, run: ContractRun) -> None:
    """Gymnasium's own ``check_env`` on the env and on its ``gym.make`` wrapping."""
    from gymnasium.utils.env_checker import check_env

    env = gym.make(env_id, **contract_kwargs(env_id))
    check_env(env.unwrapped)
    check_env(env, skip_render_check=True)
    env.close()


def check_seeded_replay(env_id: str, run: ContractRun) -> None:
    """The same seed and actions give the same episode in two envs, and an episode ends with a
    typed result whose reward is the last step's."""
    first, second = (gym.make(env_id, **contract_kwargs(env_id)) for _ in range(2))
    actions = script(first)
    for seed in (0, 1, 2):
        one, two = play(first, seed, actions), play(second, seed, actions)
        assert one == two, f"{env_id}: seed {seed} played twice differs"
    # the last reply ends the episode at the latest: a turn limit, a final answer or its error
    obs, _ = first.reset(seed=3)
    for action in actions * first.unwrapped.max_turns:
        obs, reward, terminated, truncated, info = first.step(action)
        if terminated or truncated:
            break
    assert terminated or truncated, f"{env_id}: not over after {first.unwrapped.max_turns} turns"
    assert info["episode"].reward == reward and isinstance(reward, float)
    first.close()
    second.close()


def check_bad_actions(env_id: str, run: ContractRun) -> None:
    """A wrong-typed or over-long action is answered with an error, never an exception; stepping an
    ended episode says so."""
    env = gym.make(env_id, **contract_kwargs(env_id))
    limit = env.unwrapped.max_action_chars
    for bad in (None, 7, b"bytes", {"role": "user", "content": "x"}, "x" * (limit + 1)):
        env.reset(seed=0)
        _, reward, terminated, truncated, info = env.step(bad)
        assert info.get("error"), f"{env_id}: {type(bad).__name__} action accepted silently"
        assert np.isfinite(reward)
    env.reset(seed=0)
    done = False
    for action in script(env) * env.unwrapped.max_turns:
        *_, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            done = True
            break
    assert done
    _, reward, terminated, _, info = env.step("again")
    assert (reward, terminated, info.get("episode_ended")) == (0.0, True, True)
    env.close()


def _play_group(envs: Any, env_id: str) -> dict[str, Any]:
    """Every member plays :func:`script` to the end; the info of the step that ended them all."""
    single = gym.make(env_id, **contract_kwargs(env_id))
    actions, turns = script(single), single.unwrapped.max_turns
    single.close()
    for turn in range(turns):
        _, _, terminated, truncated, info = envs.step([actions[min(turn, len(actions) - 1)]] * envs.num_envs)
        if np.all(np.asarray(terminated) | np.asarray(truncated)):
            return info
    raise AssertionError(f"{env_id}: the group did not end within {turns} turns")


def check_close_and_copy(env_id: str, run: ContractRun) -> None:
    """``copy.deepcopy(env)`` mid-episode is independent (the same next step; closing the copy leaves
    the original working); after ``close()`` a step is answered as after the end, ``reset()`` starts
    again, and closing twice is harmless."""
    import copy

    env = gym.make(env_id, **contract_kwargs(env_id)).unwrapped
    env.reset(seed=0)
    twin = copy.deepcopy(env)
    action = script(env)[0]
    one, two = env.step(action), twin.step(action)
    assert (one[0], one[1:4]) == (two[0], two[1:4]), f"{env_id}: a deep copy steps differently"
    twin.close()
    env.reset(seed=1)
    env.step(action)  # the original still works after its copy is closed
    env.close()
    _, reward, terminated, _, info = env.step(action)
    assert (reward, terminated, info.get("episode_ended")) == (0.0, True, True), f"{env_id}: a step after close()"
    fresh = gym.make(env_id, **contract_kwargs(env_id)).unwrapped
    fresh.reset(seed=2)
    actions = script(fresh)  # (a family's tools may follow the task)
    assert play(env, 2, actions) == play(fresh, 2, actions), f"{env_id}: reset() after close() differs from a new env"
    fresh.close()
    env.close()


def check_group_env(env_id: str, run: ContractRun) -> None:
    """``gym.make_vec(id, num_envs=4, group_size=2)``: members of a group share the task; every
    member's trajectory comes back when its group ends, with its episode result."""
    envs = gym.make_vec(env_id, num_envs=4, group_size=2, **contract_kwargs(env_id))
    _, info = envs.reset(seed=0)
    ids = list(info["task_id"])
    assert ids[0] == ids[1] and ids[2] == ids[3], f"{env_id}: group members got different tasks {ids}"
    trajectories = list(_play_group(envs, env_id)["trajectory"])
    assert [t.task_id for t in trajectories] == ids
    assert all(t.episode is not None and t.episode.task_id == t.task_id for t in trajectories)
    envs.close()


def check_judged_variant(env_id: str, run: ContractRun) -> None:
    """The family's RULER variant scores a group with the oracle judge: a ``ruler`` component for
    every member."""
    variant = judged_variant(env_id)
    assert variant is not None, f"{env_id} has no RULER variant (a family registered with derived=False has none)"
    envs = gym.make_vec(variant, num_envs=2, group_size=2, judge="oracle:1.0", **contract_kwargs(env_id))
    envs.reset(seed=0)
    components = _play_group(envs, env_id)["reward_components"]
    assert "ruler" in components and np.all(np.isfinite(components["ruler"])), f"{variant}: {components}"
    envs.close()


def check_serve_round_trip(env_id: str, run: ContractRun) -> None:
    """Served over OpenEnv's protocol on loopback, the env plays seeds 0-1 exactly as in process."""
    from rubricgym.openenv.server import make_app, serve_in_thread

    kwargs = contract_kwargs(env_id)
    local = gym.make(env_id, **kwargs)
    actions = script(local)
    with serve_in_thread(make_app(env_id, max_sessions=2, **kwargs)) as url:
        served = gym.make("OpenEnv-v0", url=url)
        try:
            for seed in (0, 1):
                assert play(served, seed, actions) == play(local, seed, actions), f"{env_id}: served seed {seed} differs"
        finally:
            served.close()
    local.close()


def check_train_then_eval_held_out(env_id: str, run: ContractRun) -> None:
    """``rubricgym train --env ID --steps 1`` on the tiny model writes metrics with held-out
    accuracy before and after, and ``rubricgym eval`` reads its checkpoint."""
    import json

    from rubricgym.app.cli import main

    out = run.workdir / f"train-{env_id}"
    small = ["--group-size", "2", "--groups-per-step", "1", "--max-new-tokens", "12", "--report-to", "none",
             "--record-groups", "0", "--model", run.model]
    assert main(["train", "--env", env_id, "--steps", "1", "--eval-tasks", "2", "--output-dir", str(out), *small]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "eval_accuracy" in r] == [0, 1], f"{env_id}: held-out evals {rows}"
    assert any("reward" in r for r in rows)
    assert main(["eval", "--env", env_id, "--checkpoint", str(out / "checkpoint-1"), "--tasks", "2",
                 "--max-new-tokens", "12", "--model", run.model]) == 0


#: every check of the contract, by name
CHECKS: dict[str, Callable[[str, ContractRun], None]] = {
    "check_env": check_env_api,
    "seeded_replay": check_seeded_replay,
    "bad_actions": check_bad_actions,
    "close_and_copy": check_close_and_copy,
    "group_env": check_group_env,
    "judged_variant": check_judged_variant,
    "serve_round_trip": check_serve_round_trip,
    "train_then_eval_held_out": check_train_then_eval_held_out,
}


def checks_for(env_id: str) -> list[str]:
    """The names of the checks that apply to ``env_id``: all of them, except the judged variant's
    for a family that registers none (``JudgeGroup-v0``: its task is to be the judge)."""
    return [name for name in CHECKS if name != "judged_variant" or judged_variant(env_id) is not None]


@contextlib.contextmanager
def registered(name: str, env: type, **variants: Any) -> Iterator[list[str]]:
    """Register the family ``name`` for the duration of a ``with`` block (a test's throwaway
    family), then remove its ids from rubricgym's and Gymnasium's registries."""
    before = set(ENVS)
    register_family(name, env, **variants)
    added = [env_id for env_id in ENVS if env_id not in before]
    try:
        yield added
    finally:
        for env_id in added:
            ENVS.pop(env_id, None)
            gym.registry.pop(env_id, None)
