"""Judge corrections from a calibrated profile (rubricgym.judges.correction): what the profile
calls for, that the correction makes a simulated judge's verdicts more often right, that the
single-read corrections of the literature leave GRPO's advantages as they were, and that train
and bench take ``--judge-correction``."""

import json

import numpy as np
import pytest
import torch

from rubricgym.judges.correction import JudgeCorrection
from rubricgym.judges.oracle import OracleJudge
from rubricgym.judges.ruler import RulerConfig, oracle_ruler_result


def profile_file(tmp_path, judge: str, limit: int = 0) -> str:
    from rubricgym.app.calibration import judge_profile

    path = tmp_path / "profile.json"
    path.write_text(json.dumps(judge_profile(judge, groups="math", limit=limit, progress=False)))
    return str(path)


def pairwise(judge: str, config: RulerConfig, groups: int = 400, size: int = 4) -> float:
    """Share of (good, bad) pairs a judge orders right through RULER with ``config`` (ties half),
    on random groups of ``size`` with about half good members."""
    oracle, rng, right, pairs = OracleJudge.parse(judge), np.random.default_rng(0), 0.0, 0
    for g in range(groups):
        good = [bool(x) for x in rng.random(size) < 0.5]
        scores = oracle_ruler_result(oracle, f"g{g}", good, config).scores
        for i in range(size):
            for j in range(size):
                if good[i] and not good[j]:
                    pairs += 1
                    right += 0.5 if scores[i] == scores[j] else float(scores[i] > scores[j])
    return right / pairs


def test_the_profile_decides_the_reads_and_an_uninformative_judge_is_refused():
    assert JudgeCorrection.decision_error(0.1, 0.1, 1) == pytest.approx(0.1)
    assert JudgeCorrection.decision_error(0.1, 0.1, 3) == pytest.approx(3 * 0.01 * 0.9 + 0.001)  # majority of three
    profile = {"false_positive": {"rate": 0.1}, "false_negative": {"rate": 0.1}}
    assert JudgeCorrection.from_profile(profile).reads == 3
    assert JudgeCorrection.from_profile({**profile, "false_positive": {"rate": 0.0}}).reads == 1  # already good enough
    ordered = {**profile, "position": {"good_first": {"accuracy": 1.0, "low": 0.98, "high": 1.0},
                                       "good_second": {"accuracy": 0.3, "low": 0.25, "high": 0.36}}}
    assert JudgeCorrection.from_profile(ordered, order_reads=5).reads == 5 and "order" in JudgeCorrection.from_profile(ordered).reason
    # an FN-heavy judge needs more than four reads to reach the 5 % target, and gets them
    fn_heavy = {"false_positive": {"rate": 0.05}, "false_negative": {"rate": 0.4}}
    assert JudgeCorrection.from_profile(fn_heavy).reads == 6 and JudgeCorrection.from_profile(fn_heavy, max_reads=4).reads == 4
    with pytest.raises(ValueError, match="says nothing about correctness"):
        JudgeCorrection.from_profile({"false_positive": {"rate": 0.5}, "false_negative": {"rate": 0.5}})
    with pytest.raises(ValueError, match="judge-eval --calibrate"):
        JudgeCorrection.from_profile({"pairwise": {}})
    with pytest.raises(ValueError, match="no judge profile at"):
        RulerConfig(correction="/nonexistent/profile.json")


def test_a_rewritten_profile_is_read_again(tmp_path):
    """Profiles are cached (RULER asks every group) but a recalibration to the same file counts."""
    import os

    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"false_positive": {"rate": 0.3}, "false_negative": {"rate": 0.05}}))
    assert JudgeCorrection.load(path).false_positive == 0.3
    path.write_text(json.dumps({"false_positive": {"rate": 0.1}, "false_negative": {"rate": 0.05}}))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert JudgeCorrection.load(path).false_positive == 0.1


def test_single_read_corrections_do_not_change_grpo_advantages_but_the_posterior_over_reads_does():
    """Backward and forward corrections of one binary read are affine: GRPO's group-standardised
    advantages are the same numbers. Several reads combined by the posterior are not."""
    from agents.grpo import group_advantages

    reads = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    groups = [0, 0, 0, 0, 1, 1, 1, 1]
    plain, _ = group_advantages(reads, groups)
    for method in ("backward", "forward"):
        correction = JudgeCorrection(false_positive=0.3, false_negative=0.05, method=method)
        corrected = torch.tensor([correction.corrected(float(r)) for r in reads])
        assert not torch.allclose(corrected, reads)
        assert torch.allclose(group_advantages(corrected, groups)[0], plain, atol=1e-3)
    mean_of_three = torch.tensor([1.0, 2 / 3, 1 / 3, 2 / 3])  # passes out of three reads
    posterior = JudgeCorrection(reads=3, false_positive=0.3, false_negative=0.05)
    corrected = torch.tensor([posterior.corrected(float(r)) for r in mean_of_three])
    assert not torch.allclose(group_advantages(corrected, [0] * 4)[0], group_advantages(mean_of_three, [0] * 4)[0], atol=0.05)


@pytest.mark.parametrize("judge", ["oracle:fp=0.3,fn=0.05", "oracle:fp=0.05,fn=0.3", "oracle:order=0.7"])
def test_a_calibrated_correction_orders_more_pairs_right(tmp_path, judge):
    """Calibrated on the held-out math groups, the correction lifts the judge's pairwise accuracy
    through RULER well above its uncorrected single read."""
    path = profile_file(tmp_path, judge)
    correction = JudgeCorrection.load(path)
    assert correction.reads >= 2
    profile = json.loads(open(path).read())
    if "order" in judge:  # order-following shows as a gap between the better answer shown first and second
        assert profile["position"]["good_first"]["low"] > profile["position"]["good_second"]["high"]
    uncorrected, corrected = pairwise(judge, RulerConfig()), pairwise(judge, RulerConfig(correction=path))
    assert corrected > uncorrected + 0.08, (uncorrected, corrected)
    result = oracle_ruler_result(OracleJudge.parse(judge), "g", [True, False], RulerConfig(correction=path))
    assert all(f"posterior-corrected over {correction.reads} read(s)" in why for why in result.explanations)


def test_dropping_order_following_reads_beats_averaging_them(tmp_path):
    """An order-following judge's reads that follow the presentation order are left out (a group
    whose every read follows it gets no signal): more pairs ordered right than four shuffled reads
    averaged, which the uncorrected judge with as many reads gets."""
    path = tmp_path / "order.json"
    path.write_text(json.dumps({"false_positive": {"rate": 0.05}, "false_negative": {"rate": 0.05},
                                "position": {"good_first": {"accuracy": 0.9, "low": 0.85, "high": 0.95},
                                             "good_second": {"accuracy": 0.5, "low": 0.45, "high": 0.55}}}))
    correction = JudgeCorrection.load(path)
    assert correction.reads == 4 and correction.order_threshold == 0.9 and "dropped" in correction.describe()
    averaged = pairwise("oracle:order=0.7", RulerConfig(permutations=4), groups=200, size=8)
    dropped = pairwise("oracle:order=0.7", RulerConfig(correction=str(path)), groups=200, size=8)
    assert dropped > averaged + 0.05, (averaged, dropped)
    everything_follows = oracle_ruler_result(OracleJudge.parse("oracle:order=1"), "g", [True, False, True, False, False],
                                             RulerConfig(correction=str(path)))
    assert everything_follows.reads_kept == 0 and len(set(everything_follows.scores)) == 1  # no signal, not a wrong one
    assert "over 0 read(s)" in everything_follows.explanations[0]


def test_train_and_bench_take_a_judge_correction(tmp_path):
    """``rubricgym train --judge-correction`` reaches the env's judge; an env without a judge,
    and a missing profile, are refused before any model loads."""
    import gymnasium as gym
    from judges import gold

    from agents.train import TrainConfig, Trainer
    from rubricgym.app.bench import BenchConfig
    from rubricgym.app.cli import main

    path = profile_file(tmp_path, "oracle:fp=0.3,fn=0.05", limit=8)
    with pytest.raises(ValueError, match="Math-v0 has none"):
        Trainer(TrainConfig(env="Math-v0", judge_correction=path))
    with pytest.raises(ValueError, match="no judge profile"):
        Trainer(TrainConfig(env="MathRuler-v0", judge_correction=str(tmp_path / "missing.json")))
    with pytest.raises(ValueError, match="no judge profile"):
        BenchConfig(judge_correction=str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="no judge profile"):  # the CLI flag exists and is checked before the model loads
        main(["train", "--env", "MathRuler-v0", "--judge-correction", str(tmp_path / "missing.json"), "--steps", "1"])

    envs = gym.make_vec("MathRuler-v0", num_envs=4, group_size=4, judge="oracle:fp=0.3,fn=0.05", combine="replace",
                        levels=(1,), correction=path)
    _, info = envs.reset(seed=0)
    answer = gold(info["task_id"])[0]
    _, rewards, _, _, info = envs.step([f"\\boxed{{{answer}}}", "\\boxed{-1}", f"\\boxed{{{answer}}}", "\\boxed{-2}"])
    assert all("posterior-corrected" in why for why in info["ruler_explanation"])
    assert all(0.0 <= r <= 1.0 for r in rewards)
