"""Paired bootstrap intervals for held-out results (the bench and the judge-sensitivity run).

Every scheme is evaluated on the same held-out tasks after training with the same seeds, so
its results form a ``seeds x tasks`` matrix whose cells line up with every other scheme's. A
resample draws seeds and tasks with replacement *once* and applies the same draw to every
scheme: differences between schemes (and gains over the untrained weights) keep their pairing,
which is what makes a small difference detectable and a lucky seed visible.

Examples:
    >>> rlvr = [[1, 1, 1, 0, 1, 1, 1, 1]]
    >>> coin = [[1, 0, 0, 0, 1, 0, 1, 0]]
    >>> table = paired_bootstrap({"rlvr": rlvr, "coin": coin}, reference="rlvr", resamples=500)
    >>> print(table["rlvr"].mean, table["coin"].difference.signed())
    0.875 [0.62, 1.00] -0.500 [-0.88, -0.18] *
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Interval:
    """A mean and its 95 % bootstrap interval; ``significant`` when the interval excludes 0."""

    mean: float
    low: float
    high: float

    @property
    def significant(self) -> bool:
        return self.low > 0 or self.high < 0

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.2f}, {self.high:.2f}]"

    def signed(self) -> str:
        return f"{self.mean:+.3f} [{self.low:+.2f}, {self.high:+.2f}]{' *' if self.significant else ''}"

    def token(self) -> str:
        """As one RESULT-line token: ``+0.250[+0.10,+0.40]``."""
        return f"{self.mean:+.3f}[{self.low:+.2f},{self.high:+.2f}]"

    @classmethod
    def of(cls, row: dict) -> "Interval":
        """From a bench row's ``{"mean", "low", "high", ...}`` (the JSON form of :meth:`SchemeStats.as_dict`)."""
        return cls(row["mean"], row["low"], row["high"])


@dataclass(frozen=True)
class SchemeStats:
    """One scheme's held-out mean, its gain over ``before`` and its difference from the reference."""

    mean: Interval
    gain: Interval | None
    difference: Interval | None

    def as_dict(self) -> dict:
        return {key: None if value is None else {**asdict(value), "significant": value.significant}
                for key, value in (("mean", self.mean), ("gain", self.gain), ("difference", self.difference))}


def mean_interval(values: Sequence[float], resamples: int = 2000, seed: int = 0) -> Interval:
    """The mean of ``values`` and its 95 % bootstrap interval (resampling the values; NaNs when empty).

    Examples:
        >>> str(mean_interval([1.0, 1.0, 1.0]))
        '1.000 [1.00, 1.00]'
    """
    if not len(values):
        return Interval(float("nan"), float("nan"), float("nan"))
    array = np.asarray(values, dtype=float)
    means = array[np.random.default_rng(seed).integers(0, len(array), size=(resamples, len(array)))].mean(axis=1)
    return _interval(means, float(array.mean()))


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a rate (inside [0, 1], and sane at 0 or n successes; NaNs for n = 0).

    Examples:
        >>> [round(x, 3) for x in wilson(0, 20)]
        [0.0, 0.161]
    """
    if n == 0:
        return float("nan"), float("nan")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _interval(samples: np.ndarray, point: float) -> Interval:
    return Interval(float(point), float(np.quantile(samples, 0.025)), float(np.quantile(samples, 0.975)))


def paired_bootstrap(results: dict[str, Sequence[Sequence[float]]], reference: str | None = None,
                     before: Sequence[float] | None = None, resamples: int = 4000,
                     seed: int = 0) -> dict[str, SchemeStats]:
    """Per scheme: the mean over seeds x tasks with its interval, the gain over ``before`` (the
    untrained weights' per-task results, the same for every seed) and the difference from
    ``reference``, all from one shared draw of seeds and tasks per resample."""
    matrices = {name: np.asarray(runs, dtype=float) for name, runs in results.items()}
    shapes = {m.shape for m in matrices.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ValueError(f"every scheme needs the same seeds x tasks matrix, got shapes {sorted(shapes)}")
    seeds, tasks = next(iter(shapes))
    base = None if before is None else np.asarray(before, dtype=float)
    if base is not None and base.shape != (tasks,):
        raise ValueError(f"before holds {base.shape[0]} tasks, the schemes {tasks}")
    if reference is not None and reference not in matrices:
        raise ValueError(f"reference {reference!r} is not one of {sorted(matrices)}")
    rng = np.random.default_rng(seed)
    seed_draws = rng.integers(0, seeds, (resamples, seeds))
    task_draws = rng.integers(0, tasks, (resamples, tasks))

    def resampled(matrix: np.ndarray) -> np.ndarray:
        # mean over the drawn seeds (rows) of the mean over the drawn tasks (columns)
        return np.stack([matrix[s][:, t].mean() for s, t in zip(seed_draws, task_draws)])

    means = {name: resampled(m) for name, m in matrices.items()}
    base_means = None if base is None else np.stack([base[t].mean() for t in task_draws])
    table = {}
    for name, matrix in matrices.items():
        point = float(matrix.mean())
        gain = None if base is None else _interval(means[name] - base_means, point - float(base.mean()))
        difference = None
        if reference is not None and name != reference:
            difference = _interval(means[name] - means[reference], point - float(matrices[reference].mean()))
        table[name] = SchemeStats(_interval(means[name], point), gain, difference)
    return table


# -- few-seed statistics: seeds are the unit ---------------------------------------------------------
#
# A bootstrap over 2 to 4 seeds cannot cover a between-seed spread of 0.3 (with 2 seeds it returns
# the range of two means). Here each seed's held-out mean (over its tasks) is one observation, the
# difference to the reference is taken seed by seed (the runs are paired: same seed, same tasks),
# and the interval is Student's t over those per-seed values: wide at 3 seeds, as it should be.
# IQM and the probability of improvement are rliable's definitions (Agarwal et al., 2021),
# computed with scipy (rliable 1.2 itself pulls arch and seaborn); the verdict keeps the pairing.

MIN_SEEDS_FOR_A_CLAIM = 3
"""A difference is called significant only with at least this many seeds per scheme."""


def t_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """The mean of ``values`` with Student's t interval (n - 1 degrees of freedom); NaN bounds
    with fewer than 2 values.

    Examples:
        >>> str(t_interval([0.5, 0.7, 0.6]))
        '0.600 [0.35, 0.85]'
    """
    from scipy import stats as scipy_stats

    array = np.asarray(values, dtype=float)
    if len(array) < 2:
        point = float(array.mean()) if len(array) else float("nan")
        return Interval(point, float("nan"), float("nan"))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, len(array) - 1) * array.std(ddof=1) / math.sqrt(len(array)))
    return Interval(float(array.mean()), float(array.mean()) - half, float(array.mean()) + half)


def minimum_detectable_difference(sd: float, seeds: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true paired difference a two-sided t-test at ``alpha`` detects with ``power``,
    from the per-seed differences' standard deviation ``sd`` and the number of seeds:
    ``(t[1 - alpha/2] + t[power]) * sd / sqrt(seeds)`` (n - 1 degrees of freedom).

    Examples:
        >>> round(minimum_detectable_difference(0.1, 10), 3)
        0.099
        >>> round(minimum_detectable_difference(0.1, 3), 3)
        0.31
    """
    from scipy import stats as scipy_stats

    if seeds < 2 or not math.isfinite(sd):
        return float("inf")
    df = seeds - 1
    return float((scipy_stats.t.ppf(1 - alpha / 2, df) + scipy_stats.t.ppf(power, df)) * sd / math.sqrt(seeds))


def seeds_for_mdd(sd: float, target: float, most: int = 1000) -> int | None:
    """The fewest paired seeds whose :func:`minimum_detectable_difference` at this ``sd`` is <= ``target``
    (None: more than ``most``): how many seeds a claim of that size needs, planned before running.

    Examples:
        >>> seeds_for_mdd(0.1, 0.1), seeds_for_mdd(0.3, 0.1), seeds_for_mdd(0.3, 0.001, most=50)
        (10, 73, None)
    """
    return next((n for n in range(2, most + 1) if minimum_detectable_difference(sd, n) <= target), None)


def iqm(values: Sequence[float]) -> float:
    """Interquartile mean (the mean of the middle 50 %), rliable's robust aggregate."""
    from scipy import stats as scipy_stats

    return float(scipy_stats.trim_mean(np.asarray(values, dtype=float), 0.25)) if len(values) else float("nan")


def probability_of_improvement(values: Sequence[float], reference: Sequence[float]) -> float:
    """P(a run of this scheme scores above a run of the reference), ties counting half: rliable's
    probability of improvement (the Mann-Whitney U statistic over runs / (n * m)).

    Examples:
        >>> probability_of_improvement([0.6, 0.7, 0.8], [0.5, 0.6, 0.7])
        0.778
    """
    a, b = np.asarray(values, dtype=float)[:, None], np.asarray(reference, dtype=float)[None, :]
    return round(float(((a > b) + 0.5 * (a == b)).mean()), 3)


@dataclass(frozen=True)
class SeedStats:
    """One scheme over seeds: its mean with a t interval, IQM, and against the reference the paired
    difference, P(improvement) and the minimum detectable difference at 80 % power; ``verdict``
    says whether the difference is established."""

    seeds: int
    mean: Interval
    iqm: float
    seed_means: tuple[float, ...]
    difference: Interval | None = None
    p_improvement: float | None = None
    mdd: float | None = None

    @property
    def established(self) -> bool:
        """A difference with >= MIN_SEEDS_FOR_A_CLAIM seeds whose interval excludes 0."""
        return (self.difference is not None and self.seeds >= MIN_SEEDS_FOR_A_CLAIM
                and math.isfinite(self.difference.low) and self.difference.significant)

    @property
    def verdict(self) -> str:
        if self.difference is None:
            return "reference"
        if not self.established:
            return "not established"
        return "better" if self.difference.mean > 0 else "worse"

    def as_dict(self) -> dict:
        return {"seeds": self.seeds, "mean": asdict(self.mean), "iqm": self.iqm, "seed_means": list(self.seed_means),
                "difference": None if self.difference is None else asdict(self.difference),
                "p_improvement": self.p_improvement, "mdd": self.mdd, "verdict": self.verdict}

    def token(self) -> str:
        """As RESULT-line text: ``0.625[0.41,0.84]`` (mean and t interval over seeds)."""
        return f"{self.mean.mean:.3f}[{self.mean.low:.2f},{self.mean.high:.2f}]"


def seed_table(results: dict[str, Sequence[Sequence[float]]], reference: str | None = None) -> dict[str, SeedStats]:
    """Few-seed statistics of ``{scheme: seeds x tasks}`` held-out results (the same seeds and tasks
    in every scheme, in the same order): seeds are the unit, differences are paired by seed.

    Examples:
        >>> table = seed_table({"rlvr": [[1, 0, 1, 1], [1, 1, 0, 1], [0, 1, 1, 1]],
        ...                     "random": [[0, 0, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]]}, reference="rlvr")
        >>> table["random"].difference.signed(), table["random"].verdict  # 3 seeds: t(2) = 4.30
        ('-0.500 [-1.12, +0.12]', 'not established')
    """
    matrices = {name: np.asarray(runs, dtype=float) for name, runs in results.items()}
    if len({m.shape for m in matrices.values()}) != 1 or next(iter(matrices.values())).ndim != 2:
        raise ValueError(f"every scheme needs the same seeds x tasks matrix, got shapes {sorted({m.shape for m in matrices.values()})}")
    if reference is not None and reference not in matrices:
        raise ValueError(f"reference {reference!r} is not one of {sorted(matrices)}")
    per_seed = {name: m.mean(axis=1) for name, m in matrices.items()}
    table = {}
    for name, means in per_seed.items():
        difference = p_improvement = mdd = None
        if reference is not None and name != reference:
            differences = means - per_seed[reference]
            difference = t_interval(differences)
            p_improvement = probability_of_improvement(means, per_seed[reference])
            mdd = minimum_detectable_difference(float(differences.std(ddof=1)) if len(differences) > 1 else float("nan"),
                                                len(differences))
        table[name] = SeedStats(seeds=len(means), mean=t_interval(means), iqm=iqm(means),
                                seed_means=tuple(round(float(x), 6) for x in means), difference=difference,
                                p_improvement=p_improvement, mdd=mdd)
    return table
