"""Wrappers: the group vector env, reward wrappers and adapters for other agents."""

from .group import GroupVectorEnv, make_group_vector_env

__all__ = ["GroupVectorEnv", "make_group_vector_env"]
