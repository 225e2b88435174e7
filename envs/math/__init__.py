"""Math environments: verifiable answers, built-in generator and public benchmark loaders."""

from functools import partial

from rubricgym.data import register_dataset
from rubricgym.registration import register_family
from rubricgym.tools import register_tool

from .env import DEFAULT_SYSTEM_PROMPT, MathEnv, MathEnvConfig, boxed_format, math_candidates, shaped_reward
from .grader import Extraction, answer_verdict, answers_match, extract_answer, last_boxed, math_correct
from .tasks import LEVELS, PUBLIC_DATASETS, UPSTREAM, UPSTREAM_ROWS, rows_from_upstream, MathTask, generate_task, generated_tasks, load_tasks


def register() -> None:
    """The math family's ids (named in pyproject.toml's ``rubricgym.envs`` entry points).

    ``MathRuler-v0``: reward = outcome (+1/-1) + RULER score (0..1); ``MathFunction-v0``: outcome +
    :func:`shaped_reward`; ``MathFormat-v0``: the format control (:func:`boxed_format`).
    """
    register_tool("calculator", "rubricgym.envs.math.calculator:CALCULATOR")
    for name, (shared_file, hub_id, split) in PUBLIC_DATASETS.items():
        url, licence = UPSTREAM.get(name, ("", ""))
        register_dataset(name, shared_file, hub_id, split, urls=(url,) if url else (), licence=licence,
                         convert=partial(rows_from_upstream, name), rows=UPSTREAM_ROWS.get(name, 0))
    register_family("Math", MathEnv, default=True, ruler={"combine": "sum"}, rubric={},
                    function={"fn": "rubricgym.envs.math:shaped_reward", "name": "shaped"},
                    format={"fn": "rubricgym.envs.math:boxed_format"})


__all__ = [
    "DEFAULT_SYSTEM_PROMPT", "LEVELS", "boxed_format", "Extraction", "MathEnv", "MathEnvConfig", "MathTask", "answer_verdict", "answers_match",
    "extract_answer", "generate_task", "math_candidates", "math_correct", "generated_tasks", "last_boxed", "load_tasks", "register", "shaped_reward",
]
