"""RLCER rewards: a worked example computed by hand, degenerate cases, the env loop."""

import json
import re

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rubricgym  # noqa: F401
from rubricgym.judges.rlcer import (RubricItem, RubricSet, parse_rubric, rlcer_rewards)

from judges import gold, scripted_judge

PHI = 0.125 / (np.sqrt(0.75 * 0.25) * 0.5)  # corr of [1,1,1,0] (or [1,0,0,0]) with [1,1,0,0] = 0.577


def item(description, score):
    return RubricItem(description=description, score=score)


def worked_sets():
    a = RubricSet([item("states the formula", 2), item("checks the answer", 1), item("guesses without work", -2),
                   item("uses more than three steps", -1)], format_ok=True, author=0)
    a.satisfaction = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 1, 1], [1, 1, 1, 0]])
    b = RubricSet([item("verifies by substitution", 3), item("writes units", 1)], format_ok=True, author=2)
    b.satisfaction = np.array([[1, 0, 0, 0], [1, 1, 1, 1]])
    c = RubricSet([], format_ok=False, author=3)
    return [a, b, c]


def test_worked_example_by_hand():
    result = rlcer_rewards(worked_sets(), correct=[True, True, False, False], outcomes=[1, 1, -1, -1], alpha=0.2)
    # validity: a1 corr 1 (valid); a2 corr 0; a3 corr -1 (a penalty that tracks wrong answers is NOT valid
    # under the paper's rule); a4 corr 0.577 (valid, negative weight); b1 corr 0.577 (valid); b2 constant.
    assert [list(v) for v in result.valid] == [[True, False, False, True], [True, False], []]
    assert result.correlations[0] == pytest.approx([1.0, 0.0, -1.0, PHI])
    assert np.isnan(result.correlations[1][1])
    # valid pooled weights: +2, -1, +3 -> W_min = -1, W_max = 5
    # raw sums: n0 = 2 - 1 + 3 = 4, n1 = 2 - 1 = 1, n2 = -1, n3 = 0 -> (raw + 1) / 6
    assert result.cot_rewards == pytest.approx([5 / 6, 2 / 6, 0.0, 1 / 6])
    assert result.reasoner_rewards == pytest.approx([1 + 5 / 6, 1 + 2 / 6, -1.0, -1 + 1 / 6])
    # rubricator: a = 2/4 valid + format 1; b = 1/2 + 1; c = no items, format 0
    assert result.rubricator_rewards == pytest.approx([1.5, 1.5, 0.0])
    assert result.stats["valid_fraction"] == pytest.approx(3 / 6)
    assert result.stats["mean_valid_corr"] == pytest.approx((1 + 2 * PHI) / 3)
    assert result.stats["mean_cot_reward"] == pytest.approx((5 / 6 + 2 / 6 + 1 / 6) / 4)
    assert result.stats["num_items"] == 6 and not result.degenerate


def test_signed_validity_option_counts_penalties_that_track_wrong_answers():
    result = rlcer_rewards(worked_sets(), [True, True, False, False], [1, 1, -1, -1], signed_validity=True)
    # a3 (-2, corr -1) becomes valid, a4 (-1, corr +0.577) becomes invalid
    assert [list(v) for v in result.valid][0] == [True, False, True, False]
    # valid: +2 [1,1,0,0], -2 [0,0,1,1], +3 [1,0,0,0] -> W_min -2, W_max 5; raw 5, 2, -2, -2
    assert result.cot_rewards == pytest.approx([1.0, 4 / 7, 0.0, 0.0])


@pytest.mark.parametrize("correct", [[True] * 4, [False] * 4])
def test_all_right_or_all_wrong_is_degenerate(correct):
    outcomes = [1.0 if c else -1.0 for c in correct]
    result = rlcer_rewards(worked_sets(), correct, outcomes)
    assert result.degenerate and result.stats["degenerate"] == 1.0
    assert not any(v.any() for v in result.valid)
    assert list(result.cot_rewards) == [0, 0, 0, 0] and list(result.reasoner_rewards) == outcomes
    assert result.rubricator_rewards == [1.0, 1.0, 0.0]  # format only


def test_empty_and_invalid_rubrics_score_format_zero():
    assert parse_rubric('{"items": []}')[0] is None
    assert parse_rubric("not json at all")[0] is None
    assert parse_rubric('{"items": [{"description": "x", "score": 1}]}')[0] is None  # too short to check
    rubric, _ = parse_rubric('Here: [{"description": "names the unknown", "score": "2"}]')
    assert rubric.items[0].score == 2.0
    result = rlcer_rewards([RubricSet([], False)], [True, False], [1, -1])
    assert result.rubricator_rewards == [0.0] and list(result.cot_rewards) == [0, 0]


def test_unknown_verdicts_are_left_out_of_the_correlation():
    rubric = RubricSet([item("states the formula", 1)], format_ok=True)
    rubric.satisfaction = np.array([[1, -1, 0, 0]])  # rollout 1's check failed
    result = rlcer_rewards([rubric], [True, True, False, False], [1, 1, -1, -1])
    assert result.valid[0][0] and result.correlations[0][0] == pytest.approx(1.0)
    assert result.cot_rewards == pytest.approx([1.0, 0.0, 0.0, 0.0])  # unknown counts as unsatisfied


# ---------------------------------------------------------------------------------------------
# Through the env loop, with a scripted verifier (satisfied when the item's KEYWORD is in the solution)

KEYWORD = re.compile(r"\b([A-Z]{4,})\b")


def keyword_verifier(fail_on: str | None = None):
    def script(messages, call_index):
        prompt = messages[1]["content"]
        solution = prompt.split("Response:\n", 1)[1].split("\n\nRubric items:", 1)[0]
        if fail_on and fail_on in solution:
            return "garbage, no json"
        items = prompt.split("Rubric items:\n", 1)[1].splitlines()
        return json.dumps({"satisfied": [bool(KEYWORD.search(line)) and KEYWORD.search(line).group(1) in solution
                                         for line in items]})
    return scripted_judge(script)


RUBRIC = json.dumps({"items": [
    {"description": "mentions FORMULA before computing", "score": 2},
    {"description": "writes GUESS instead of working", "score": -1},
    {"description": "mentions UNITS at the end", "score": 1},
]})


def test_math_rubric_group_env_policy_rubricator():
    verifier, backend = keyword_verifier()
    envs = gym.make_vec("MathRubric-v0", num_envs=4, group_size=4, verifier=verifier, levels=(1,))
    obs, info = envs.reset(seed=0)
    answer = gold(info["task_id"])[0]
    assert list(info["role"]) == ["reasoner"] * 4
    reasoner_actions = [f"FORMULA then UNITS \\boxed{{{answer}}}", f"FORMULA \\boxed{{{answer}}}",
                        "GUESS UNITS \\boxed{-100}", "GUESS \\boxed{-100}"]
    obs, rewards, terminated, _, info = envs.step(reasoner_actions)
    assert not terminated.any() and list(info["role"]) == ["reasoner"] * 4 and (rewards == 0).all()
    assert all(o[0]["content"].startswith("You write grading rubrics") for o in obs)
    assert "FORMULA then UNITS" in obs[0][1]["content"]  # its own chain of thought is shown
    obs, rewards, terminated, _, info = envs.step([RUBRIC, RUBRIC, "{not json", RUBRIC])
    assert terminated.all() and list(info["role"]) == ["rubricator"] * 4
    # satisfaction over rollouts: FORMULA [1,1,0,0] corr 1 valid; GUESS [0,0,1,1] corr -1 invalid;
    # UNITS [1,0,1,0] corr 0 invalid. Three rubric sets (member 2's JSON is broken) -> valid FORMULA x3:
    # pooled weights +2 +2 +2 -> cot = [1, 1, 0, 0]
    assert list(info["reward_components"]["cot"]) == pytest.approx([1, 1, 0, 0])
    assert list(info["role_rewards_reasoner"]) == pytest.approx([2, 2, -1, -1])
    # rubricator reward: 1 valid of 3 items + format 1; broken JSON -> 0
    assert list(info["role_rewards_rubricator"]) == pytest.approx([4 / 3, 4 / 3, 0, 4 / 3])
    assert list(rewards) == pytest.approx([2 + 4 / 3, 2 + 4 / 3, -1.0, -1 + 4 / 3])
    stats = info["rubric_stats"][0]
    assert stats["valid_fraction"] == pytest.approx(3 / 9) and stats["num_items"] == 9
    assert stats["mean_valid_corr"] == pytest.approx(1.0) and stats["mean_cot_reward"] == pytest.approx(0.5)
    trajectory = info["trajectory"][0]
    assert [t.info["role"] for t in trajectory.transitions] == ["reasoner", "rubricator"]
    assert [t.reward for t in trajectory.transitions] == pytest.approx([2.0, 4 / 3])
    assert len(backend.requests) == 4  # the 3 parsed rubrics share their items: one call per rollout
    bank = envs.bank
    assert bank.hint(info["task_id"][0]) == "Criteria a strong solution meets:\n- mentions FORMULA before computing"
    assert envs.tracker.summary()["valid_fraction"] == pytest.approx(1 / 3)


def test_verifier_failures_are_retried_then_fall_back():
    verifier, backend = keyword_verifier(fail_on="BROKEN")
    envs = gym.make_vec("MathRubric-v0", num_envs=4, group_size=4, verifier=verifier, levels=(1,), max_fixes=1)
    _, info = envs.reset(seed=1)
    answer = gold(info["task_id"])[0]
    envs.step([f"FORMULA \\boxed{{{answer}}}", f"FORMULA BROKEN \\boxed{{{answer}}}", "GUESS \\boxed{-100}", "\\boxed{-100}"])
    _, rewards, terminated, _, info = envs.step([RUBRIC] * 4)
    assert terminated.all() and np.isfinite(rewards).all()
    stats = info["rubric_stats"][0]
    # the 4 rubrics are one set of distinct items: one call per rollout; the BROKEN rollout's call
    # failed, after one fix request (max_fixes=1): 3 ok calls + 1 x 2 tries
    assert stats["verifier_failures"] == 1
    assert len(backend.requests) == 3 + 2
    # FORMULA satisfied [1, ?, 0, 0]: still valid on the known rollouts; the unknown one counts unsatisfied
    assert list(info["reward_components"]["cot"]) == pytest.approx([1, 0, 0, 0])


def test_fixed_llm_rubricator():
    verifier, _ = keyword_verifier()
    rubricator, rub_backend = scripted_judge(lambda messages, i: RUBRIC)
    envs = gym.make_vec("MathRubric-v0", num_envs=4, group_size=4, verifier=verifier, rubricator=rubricator,
                        rubrics_per_group=2, levels=(1,))
    _, info = envs.reset(seed=0)
    answer = gold(info["task_id"])[0]
    _, rewards, terminated, _, info = envs.step([f"FORMULA \\boxed{{{answer}}}", f"FORMULA \\boxed{{{answer}}}",
                                                 "GUESS \\boxed{-100}", "\\boxed{-100}"])
    assert terminated.all() and len(rub_backend.requests) == 2  # members 0 and 3 were shown
    assert "GUESS" not in rub_backend.requests[0][1]["content"] and "\\boxed{-100}" in rub_backend.requests[1][1]["content"]
    assert list(rewards) == pytest.approx([2, 2, -1, -1])
    assert "rubricator" not in info["reward_components"]  # a fixed rubricator gets no reward


def test_math_rubric_single_env_check_env_and_streaming_group():
    verifier, _ = keyword_verifier()
    env = gym.make("MathRubric-v0", verifier=verifier)
    check_env(env.unwrapped)
    check_env(env)
    env = gym.make("MathRubric-v0", verifier=verifier, history_size=3)
    _, info = env.reset(seed=0, options={"task_id": "gen-L1-test-4"})
    answer = gold(info["task_id"])
    env.step(f"FORMULA \\boxed{{{answer}}}")
    _, reward, terminated, _, info = env.step(RUBRIC)
    assert terminated and info["rubric_relative_to"] == 0 and info["rubric_stats"]["degenerate"] == 1.0
    assert info["role_rewards"] == {"reasoner": 1.0, "rubricator": 1.0} and reward == 2.0
    env.reset(options={"task_id": "gen-L1-test-4"})
    env.step("GUESS \\boxed{-100}")
    _, reward, terminated, _, info = env.step(RUBRIC)
    assert info["rubric_relative_to"] == 1 and info["rubric_stats"]["degenerate"] == 0.0
    assert info["role_rewards"]["reasoner"] == pytest.approx(-1.0)


def test_rubric_hints_reach_the_prompt():
    verifier, _ = keyword_verifier()
    envs = gym.make_vec("MathRubric-v0", num_envs=4, group_size=4, verifier=verifier, levels=(1,), rubric_hints=True)
    _, info = envs.reset(options={"task_ids": ["gen-L1-test-7"]})
    answer = gold(info["task_id"])[0]
    envs.step([f"FORMULA \\boxed{{{answer}}}"] * 2 + ["GUESS \\boxed{-100}"] * 2)
    envs.step([RUBRIC] * 4)
    obs, _ = envs.reset(options={"task_ids": ["gen-L1-test-7"]})
    assert "Criteria a strong solution meets:\n- mentions FORMULA before computing" in obs[0][1]["content"]
