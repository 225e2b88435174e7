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
