"""rubricgym: Gymnasium environments and reward wrappers for training LLM agents with RL.

``import rubricgym`` registers the environment ids (``Math-v0`` ...); ``gym.make("rubricgym:Math-v0")``
does the same without the import.
"""

from pathlib import Path as _Path

# Imported from a checkout's root (where the source folder shadows an installed rubricgym): the
# families, wrappers, agents and integrations live beside this folder and are mapped in by
# package-dir only when installed, so the checkout's root joins the package path here.
_here = _Path(__file__).resolve().parent
if not (_here / "envs").is_dir() and (_here.parent / "envs" / "__init__.py").is_file() \
        and (_here.parent / "pyproject.toml").is_file():
    __path__.append(str(_here.parent))

from rubricgym.records import Group, Trajectory, Transition  # noqa: E402
from rubricgym.registration import ENVS, register_envs  # noqa: E402
from rubricgym.spaces import AssistantReplySpace, ChatSpace, UnicodeText  # noqa: E402

__version__ = "0.1.0"

register_envs()

__all__ = ["ENVS", "AssistantReplySpace", "ChatSpace", "Group", "Trajectory", "Transition", "UnicodeText", "__version__"]
