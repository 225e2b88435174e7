"""A simulated judge of known pairwise accuracy, for experiments (``judge="oracle:0.8"``).

It scores a group from the ground truth it is given (an env's verified outcome, LLMBar's gold
label), never from the text: each member gets ``good + noise`` with Gaussian noise scaled so that
a good member outscores a bad one with probability ``accuracy`` (``P(1 + e1 > e2) = Phi(1 /
(sigma * sqrt 2))``), and members of equal quality are ordered at random. ``accuracy=1.0`` is
the ground truth itself, ``0.5`` a coin. ``position_bias`` adds that much to the first-presented
member (an LLM judge's best-known bias). Scores are the latent through a normal CDF (scaled by
the noise), so a perfect judge gives 1 and 0 (about) and equal quality gets equal scores.
Everything it produces is labelled simulated.

Two more kinds of error, the ones real judges make (the judge-noise issue), written as
``key=value`` pairs after ``oracle:``:

* ``fp=<rate>,fn=<rate>``: a pass / fail judge, an asymmetric channel (Cai et al., 2025): a bad
  member passes (score 1) with probability ``fp``, a good one fails (score 0) with probability
  ``fn``, each member drawn on its own. ``flip=<p>`` is ``fp=fn=p``: the verifier's verdict
  flipped with probability p (Lv et al., 2025's reward noise).
* ``order=<q>``: an order-following judge: with probability ``q`` a group's scores follow its
  presentation order (the first shown best, falling evenly to the last), whatever the quality;
  otherwise the judge's usual scores. Averaging over presentation orders (RULER's
  ``permutations``) is what corrects it; ``--judge-correction <profile>`` finds that from a
  calibrated profile (:mod:`rubricgym.judges.correction`).

``accuracy`` and ``bias`` take the same form (``oracle:accuracy=0.8,bias=0.5`` is
``oracle:0.8:0.5``); ``order`` combines with either kind.

Examples:
    >>> judge = OracleJudge.parse("oracle:1.0")
    >>> [round(s, 3) for s in judge.scores([True, False, True], seed="t1")]
    [1.0, 0.0, 1.0]
    >>> OracleJudge.parse("oracle:fp=0.3,fn=0.05").scores([True, False], seed="t1")
    [1.0, 0.0]
    >>> OracleJudge.parse("oracle:flip=0.4").name
    'oracle:fp=0.4,fn=0.4 (simulated)'
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


#: the ``key=value`` form's keys and the field each sets (``flip`` sets both rates)
_KEYS = {"accuracy": ("accuracy",), "bias": ("position_bias",), "fp": ("false_positive",), "fn": ("false_negative",),
         "flip": ("false_positive", "false_negative"), "order": ("order_following",)}


@dataclass(frozen=True)
class OracleJudge:
    accuracy: float = 1.0
    """Pairwise accuracy on (good, bad) pairs, in [0.5, 1]."""
    position_bias: float = 0.0
    """Added to the first-presented member's latent score (in units of the good/bad gap)."""
    false_positive: float | None = None
    """Pass / fail judge: the probability that a bad member passes (None: a graded judge)."""
    false_negative: float | None = None
    """Pass / fail judge: the probability that a good member fails."""
    order_following: float = 0.0
    """The probability that a group's scores follow its presentation order instead of quality."""

    def __post_init__(self):
        if not 0.5 <= self.accuracy <= 1.0:
            raise ValueError(f"an oracle judge's pairwise accuracy must be in [0.5, 1], got {self.accuracy}")
        if (self.false_positive is None) != (self.false_negative is None):
            raise ValueError("a pass / fail oracle judge needs both fp and fn (or flip)")
        if self.pass_fail:
            if self.accuracy != 1.0 or self.position_bias:
                raise ValueError("a pass / fail oracle judge (fp, fn) takes no accuracy or bias: its rates are its errors")
            if not (0 <= self.false_positive <= 1 and 0 <= self.false_negative <= 1):
                raise ValueError(f"fp and fn are probabilities in [0, 1], got {self.false_positive} and {self.false_negative}")
        if not 0 <= self.order_following <= 1:
            raise ValueError(f"order is a probability in [0, 1], got {self.order_following}")

    @property
    def pass_fail(self) -> bool:
        return self.false_positive is not None

    @classmethod
    def parse(cls, text: str) -> "OracleJudge":
        """``oracle:<accuracy>[:<position_bias>]`` or ``oracle:key=value,...`` (keys: accuracy,
        bias, fp, fn, flip, order; see the module docstring)."""
        body = text.removeprefix(PREFIX)
        try:
            if "=" not in body:
                parts = body.split(":")
                return cls(float(parts[0]), float(parts[1]) if len(parts) > 1 else 0.0)
            fields: dict[str, float] = {}
            for pair in body.split(","):
                key, value = (part.strip() for part in pair.split("="))
                for name in _KEYS[key]:
                    fields[name] = float(value)
        except (ValueError, IndexError, KeyError):
            raise ValueError(f"an oracle judge is 'oracle:<pairwise accuracy>[:<position bias>]' or 'oracle:key=value,...' "
                             f"with keys {', '.join(_KEYS)}; got {text!r}") from None
        return cls(**fields)

    @property
    def name(self) -> str:
        if not (self.pass_fail or self.order_following):  # the classic form (the seed of its draws: kept as it was)
            return f"oracle:{self.accuracy:g}{f':{self.position_bias:g}' if self.position_bias else ''} (simulated)"
        if self.pass_fail:
            parts = [f"fp={self.false_positive:g}", f"fn={self.false_negative:g}"]
        else:
            parts = [f"accuracy={self.accuracy:g}"] + ([f"bias={self.position_bias:g}"] if self.position_bias else [])
        parts += [f"order={self.order_following:g}"] if self.order_following else []
        return f"oracle:{','.join(parts)} (simulated)"

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
        if n and self.order_following and rng.random() < self.order_following:
            return [1.0 - k / max(1, n - 1) for k in range(n)] if n > 1 else [1.0]
        if self.pass_fail:
            draws = rng.random(n)
            return [float(d >= self.false_negative) if g else float(d < self.false_positive) for g, d in zip(good, draws)]
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
