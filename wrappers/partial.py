"""Partial credit: a reward from the family's own state where pass / fail is flat.

A family that defines :meth:`~rubricgym.chatenv.ChatEnv.partial_credit` names the parts of its
task, each in [0, 1], read at the episode's end (the shop: valid calls, the right tables, the right
rows, no forbidden change; support: the right citation, a refusal exactly when one is due, valid
search calls). The ``partial`` scheme (``<Family>Partial-v0``, derived for those families) rewards
their mean, replacing the env's pass / fail by default; every part is also reported as
``partial_<name>`` in ``info["reward_components"]``.

Examples:
    >>> import gymnasium as gym, rubricgym
    >>> env = gym.make("ToolUsePartial-v0")
    >>> _, info = env.reset(seed=0)
    >>> _, reward, terminated, _, info = env.step("I cannot help with that.")   # no call, nothing changed
    >>> terminated, reward, info["reward_components"]["partial_no_forbidden"]   # 1 part of 4: no harm done
    (True, 0.25, 1.0)
"""

from __future__ import annotations

from typing import Any, Sequence

from rubricgym.chatenv import ChatEnv
from rubricgym.judges.base import Combine, GroupScore, Member, MemberScore, combine_reward

from .scheme import RewardScheme


class PartialCreditScorer:
    """Scores each member alone with the mean of its episode's partial credit (not relative)."""

    relative = False
    name = "partial"

    def __init__(self, combine: Combine = "replace"):
        combine_reward(0.0, {self.name: 0.0}, combine)  # a bad combine fails at construction
        self.combine = combine

    def _one(self, member: Member) -> MemberScore:
        parts = member.episode.metadata.get("partial_credit") or {}
        if not parts:  # a family without partial credit keeps its own reward, and says why
            return MemberScore(reward=member.env_reward, components={"env": member.env_reward},
                               info={"partial_error": "the episode has no partial credit (its family defines none)"})
        value = sum(parts.values()) / len(parts)
        components = {"env": member.env_reward, self.name: value, **{f"partial_{k}": float(v) for k, v in parts.items()}}
        return MemberScore(reward=combine_reward(member.env_reward, {self.name: value}, self.combine), components=components)

    async def score_group(self, task_id: str, members: Sequence[Member]) -> GroupScore:
        return GroupScore([self._one(m) for m in members])


def partial_scorer(knobs: dict[str, Any]) -> PartialCreditScorer:
    return PartialCreditScorer(knobs.get("combine", "replace"))


def defines_partial_credit(env_class: type) -> bool:
    """Families whose env overrides :meth:`ChatEnv.partial_credit`."""
    return isinstance(env_class, type) and issubclass(env_class, ChatEnv) and env_class.partial_credit is not ChatEnv.partial_credit


PARTIAL = RewardScheme(
    name="partial", suffix="Partial", summary="partial credit: the mean of the parts of the task done, from the family's own state",
    knobs=frozenset({"combine"}), build_scorer=partial_scorer, defaults={"combine": "replace"},
    derive=defines_partial_credit, history_size=0)
"""``<Family>Partial-v0`` for every family that defines partial credit."""
