"""Control rewards: what a reward scheme must beat before it has shown anything.

GRPO can gain from a reward that carries no information (Shao et al., "Spurious Rewards", 2025:
a Bernoulli(0.5) reward gave Qwen2.5-Math-7B +21.4 points on MATH-500 against +29.1 for the true
one), so every bench table carries these rows beside the env's own reward:

* ``random`` (``<Family>Random-v0``, every family): a coin flip per completion. The flip is a
  keyed hash of (``seed``, task id, the final reply), so it is seeded and the same on every rerun,
  independent of batch order, and two identical replies get the same coin.
* ``format`` (``<Family>Format-v0``, families that name a format check): 1 for a well-formed
  answer, 0 otherwise, whatever its content (math: a ``\\boxed{}`` answer).

Both replace the env's reward by default (``combine="replace"``); the env's outcome stays in
``info["reward_components"]`` and in the verified success the bench reports.

Examples:
    >>> import gymnasium as gym, rubricgym
    >>> env = gym.make("MathRandom-v0", levels=(1,))
    >>> _, info = env.reset(seed=0)
    >>> _, reward, terminated, _, info = env.step("\\\\boxed{3}")
    >>> terminated, reward == info["reward_components"]["random"], sorted(info["reward_components"])
    (True, True, ['env', 'outcome', 'random'])
"""

from __future__ import annotations

import numbers

import hashlib
from typing import Any

from rubricgym.spaces import last_reply

from .function import FunctionScorer, function_scorer
from .scheme import RewardScheme


def every_family(env_class: type) -> bool:
    return True


class CoinFlip:
    """A Bernoulli(0.5) reward keyed by (seed, task id, final reply): seeded, order-free.

    Examples:
        >>> flip = CoinFlip(seed=0)
        >>> flip([{"role": "assistant", "content": "42"}], {"task_id": "t1"}) in (0.0, 1.0)
        True
        >>> flip([{"role": "assistant", "content": "42"}], {"task_id": "t1"}) == flip([{"role": "assistant", "content": "42"}], {"task_id": "t1"})
        True
    """

    def __init__(self, seed: int = 0):
        if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
            raise ValueError(f"seed must be an integer, got {seed!r:.40}")
        self.seed = int(seed)

    def __call__(self, messages: list, info: dict[str, Any]) -> float:
        episode = info.get("episode")
        task_id = getattr(episode, "task_id", None) or info.get("task_id", "")
        key = f"{self.seed}\x1f{task_id}\x1f{last_reply(messages)}".encode("utf-8", "surrogatepass")
        return float(hashlib.blake2b(key, digest_size=1).digest()[0] & 1)


def random_scorer(knobs: dict[str, Any]) -> FunctionScorer:
    return FunctionScorer(CoinFlip(knobs.get("seed", 0)), name="random", combine=knobs.get("combine", "replace"))


def format_scorer(knobs: dict[str, Any]) -> FunctionScorer:
    """The family's format check (``fn``: a callable or ``"module:attribute"`` returning 0 / 1)."""
    if "fn" not in knobs:
        raise TypeError("a Format variant needs fn=<the family's format check>")
    return function_scorer({"fn": knobs["fn"], "name": "format", "combine": knobs.get("combine", "replace")})


RANDOM = RewardScheme(name="random", suffix="Random",
                      summary="control: a seeded coin flip per completion (Bernoulli(0.5)); a scheme that does not beat it has shown nothing",
                      knobs=frozenset({"seed", "combine"}), build_scorer=random_scorer, defaults={"combine": "replace"},
                      derive=every_family, history_size=0)
"""``<Family>Random-v0`` for every family."""

FORMAT = RewardScheme(name="format", suffix="Format",
                      summary="control: 1 for a well-formed answer, whatever its content (families that name a format check)",
                      knobs=frozenset({"fn", "combine"}), build_scorer=format_scorer, defaults={"combine": "replace"},
                      history_size=0)
"""``<Family>Format-v0`` for families that name their check (``format={"fn": ...}``)."""
