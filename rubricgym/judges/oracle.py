"""A simulated judge of known pairwise accuracy, for experiments (``judge="oracle:0.8"``).

It scores a group from the ground truth it is given (an env's verified outcome, LLMBar's gold
label), never from the text: each member gets ``good + noise`` with Gaussian noise scaled so that
a good member outscores a bad one with probability ``accuracy`` (``P(1 + e1 > e2) = Phi(1 /
(sigma * sqrt 2))``), and members of equal quality are ordered at random. ``accuracy=1.0`` is
the ground truth itself, ``0.5`` a coin. ``position_bias`` adds that much to the first-presented
member (an LLM judge's best-known bias). Scores are the latent through a normal CDF (scaled by
the noise), so a perfect judge gives 1 and 0 (about) and equal quality gets equal scores.
Everything it produces is labelled simulated.

Examples:
    >>> judge = OracleJudge.parse("oracle:1.0")
    >>> [round(s, 3) for s in judge.scores([True, False, True], seed="t1")]
    [1.0, 0.0, 1.0]
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np

PREFIX = "oracle:"


def is_oracle(judge: object) -> bool:
    return isinstance(judge, str) and judge.startswith(PREFIX)


@dataclass(frozen=True)
class OracleJudge:
    accuracy: float
    """Pairwise accuracy on (good, bad) pairs, in [0.5, 1]."""
    position_bias: float = 0.0
    """Added to the first-presented member's latent score (in units of the good/bad gap)."""

    def __post_init__(self):
        if not 0.5 <= self.accuracy <= 1.0:
            raise ValueError(f"an oracle judge's pairwise accuracy must be in [0.5, 1], got {self.accuracy}")

    @classmethod
    def parse(cls, text: str) -> "OracleJudge":
        """``oracle:<accuracy>[:<position_bias>]``."""
        parts = text.removeprefix(PREFIX).split(":")
        try:
            return cls(float(parts[0]), float(parts[1]) if len(parts) > 1 else 0.0)
        except (ValueError, IndexError):
            raise ValueError(f"an oracle judge is 'oracle:<pairwise accuracy>[:<position bias>]', got {text!r}") from None

    @property
    def name(self) -> str:
        bias = f":{self.position_bias:g}" if self.position_bias else ""
        return f"oracle:{self.accuracy:g}{bias} (simulated)"

    @property
    def noise(self) -> float:
        """The noise scale that gives the pairwise accuracy (inf at 0.5, 0 at 1.0)."""
        if self.accuracy >= 1.0:
            return 0.0
        if self.accuracy <= 0.5:
            return math.inf
        return 1.0 / (math.sqrt(2.0) * NormalDist().inv_cdf(self.accuracy))

    def scores(self, good: Sequence[bool], seed: str = "") -> list[float]:
        """One score in [0, 1] per member, in presentation order (reproducible for a seed)."""
        rng = np.random.default_rng(int(hashlib.sha256(f"{self.name}|{seed}".encode()).hexdigest()[:16], 16))
        n = len(good)
        if self.noise == math.inf:
            latent = rng.standard_normal(n)
        else:
            latent = np.asarray(good, dtype=float) + self.noise * rng.standard_normal(n)
        if n and self.position_bias:
            latent[0] += self.position_bias
        # a monotone map of the latent into [0, 1] (pairwise orders, hence the accuracy, are kept):
        # equal quality gets equal scores from a perfect judge, and noise-sized differences otherwise
        # (ranks would invent full-size gaps between equally good members)
        spread = max(self.noise if self.noise != math.inf else 1.0, 0.05)
        return [float(NormalDist().cdf((value - 0.5) / spread)) for value in latent]
