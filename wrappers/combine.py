"""Combining the env's own reward with added reward components, without losing any of them."""

from __future__ import annotations

from typing import Mapping, Union

#: ``"replace"`` (the added component alone), ``"sum"`` (env reward + component), or weights
#: ``{"env": w_env, "<component>": w, ...}`` for a weighted sum.
Combine = Union[str, Mapping[str, float]]


def combine_reward(env_reward: float, added: Mapping[str, float | None], combine: Combine) -> float:
    """The scalar reward from the env's reward and the added components.

    A component that is ``None`` (its source failed) contributes nothing; with ``"replace"``
    the env reward is kept instead, so a failed judge never zeroes a rollout.

    Example:
        >>> combine_reward(1.0, {"ruler": 0.25}, "sum"), combine_reward(1.0, {"ruler": 0.25}, "replace")
        (1.25, 0.25)
        >>> combine_reward(1.0, {"ruler": 0.5}, {"env": 0.5, "ruler": 2.0})
        1.5
        >>> combine_reward(-1.0, {"ruler": None}, "replace")
        -1.0
    """
    present = {k: float(v) for k, v in added.items() if v is not None}
    if isinstance(combine, str):
        if combine == "sum":
            return float(env_reward) + sum(present.values())
        if combine == "replace":
            return sum(present.values()) if present else float(env_reward)
        raise ValueError(f"combine must be 'replace', 'sum' or a dict of weights, got {combine!r}")
    unknown = set(combine) - {"env", *added}
    if unknown:
        raise ValueError(f"weights for unknown components {sorted(unknown)}; known: env, {', '.join(added)}")
    total = combine.get("env", 0.0) * float(env_reward)
    return total + sum(combine.get(name, 0.0) * value for name, value in present.items())
