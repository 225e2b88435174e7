"""Math environments: verifiable answers, built-in generator and public benchmark loaders."""

from .env import DEFAULT_SYSTEM_PROMPT, MathEnv, MathEnvConfig
from .grader import Extraction, answers_match, extract_answer, last_boxed
from .tasks import LEVELS, MathTask, generate_task, generated_tasks, load_tasks

__all__ = [
    "DEFAULT_SYSTEM_PROMPT", "LEVELS", "Extraction", "MathEnv", "MathEnvConfig", "MathTask", "answers_match",
    "extract_answer", "generate_task", "generated_tasks", "last_boxed", "load_tasks",
]
