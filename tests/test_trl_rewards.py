"""RULER and RLCER as plain TRL reward functions (completion lists in, scores out, groups of
num_generations); scripted judges for the logic (the real judges are tested elsewhere)."""

import pytest
from judges import reply_scores, scripted_judge, trajectory_blocks
from test_rubrics import RUBRIC, keyword_verifier

from rubricgym.envs.math import math_correct
from rubricgym.integrations.trl import rubric_reward, ruler_reward

PROMPT = [{"role": "system", "content": "Answer in \\boxed{}."}, {"role": "user", "content": "What is 2 + 3?"}]
OTHER = [{"role": "system", "content": "Answer in \\boxed{}."}, {"role": "user", "content": "What is 4 + 4?"}]


def test_ruler_reward_scores_each_group_in_one_call():
    judge, backend = scripted_judge()
    reward = ruler_reward(2, judge=judge)
    completions = [[{"role": "assistant", "content": "quality=0.9 \\boxed{5}"}],
                   [{"role": "assistant", "content": "quality=0.2 \\boxed{6}"}], "quality=0.4 \\boxed{8}", "quality=0.7"]
    scores = reward([PROMPT, PROMPT, OTHER, OTHER], completions)
    assert scores == pytest.approx([0.9, 0.2, 0.4, 0.7]) and reward.__name__ == "ruler"
    assert len(backend.requests) == 2 and all(len(trajectory_blocks(r)) == 2 for r in backend.requests)
    assert "What is 4 + 4?" in backend.requests[1][1]["content"]


def test_ruler_reward_failure_is_none_and_split_groups_are_refused():
    judge, _ = scripted_judge(lambda m, i: RuntimeError("judge down"), max_retries=0)
    with pytest.warns(UserWarning, match="RULER judge failed"):
        assert ruler_reward(2, judge=judge)([PROMPT, PROMPT], ["a", "b"]) == [None, None]  # TRL leaves None out
    with pytest.raises(ValueError, match="not one prompt's group"):
        ruler_reward(2, judge=scripted_judge()[0])([PROMPT, OTHER], ["a", "b"])


def test_ruler_reward_sum_adds_the_correctness_reward():
    judge, _ = scripted_judge(lambda m, i: reply_scores(m))
    reward = ruler_reward(2, judge=judge, combine="sum", correct=math_correct())
    scores = reward([PROMPT, PROMPT], ["quality=0.5 \\boxed{5}", "quality=0.5 \\boxed{7}"], answer=["5", "5"])
    assert scores == pytest.approx([1.5, -0.5])


def test_rubric_reward_keeps_rubrics_that_track_correctness():
    verifier, verifier_backend = keyword_verifier()
    rubricator, _ = scripted_judge(lambda m, i: RUBRIC)
    reward = rubric_reward(4, correct=math_correct(), verifier=verifier, rubricator=rubricator, rubrics_per_group=1)
    replies = ["FORMULA then UNITS \\boxed{5}", "FORMULA \\boxed{5}", "GUESS UNITS \\boxed{9}", "GUESS \\boxed{9}"]
    scores = reward([PROMPT] * 4, replies, answer=["5"] * 4)
    # FORMULA tracks correctness (valid, +2 pooled -> cot 1 for members 0 and 1); GUESS / UNITS do not count
    assert scores == pytest.approx([2.0, 2.0, -1.0, -1.0]) and len(verifier_backend.requests) == 4
    with pytest.raises(ValueError, match="fixed rubricator"):
        rubric_reward(4, correct=math_correct(), rubricator="policy")
