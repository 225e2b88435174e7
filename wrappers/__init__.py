"""Wrappers: the group vector env, reward wrappers over the judge cores, the generic variant
factory, and adapters for other agents."""

from rubricgym.judges.base import combine_reward

from .episode import EpisodeReward, GroupReward
from .function import FunctionReward, FunctionScorer
from .group import GroupVectorEnv, make_group_vector_env
from .sb3 import CandidateActions, hashed_features
from .scheme import RewardScheme

__all__ = ["CandidateActions", "EpisodeReward", "FunctionReward", "FunctionScorer", "GroupReward", "GroupVectorEnv",
           "RewardScheme", "combine_reward", "hashed_features", "make_group_vector_env"]
