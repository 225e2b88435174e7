"""Judge cores with no gym import: RULER group judging and RLCER self-evolving rubrics, usable
from rubricgym's wrappers and from other trainers' reward functions alike."""

from .base import Combine, GroupScore, GroupScorer, Member, MemberScore, apply_member_score, combine_reward, rescore_group, run_sync

__all__ = ["Combine", "GroupScore", "GroupScorer", "Member", "MemberScore", "apply_member_score", "combine_reward",
           "rescore_group", "run_sync"]
