"""The stable-baselines3 bridge: SB3's check_env, and PPO through it beats a uniform random policy."""

import gymnasium as gym
import numpy as np
import pytest
from conftest import require  # noqa: E402

import rubricgym  # noqa: F401
from rubricgym.envs.math import math_candidates
from rubricgym.envs.tools import tooluse_candidates
from rubricgym.wrappers import CandidateActions, hashed_features

sb3 = require("stable_baselines3", "sb3")


def tooluse(split):
    return CandidateActions(gym.make("ToolUse-v0", split=split, max_turns=3, disable_env_checker=True),
                            tooluse_candidates, k=6)


def test_sb3_check_env_for_tooluse_and_math():
    from stable_baselines3.common.env_checker import check_env

    check_env(tooluse("train"))
    check_env(CandidateActions(gym.make("Math-v0", levels=(2,), disable_env_checker=True), math_candidates, k=6))


def test_hashed_features_are_stable_and_normalised():
    a, b = hashed_features("cancel my order 1042"), hashed_features("cancel my order 1042")
    assert np.array_equal(a, b) and a.dtype == np.float32 and np.linalg.norm(a) == pytest.approx(1.0)
    assert not np.array_equal(a, hashed_features("refund my order 1042"))


def held_out_return(env, choose, seed):
    rng = np.random.default_rng(seed)
    total = 0.0
    for task in env.unwrapped.tasks:
        obs, _ = env.reset(options={"task_id": task.id})
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(choose(obs, rng))
            done = terminated or truncated
        total += reward
    return total / len(env.unwrapped.tasks)


@pytest.mark.slow
def test_ppo_through_the_bridge_beats_random_on_held_out_tasks():
    from stable_baselines3 import PPO

    test_env = tooluse("test")
    random_score = held_out_return(test_env, lambda obs, rng: int(rng.integers(6)), seed=0)
    model = PPO("MlpPolicy", tooluse("train"), seed=0, n_steps=256, batch_size=64, learning_rate=1e-3, verbose=0)
    model.learn(5_000)
    ppo_score = held_out_return(test_env, lambda obs, rng: int(model.predict(obs, deterministic=True)[0]), seed=0)
    print(f"\nheld-out mean reward over 70 test tasks: PPO {ppo_score:.3f}, uniform random {random_score:.3f} (seeds 0)")
    assert ppo_score >= random_score + 0.3
