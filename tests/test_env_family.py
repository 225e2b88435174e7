"""The redesign's contract: a new env family is one file; every env reports a typed episode
result; every variant id knows its base env and scheme."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rubricgym
from rubricgym.chatenv import ENDED, TURN_LIMIT
from rubricgym.records import EpisodeResult
from rubricgym.registration import base_env_id, scheme_of

from judges import reply_scores, scripted_judge

SORTED = re.compile(r"Sort these words alphabetically: (.*)")


def solve(obs) -> str:
    words = SORTED.search(obs[-1]["content"]).group(1).split(", ")
    return ", ".join(sorted(words))


def keyword_verifier():
    """Rubric verifier double: an item is satisfied when its first capitalised word is in the response."""
    def script(messages, i):
        prompt = messages[1]["content"]
        response = prompt.split("Response:\n", 1)[1].split("\n\nRubric items:", 1)[0]
        items = prompt.split("Rubric items:\n", 1)[1].splitlines()
        return json.dumps({"satisfied": ["yes" if re.search(r"[A-Z]{3,}", it) and re.search(r"[A-Z]{3,}", it).group(0)
                                          in response else "no" for it in items]})
    return scripted_judge(script)


RUBRIC = json.dumps({"items": [{"description": "lists them as SORTED words", "score": 2},
                               {"description": "adds CHATTER around the list", "score": -1}]})


def test_example_family_ids_are_registered_with_their_base_and_scheme():
    assert {"WordSort-v0", "WordSortRuler-v0", "WordSortRubric-v0"} <= set(rubricgym.ENVS) <= set(gym.registry)
    assert [base_env_id(i) for i in ("WordSort-v0", "WordSortRuler-v0", "WordSortRubric-v0")] == ["WordSort-v0"] * 3
    assert [getattr(scheme_of(i), "name", None) for i in ("WordSort-v0", "WordSortRuler-v0", "WordSortRubric-v0")] == [
        None, "ruler", "rubric"]
    with pytest.raises(gym.error.UnregisteredEnv, match="rubricgym envs"):
        base_env_id("WordSort-v9")


@pytest.mark.parametrize("env_id", ["WordSort-v0", "WordSortRuler-v0", "WordSortRubric-v0"])
def test_example_family_passes_check_env(env_id):
    judge, _ = scripted_judge()
    verifier, _ = keyword_verifier()
    kwargs = {"WordSortRuler-v0": {"judge": judge}, "WordSortRubric-v0": {"verifier": verifier}}.get(env_id, {})
    env = gym.make(env_id, **kwargs)
    check_env(env.unwrapped)
    check_env(env, skip_render_check=True)


def test_example_family_base_env_scores_and_reports_the_episode():
    env = gym.make("WordSort-v0", split="test")
    obs, info = env.reset(seed=3)
    assert "answer" not in info and "reference" not in info  # nothing the agent could copy
    obs, reward, terminated, truncated, info = env.step(solve(obs))
    episode = info["episode"]
    assert isinstance(episode, EpisodeResult) and (reward, terminated, truncated) == (1.0, True, False)
    assert episode.correct and episode.reference == solve(obs[:2]) and episode.task.startswith("Sort these words")
    assert episode.specification == obs[0]["content"] and episode.reward_components == {"outcome": 1.0, "position": 1.0}
    _, reward, terminated, _, info = env.step("again")
    assert (reward, terminated, info["error"], info["episode_ended"]) == (0.0, True, ENDED, True) and "episode" not in info
    env.reset(seed=3)
    _, reward, _, _, info = env.step(12345)  # wrong type: an error, the episode ends unanswered
    assert reward == -1.0 and "got int" in info["error"] and info["episode"].answer is None


def test_example_family_ruler_variant_in_the_group_vector_env():
    judge, backend = scripted_judge(lambda m, i: reply_scores(m, scorer=lambda body: 0.9 if "quality=high" in body else 0.2))
    envs = gym.make_vec("WordSortRuler-v0", num_envs=4, group_size=2, judge=judge)
    obs, info = envs.reset(seed=0)
    assert info["task_id"][0] == info["task_id"][1] and info["task_id"][2] == info["task_id"][3]
    actions = [solve(obs[0]) + " quality=high", "no idea", solve(obs[2]), solve(obs[3]) + " quality=high"]
    _, rewards, terminated, _, info = envs.step(actions)
    assert terminated.all() and len(backend.requests) == 2  # one judge call per group
    # combine = sum: outcome (+1 / -1) + RULER score
    assert list(rewards) == pytest.approx([1.9, -0.8, 1.2, 1.9])
    assert list(info["reward_components"]["ruler"]) == pytest.approx([0.9, 0.2, 0.2, 0.9])
    assert [t.reward for t in info["trajectory"]] == pytest.approx(list(rewards))
    assert all(t.episode is not None and t.episode.task_id == t.task_id for t in info["trajectory"])


def test_example_family_rubric_variant_in_the_group_vector_env():
    verifier, backend = keyword_verifier()
    envs = gym.make_vec("WordSortRubric-v0", num_envs=4, group_size=4, verifier=verifier)
    obs, info = envs.reset(seed=1)
    answer = solve(obs[0])
    obs, rewards, terminated, _, info = envs.step([f"SORTED {answer}", f"SORTED {answer}", "CHATTER wrong", "wrong"])
    assert not terminated.any() and all(o[0]["content"].startswith("You write grading rubrics") for o in obs)
    assert "a response to a task" not in obs[0][0]["content"] and "Task:\nSort these words" in obs[0][1]["content"]
    _, rewards, terminated, _, info = envs.step([RUBRIC] * 4)
    # the group's distinct items are verified together, once per distinct response (two are the same)
    assert terminated.all() and len(backend.requests) == 3
    # SORTED [1,1,0,0] tracks correctness (valid); CHATTER [0,0,1,0] does not: CoT reward = [1, 1, 0, 0]
    assert list(info["reward_components"]["cot"]) == pytest.approx([1, 1, 0, 0])
    assert list(info["role_rewards_reasoner"]) == pytest.approx([2, 2, -1, -1])
    assert list(info["role_rewards_rubricator"]) == pytest.approx([1.5] * 4)  # 1 valid of 2 items + format 1


@pytest.mark.parametrize("env_id,kwargs", [("Math-v0", {"levels": (1,)}), ("Math-v0", {"tools": ["calculator"]}),
                                            ("RagSupport-v0", {}), ("RagSupport-v0", {"mode": "agentic"}),
                                            ("ToolUse-v0", {}), ("WordSort-v0", {})])
def test_every_env_shares_one_message_per_situation(env_id, kwargs):
    env = gym.make(env_id, **kwargs).unwrapped
    obs, info = env.reset(seed=0)
    assert env.action_space.max_length == env.max_action_chars  # the action limit is the space's
    too_long = "x" * (env.max_action_chars + 1)
    assert not env.action_space.contains(too_long)
    for _ in range(env.max_turns):
        obs, reward, terminated, truncated, info = env.step(too_long if env.max_turns == 1 else
                                                            '<tool_call>{"name": "nope", "arguments": {}}</tool_call>')
    assert terminated or truncated
    if env.max_turns > 1:
        assert truncated and info["error"] == TURN_LIMIT and info["episode"].truncated
    else:
        assert "over the limit" in info["error"] and info["episode"].answer is None
    assert env.step("late")[4]["error"] == ENDED
    assert isinstance(info["episode"], EpisodeResult) and info["episode"].specification == obs[0]["content"]
    np.testing.assert_equal(info["episode"].reward, reward)
