"""Wrappers: the group vector env, reward wrappers and adapters for other agents."""

from .combine import combine_reward
from .function import FunctionReward, math_shaped_reward
from .group import GroupVectorEnv, make_group_vector_env
from .sb3 import CandidateActions, hashed_features, math_candidates, tooluse_candidates

__all__ = ["CandidateActions", "FunctionReward", "math_shaped_reward", "GroupVectorEnv", "combine_reward", "hashed_features", "make_group_vector_env",
           "math_candidates", "tooluse_candidates"]
