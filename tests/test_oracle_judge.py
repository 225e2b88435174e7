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


def test_asymmetric_pass_fail_judges_have_their_rates():
    """oracle:fp=,fn= passes bad members at rate fp and fails good ones at rate fn; flip=p is fp=fn=p."""
    judge = OracleJudge.parse("oracle:fp=0.3,fn=0.05")
    draws = [judge.scores([True, False], seed=f"g{i}") for i in range(4000)]
    assert {s for pair in draws for s in pair} == {0.0, 1.0}
    assert np.mean([good == 0.0 for good, _ in draws]) == pytest.approx(0.05, abs=0.015)
    assert np.mean([bad == 1.0 for _, bad in draws]) == pytest.approx(0.3, abs=0.03)
    assert OracleJudge.parse("oracle:flip=0.4") == OracleJudge(false_positive=0.4, false_negative=0.4)
    for bad, match in (("oracle:fp=0.3", "needs both fp and fn"), ("oracle:flip=0.2,bias=1", "takes no accuracy or bias"),
                       ("oracle:fp=1.5,fn=0", r"probabilities in \[0, 1\]"), ("oracle:speed=3", "keys accuracy, bias")):
        with pytest.raises(ValueError, match=match):
            OracleJudge.parse(bad)


def test_an_order_following_judge_is_corrected_by_averaging_presentation_orders():
    """oracle:order=q follows presentation order in a share q of groups; RULER's permutations
    (orders averaged) bring its pairwise accuracy back toward the truth."""
    from rubricgym.judges.ruler import RulerConfig, oracle_ruler_result

    judge = OracleJudge.parse("oracle:order=0.7")

    def accuracy(config, good_first: bool) -> float:
        right = 0.0
        for i in range(600):
            good = [good_first, not good_first]
            scores = oracle_ruler_result(judge, f"g{i}", good, config).scores
            right += 0.5 if scores[0] == scores[1] else float((scores[0] > scores[1]) == good_first)
        return right / 600

    plain = RulerConfig()
    assert accuracy(plain, True) == 1.0  # the first shown is the good one: following the order is right
    assert accuracy(plain, False) == pytest.approx(0.3, abs=0.06)  # wrong in the share q that follows order
    averaged = RulerConfig(permutations=4, seed=1)
    assert accuracy(averaged, False) > accuracy(plain, False) + 0.3
    assert OracleJudge.parse(judge.name.split(" ")[0]) == judge


def test_calibration_recovers_a_simulated_judges_error_profile(tmp_path):
    """judge-eval --calibrate: the FP / FN rates of an asymmetric judge and the order gap of an
    order-following one come back from the held-out math groups, inside their intervals."""
    import json

    from rubricgym.app.calibration import judge_profile
    from rubricgym.app.cli import main

    out = tmp_path / "profile.json"
    assert main(["judge-eval", "--judge", "oracle:fp=0.3,fn=0.05", "--calibrate", "--output", str(out)]) == 0
    profile = json.loads(out.read_text())
    fp, fn = profile["false_positive"], profile["false_negative"]
    assert fp["low"] <= 0.3 <= fp["high"] and fn["low"] <= 0.05 <= fn["high"] and fp["members"] > fn["members"] > 0
    assert profile["groups"] == "math" and profile["failed_groups"] == 0 and profile["tied_pairs"] > 0  # pass / fail ties
    # LLMBar's recorded order shows the gold output first: an order-following judge is right there, wrong reversed
    follower = judge_profile("oracle:order=0.7", groups="llmbar:natural", limit=40, progress=False)
    assert follower["pairwise"]["recorded"]["accuracy"] == 1.0 and follower["position_gap"] > 0.5
    assert follower["pairwise"]["reversed"]["low"] <= 0.3 <= follower["pairwise"]["reversed"]["high"]
    truth = judge_profile("oracle:1.0", groups="llmbar:natural", limit=10, progress=False)
    assert truth["pairwise"]["recorded"]["accuracy"] == truth["pairwise"]["reversed"]["accuracy"] == 1.0
    assert truth["false_positive"]["rate"] == truth["false_negative"]["rate"] == 0.0 and truth["read_groups"] == 20
