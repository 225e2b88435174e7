"""Paired intervals (rubricgym.app.stats): the joint seeds x tasks bootstrap, and the few-seed
statistics (seeds as the unit, paired t interval, MDD) that claims rest on."""

import numpy as np
import pytest

from rubricgym.app.stats import paired_bootstrap


def test_pairing_detects_a_consistent_small_difference_that_unpaired_intervals_miss():
    rng = np.random.default_rng(1)
    reference = (rng.random((1, 120)) < 0.5).astype(int)
    better = reference.copy()
    better[0, np.flatnonzero(reference[0] == 0)[:10]] = 1  # right on 10 more tasks, never worse
    table = paired_bootstrap({"ref": reference, "better": better}, reference="ref", resamples=2000)
    difference = table["better"].difference
    assert difference.mean == pytest.approx(10 / 120) and difference.significant and difference.low > 0
    # unpaired, the two means' intervals overlap: the pairing is what sees the difference
    assert table["better"].mean.low < table["ref"].mean.high


def test_no_difference_is_not_significant_and_the_reference_has_none():
    rng = np.random.default_rng(2)
    a = (rng.random((3, 60)) < 0.6).astype(int)
    b = np.roll(a, 1, axis=1)  # the same accuracy on other tasks
    table = paired_bootstrap({"a": a, "b": b}, reference="a", before=a[0], resamples=2000)
    assert table["a"].difference is None and not table["b"].difference.significant
    assert table["a"].mean.low <= a.mean() <= table["a"].mean.high


def test_gain_over_before_uses_the_untrained_results_task_by_task():
    before = [0, 0, 0, 0, 1, 1, 1, 1] * 4
    after = [[1, 1, 1, 0, 1, 1, 1, 1] * 4, [1, 1, 0, 1, 1, 1, 1, 1] * 4]
    table = paired_bootstrap({"rlvr": after}, reference="rlvr", before=before, resamples=2000)
    assert table["rlvr"].gain.mean == pytest.approx(0.875 - 0.5) and table["rlvr"].gain.significant


def test_seed_variance_widens_the_interval():
    tasks = 64
    steady = np.tile((np.arange(tasks) % 2 == 0).astype(int), (4, 1))  # every seed 0.5
    shaky = np.stack([np.ones(tasks), np.zeros(tasks), np.ones(tasks), np.zeros(tasks)]).astype(int)  # 1, 0, 1, 0
    table = paired_bootstrap({"steady": steady, "shaky": shaky}, resamples=2000)
    width = {name: s.mean.high - s.mean.low for name, s in table.items()}
    assert width["shaky"] > 2 * width["steady"]


def test_mismatched_shapes_are_refused():
    with pytest.raises(ValueError, match="same seeds x tasks"):
        paired_bootstrap({"a": [[1, 0]], "b": [[1, 0, 1]]})
    with pytest.raises(ValueError, match="before holds"):
        paired_bootstrap({"a": [[1, 0]]}, before=[1])
    with pytest.raises(ValueError, match="reference"):
        paired_bootstrap({"a": [[1, 0]]}, reference="rlvr")


# -- few-seed statistics (seed_table): coverage on synthetic experiments with a known answer ---------

def simulated_difference_intervals(seeds: int, experiments: int, true_difference: float = 0.1, seed_sd: float = 0.3,
                                   correlation: float = 0.8, tasks: int = 32, rng_seed: int = 0):
    """``experiments`` simulated comparisons: each seed's run of the reference and of the scheme has
    an accuracy drawn around its scheme's (between-seed SD ``seed_sd``, the two runs of a seed
    correlated), then ``tasks`` pass/fail results at that accuracy. Returns the paired intervals."""
    from rubricgym.app.stats import seed_table

    rng = np.random.default_rng(rng_seed)
    covariance = seed_sd ** 2 * np.array([[1, correlation], [correlation, 1]])
    intervals = []
    for _ in range(experiments):
        logits = rng.multivariate_normal([0.0, 0.0], covariance, size=seeds)
        reference_rate = np.clip(0.5 + logits[:, 0], 0.02, 0.98)
        scheme_rate = np.clip(0.5 + true_difference + logits[:, 1], 0.02, 0.98)
        reference = rng.random((seeds, tasks)) < reference_rate[:, None]
        scheme = rng.random((seeds, tasks)) < scheme_rate[:, None]
        # the true difference of this design, clipping included, is measured on a huge sample below
        intervals.append(seed_table({"ref": reference, "scheme": scheme}, reference="ref")["scheme"].difference)
    return intervals


def true_clipped_difference(true_difference=0.1, seed_sd=0.3, correlation=0.8, rng_seed=1):
    rng = np.random.default_rng(rng_seed)
    covariance = seed_sd ** 2 * np.array([[1, correlation], [correlation, 1]])
    logits = rng.multivariate_normal([0.0, 0.0], covariance, size=2_000_000)
    return float((np.clip(0.5 + true_difference + logits[:, 1], 0.02, 0.98) - np.clip(0.5 + logits[:, 0], 0.02, 0.98)).mean())


@pytest.mark.parametrize("seeds", [3, 10])
def test_the_paired_t_interval_covers_the_true_difference_about_95_percent_of_the_time(seeds):
    truth = true_clipped_difference()
    intervals = simulated_difference_intervals(seeds, experiments=2000)
    coverage = np.mean([i.low <= truth <= i.high for i in intervals])
    assert 0.93 <= coverage <= 0.97, coverage  # 2000 experiments: the binomial SE of 0.95 is 0.005


def test_the_old_percentile_bootstrap_under_covers_at_three_seeds():
    """Why seed_table exists: the joint seeds x tasks percentile bootstrap, at 3 seeds, covers far
    less than its nominal 95 % (it cannot see a between-seed spread it has only 3 draws of)."""
    from rubricgym.app.stats import paired_bootstrap

    truth = true_clipped_difference()
    rng = np.random.default_rng(2)
    covariance = 0.3 ** 2 * np.array([[1, 0.8], [0.8, 1]])
    covered = []
    for _ in range(300):
        logits = rng.multivariate_normal([0.0, 0.0], covariance, size=3)
        reference = rng.random((3, 32)) < np.clip(0.5 + logits[:, 0], 0.02, 0.98)[:, None]
        scheme = rng.random((3, 32)) < np.clip(0.6 + logits[:, 1], 0.02, 0.98)[:, None]
        difference = paired_bootstrap({"ref": reference, "scheme": scheme}, reference="ref", resamples=400)["scheme"].difference
        covered.append(difference.low <= truth <= difference.high)
    assert np.mean(covered) < 0.93, np.mean(covered)  # 0.90 measured (300 experiments, seeded); the t interval's 0.95


def test_seed_table_verdicts_mdd_and_rliable_aggregates():
    from rubricgym.app.stats import minimum_detectable_difference, seed_table

    ref = [[1, 0, 1, 0], [1, 1, 0, 0], [0, 1, 0, 0], [1, 1, 1, 0], [0, 0, 1, 0]]
    better = [[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0]]
    table = seed_table({"ref": ref, "better": better, "two_seeds": better}, reference="ref")
    row = table["better"]
    assert row.seeds == 5 and row.mean.mean == pytest.approx(0.7) and row.seed_means == (0.75, 0.75, 0.5, 1.0, 0.5)
    differences = np.array([0.25, 0.25, 0.25, 0.25, 0.25])
    assert row.difference.mean == pytest.approx(differences.mean()) and row.verdict == "better"
    assert row.p_improvement == pytest.approx(np.mean([[(a > b) + 0.5 * (a == b) for b in [0.5, 0.5, 0.25, 0.75, 0.25]]
                                                       for a in row.seed_means]), abs=1e-3)
    assert row.iqm == pytest.approx(np.mean([0.75, 0.75, 0.5]))  # middle 50 % of 5 seeds: trim one each side (scipy)
    assert table["ref"].verdict == "reference" and table["ref"].difference is None
    # the same effect measured on 2 seeds is never a claim, however far from 0
    two = seed_table({"ref": ref[:2], "better": better[:2]}, reference="ref")["better"]
    assert two.verdict == "not established" and two.mdd == pytest.approx(minimum_detectable_difference(0.0, 2))
    # MDD shrinks with the square root of the seeds (and the t quantiles)
    assert minimum_detectable_difference(0.3, 3) > minimum_detectable_difference(0.3, 10) > minimum_detectable_difference(0.3, 40)
    assert minimum_detectable_difference(0.3, 40) == pytest.approx(2.02 * 0.3 / 40 ** 0.5 + 0.851 * 0.3 / 40 ** 0.5, rel=0.01)
    with pytest.raises(ValueError, match="same seeds x tasks"):
        seed_table({"a": [[1, 0]], "b": [[1, 0, 1]]})
