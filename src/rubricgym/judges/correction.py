"""Correct a judge's known errors, given its calibrated profile (``rubricgym judge-eval --calibrate``).

A profile says how a judge errs on a labelled set: the false-positive and false-negative rates of
its implied pass / fail (``fp``, ``fn``) and its pairwise accuracy with the good answer shown first
and second (the gap is order-following). :class:`JudgeCorrection` turns that into what RULER does
with the judge (``RulerConfig(correction="profile.json")``, ``--judge-correction`` on train and
bench):

* ``reads``: how many times each group is read, each read in its own shuffled presentation order
  (RULER's ``permutations``). Chosen from the profile: the fewest reads (up to ``max_reads``, 8)
  whose Bayes decision is wrong on at most ``target_error`` (5 %) of members, and ``order_reads``
  (4) when the order gap is significant (see ``order_threshold``).
* ``method="posterior"`` (default): each member's score becomes the posterior probability that it is
  good given its reads, P(good | reads) under the profile's channel (each read a soft pass with the
  score as its weight, prior 1/2). With several reads this is not an affine map of the mean read:
  one fail from a judge that almost never fails good answers outweighs two passes from one that
  often passes bad ones.
* ``order_threshold``: reads whose scores fall (or rise) with the presentation position, a
  correlation of at least this in absolute value, are dropped before the reads are combined: an
  order-following read says where a member was shown, not how good it is, and averaging it in
  makes every group partly noisy; a group whose every read is dropped gets equal scores (no
  signal, rather than a wrong one). Set to 0.9 by a profile whose order gap is significant.
* ``method="backward"`` / ``"forward"`` (Cai et al., arXiv 2510.00915): the unbiased surrogate
  ``(r - fp) / (1 - fp - fn)`` and the score-function weights ``fn - 1`` / ``fn`` of a fail / pass.

Why the posterior with reads is the default: for one binary read every per-member correction is
an affine map of the read (backward: scale and shift; forward: a shift), and GRPO's group-standardised
advantages ``(r - mean) / std`` are unchanged by any affine map with a positive scale, so on GRPO
they change nothing (only an unnormalised ``scale="none"`` sees backward's scale, a learning-rate
change). Under group normalisation what a profile can buy is information: reads chosen so that the
combined verdict is right, and combined as the profile's error rates say.

Examples:
    >>> correction = JudgeCorrection(reads=3, false_positive=0.3, false_negative=0.05)
    >>> [round(correction.corrected(passes / 3), 3) for passes in range(4)]   # one fail outweighs two passes
    [0.0, 0.016, 0.417, 0.969]
    >>> round(JudgeCorrection(false_positive=0.3, false_negative=0.05, method="backward").corrected(1.0), 4)
    1.0769
    >>> profile = {"false_positive": {"rate": 0.3}, "false_negative": {"rate": 0.05}}
    >>> JudgeCorrection.from_profile(profile).reads
    4
    >>> JudgeCorrection(reads=2, order_threshold=0.9).kept_reads([[0.9, 0.6, 0.3], [0.2, 0.9, 0.4]], [[0, 1, 2], [2, 0, 1]])
    [1]
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

METHODS = ("posterior", "backward", "forward")


@dataclass(frozen=True)
class JudgeCorrection:
    """How RULER reads a judge whose errors are known (see the module docstring)."""

    reads: int = 1
    """Reads of each group, each in its own presentation order (the first as recorded, the rest shuffled)."""
    false_positive: float = 0.0
    """The judge's rate of passing a bad member (its implied pass: a score at or above 0.5)."""
    false_negative: float = 0.0
    """The judge's rate of failing a good member."""
    method: str = "posterior"
    """``posterior``, ``backward`` or ``forward`` (see the module docstring)."""
    prior: float = 0.5
    """Prior probability that a member is good (the posterior's; 1/2 claims nothing)."""
    order_threshold: float = 0.0
    """Reads whose scores correlate with the presentation position at least this much (absolute
    Pearson correlation of score and position) are dropped; 0 keeps every read."""
    reason: str = ""
    """Why the reads were chosen (from the profile), for logs."""

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"a judge correction's method is one of {', '.join(METHODS)}, got {self.method!r}")
        if self.reads < 1:
            raise ValueError(f"a judge correction needs at least one read, got {self.reads}")
        if not (0 <= self.false_positive <= 1 and 0 <= self.false_negative <= 1):
            raise ValueError(f"fp and fn are rates in [0, 1], got {self.false_positive} and {self.false_negative}")
        if self.false_positive + self.false_negative >= 1:
            raise ValueError(f"a judge with fp + fn >= 1 (fp {self.false_positive:g}, fn {self.false_negative:g}) says "
                             "nothing about correctness (or the opposite of it): no correction can help; do not train on it")

    @property
    def pass_weight(self) -> float:
        """Log-likelihood ratio (good : bad) of one pass."""
        return math.log(max(1 - self.false_negative, 1e-9) / max(self.false_positive, 1e-9))

    @property
    def fail_weight(self) -> float:
        """Log-likelihood ratio (good : bad) of one fail (negative)."""
        return math.log(max(self.false_negative, 1e-9) / max(1 - self.false_positive, 1e-9))

    def kept_reads(self, reads: Sequence[Sequence[float]], orders: Sequence[Sequence[int]]) -> list[int]:
        """The indices of the reads to combine: ``reads[r][m]`` is member ``m``'s score in read ``r``,
        whose presentation order is ``orders[r]`` (member indices, first shown first)."""
        if not self.order_threshold:
            return list(range(len(reads)))
        return [r for r, (scores, order) in enumerate(zip(reads, orders))
                if abs(position_correlation(scores, order)) < self.order_threshold]

    def corrected(self, score: float, reads: int | None = None) -> float:
        """A member's corrected score from its mean read ``score`` in [0, 1] over ``reads`` reads
        (default: ``self.reads``; fewer where order-following reads were dropped)."""
        fp, fn = self.false_positive, self.false_negative
        reads = self.reads if reads is None else reads
        if self.method == "backward":
            return (score - fp) / (1 - fp - fn)
        if self.method == "forward":
            return score * fn + (1 - score) * (fn - 1)
        log_odds = math.log(self.prior / (1 - self.prior)) + reads * (
            score * self.pass_weight + (1 - score) * self.fail_weight)
        return 1 / (1 + math.exp(-max(-50.0, min(50.0, log_odds))))

    @staticmethod
    def decision_error(false_positive: float, false_negative: float, reads: int, prior: float = 0.5) -> float:
        """The mean of the false-pass and false-fail rates of the Bayes decision over ``reads``
        independent binary reads of a judge with these rates (ties split).

        Examples:
            >>> round(JudgeCorrection.decision_error(0.3, 0.05, 1), 3), round(JudgeCorrection.decision_error(0.3, 0.05, 4), 3)
            (0.175, 0.049)
        """
        probe = JudgeCorrection(reads=reads, false_positive=false_positive, false_negative=false_negative, prior=prior)
        false_pass = false_fail = 0.0
        for passes in range(reads + 1):
            log_odds = math.log(prior / (1 - prior)) + passes * probe.pass_weight + (reads - passes) * probe.fail_weight
            verdict = 1.0 if log_odds > 1e-12 else 0.5 if abs(log_odds) <= 1e-12 else 0.0
            ways = math.comb(reads, passes)
            false_pass += ways * false_positive ** passes * (1 - false_positive) ** (reads - passes) * verdict
            false_fail += ways * (1 - false_negative) ** passes * false_negative ** (reads - passes) * (1 - verdict)
        return (false_pass + false_fail) / 2

    @classmethod
    def from_profile(cls, profile: Mapping[str, Any], method: str = "posterior", max_reads: int = 8,
                     target_error: float = 0.05, order_reads: int = 4) -> "JudgeCorrection":
        """The correction a calibrated ``profile`` (:func:`rubricgym.app.calibration.judge_profile`) calls for:
        the fewest reads up to ``max_reads`` whose decision errs on at most ``target_error``, or
        ``order_reads`` shuffled orders with order-following reads dropped when the order gap is
        significant (dropping, not more reads, is what removes that error).

        Examples:
            >>> JudgeCorrection.from_profile({"false_positive": {"rate": 0.05}, "false_negative": {"rate": 0.4}}).reads
            6
        """
        try:
            fp, fn = float(profile["false_positive"]["rate"]), float(profile["false_negative"]["rate"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("a judge profile needs false_positive.rate and false_negative.rate "
                             "(write one with `rubricgym judge-eval --calibrate --output profile.json`)") from None
        if math.isnan(fp) or math.isnan(fn):
            raise ValueError("the judge profile has no false-positive or false-negative rate (no good or no bad members "
                             "were read): calibrate on a set with both")
        reads, reasons, order_threshold = 1, [], 0.0
        if fp + fn < 1:
            reads = next((k for k in range(1, max_reads + 1) if cls.decision_error(fp, fn, k) <= target_error), max_reads)
            reasons.append(f"{reads} read(s) bring the pass / fail error from {cls.decision_error(fp, fn, 1):.3f} "
                           f"to {cls.decision_error(fp, fn, reads):.3f}")
        position = profile.get("position") or {}
        first, second = position.get("good_first"), position.get("good_second")
        if first and second and (first["low"] > second["high"] or second["low"] > first["high"]):
            reads, order_threshold = order_reads, 0.9
            reasons.append(f"order-following (accuracy {first['accuracy']:.2f} with the good answer first, "
                           f"{second['accuracy']:.2f} second): {order_reads} shuffled orders, reads that follow "
                           f"the order (|correlation| >= {order_threshold}) dropped")
        return cls(reads=reads, false_positive=fp, false_negative=fn, method=method, order_threshold=order_threshold,
                   reason="; ".join(reasons))

    @classmethod
    def load(cls, path: str | Path, method: str = "posterior") -> "JudgeCorrection":
        """The correction for the profile written at ``path`` (read again when the file changes)."""
        try:
            written = Path(path).stat().st_mtime_ns
        except FileNotFoundError:
            raise ValueError(f"correction: no judge profile at {str(path)!r} "
                             f"(write one with `rubricgym judge-eval --calibrate --output {path}`)") from None
        return _load(str(path), method, written)

    def describe(self) -> str:
        return (f"{self.method} correction, {self.reads} read(s), fp {self.false_positive:.3f}, fn {self.false_negative:.3f}"
                + (f", order-following reads dropped (|correlation| >= {self.order_threshold:g})" if self.order_threshold else "")
                + (f" ({self.reason})" if self.reason else ""))


def position_correlation(scores: Sequence[float], order: Sequence[int]) -> float:
    """Pearson correlation of members' scores with the position they were shown at (0 for a group
    of fewer than 3 or constant scores: nothing to follow). -1: the first shown scored highest,
    falling with every later one.

    Examples:
        >>> position_correlation([0.2, 0.9, 0.5], [1, 2, 0])      # shown 1, 2, 0: scores 0.9, 0.5, 0.2
        -0.9966
    """
    import numpy as np

    if len(order) < 3:
        return 0.0
    position = np.empty(len(order))
    position[list(order)] = np.arange(len(order))
    values = np.asarray(scores, dtype=float)
    if np.ptp(values) == 0:
        return 0.0
    return round(float(np.corrcoef(position, values)[0, 1]), 4)


@lru_cache(maxsize=32)
def _load(path: str, method: str, written: int) -> JudgeCorrection:
    """The profile read once per (path, method, modification time): RULER asks for it every group."""
    try:
        profile = json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"the judge profile {path!r} is not JSON: {err}") from None
    return JudgeCorrection.from_profile(profile, method=method)


def corrected(result: Any, correction: JudgeCorrection | None) -> Any:
    """``result`` (a :class:`~rubricgym.judges.ruler.RulerResult`) with each score replaced by its corrected score (unchanged without a correction or on failure)."""
    if correction is None or result.failed:
        return result
    reads = correction.reads if result.reads_kept is None else result.reads_kept
    result.scores = [None if score is None else correction.corrected(score, reads) for score in result.scores]
    result.explanations = [f"{why} [{correction.method}-corrected over {reads} read(s)]".lstrip()
                           for why in result.explanations]
    return result


def combine_reads(read_scores: list[list[float]], orders: list[list[int]] | None,
                  correction: JudgeCorrection | None) -> tuple[list[float], int | None]:
    """Each member's mean score over a group's reads (``read_scores[r][m]``, read ``r`` shown in
    ``orders[r]``), leaving out the reads ``correction`` finds order-following; with the number of
    reads kept (None when none could be dropped). Every read dropped: equal scores, no signal.

    Examples:
        >>> drop = JudgeCorrection(reads=2, order_threshold=0.9)
        >>> combine_reads([[0.9, 0.6, 0.3], [0.2, 0.9, 0.4]], [[0, 1, 2], [2, 0, 1]], drop)
        ([0.2, 0.9, 0.4], 1)
        >>> combine_reads([[0.9, 0.6, 0.3]], [[0, 1, 2]], drop)
        ([0.5, 0.5, 0.5], 0)
    """
    count = len(read_scores[0]) if read_scores else 0
    if correction is None or not correction.order_threshold or orders is None:
        return [float(np.mean([read[m] for read in read_scores])) for m in range(count)], None
    kept = correction.kept_reads(read_scores, orders)
    if not kept:
        return [0.5] * count, 0
    return [float(np.mean([read_scores[r][m] for r in kept])) for m in range(count)], len(kept)
