"""rubricgym: Gymnasium environments and reward wrappers for training LLM agents with RL.

``import rubricgym`` registers the environment ids (``Math-v0`` ...); ``gym.make("rubricgym:Math-v0")``
does the same without the import.
"""

from rubricgym.records import Group, Trajectory, Transition
from rubricgym.registration import ENVS, register_envs
from rubricgym.spaces import AssistantReplySpace, ChatSpace, UnicodeText

__version__ = "0.1.0"

register_envs()

__all__ = ["ENVS", "AssistantReplySpace", "ChatSpace", "Group", "Trajectory", "Transition", "UnicodeText", "__version__"]
