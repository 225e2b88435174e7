"""Paired bootstrap intervals (rubricgym.app.stats): what the bench's significance marks rest on."""

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
