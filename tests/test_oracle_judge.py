"""The simulated judge of known accuracy: calibrated pairwise accuracy, labelled simulated,
usable wherever a judge model string is accepted."""

import gymnasium as gym
import numpy as np
import pytest
from judges import gold

from rubricgym.judges.oracle import OracleJudge


@pytest.mark.parametrize("accuracy", [0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
def test_pairwise_accuracy_is_the_one_asked_for(accuracy):
    judge = OracleJudge(accuracy)
    pairs = [judge.scores([True, False], seed=str(k)) for k in range(4000)]
    wins = [good > bad for good, bad in pairs]
    assert np.mean(wins) == pytest.approx(accuracy, abs=0.025)  # 4000 pairs: 2.5 points is > 3 standard errors


def test_groups_rank_by_quality_and_position_bias_favours_the_first():
    # a perfect judge: the verified outcome itself, equal quality scored equally (no invented gaps)
    assert [round(s, 6) for s in OracleJudge(1.0).scores([False, True, False, True], seed="g")] == [0.0, 1.0, 0.0, 1.0]
    noisy = OracleJudge(0.8).scores([True] * 4, seed="g")
    assert all(0.0 < s < 1.0 for s in noisy) and len(set(noisy)) == 4
    biased = OracleJudge(0.75, position_bias=2.0)
    # unbiased, the bad first member wins 25 % of pairs; a bias of twice the quality gap makes it 75 %
    pairs = [biased.scores([False, True], seed=str(k)) for k in range(2000)]
    assert np.mean([first > second for first, second in pairs]) == pytest.approx(0.75, abs=0.04)
    assert OracleJudge.parse("oracle:0.8:0.5") == OracleJudge(0.8, 0.5) and "simulated" in OracleJudge(0.8).name
    with pytest.raises(ValueError, match="in \\[0.5, 1\\]"):
        OracleJudge(0.3)
    with pytest.raises(ValueError, match="oracle:<pairwise accuracy>"):
        OracleJudge.parse("oracle:high")


def test_math_ruler_env_with_an_oracle_judge_scores_the_verified_outcome():
    envs = gym.make_vec("MathRuler-v0", num_envs=4, group_size=4, judge="oracle:1.0", combine="replace", levels=(1,))
    _, info = envs.reset(seed=0)
    answer = gold(info["task_id"])[0]
    _, rewards, terminated, _, info = envs.step([f"\\boxed{{{answer}}}", "\\boxed{-1}", f"\\boxed{{{answer}}}", "\\boxed{-2}"])
    assert terminated.all() and min(rewards[[0, 2]]) > max(rewards[[1, 3]])
    assert all("simulated" in e for e in info["ruler_explanation"]) and not info["ruler_failed"].any()
