"""Registered environment ids: ``gym.make(id)`` for one env, ``gym.make_vec(id, ...)`` for groups.

Each id is a base env plus a documented stack of wrappers. The entry points are strings or
lazy callables, so importing the kernel imports no env family.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym


@dataclass(frozen=True)
class EnvInfo:
    id: str
    entry_point: str
    summary: str
    vector_entry_point: str | None = None
    """Where the group version is not "the group vector env of this id" (reward wrappers on top)."""
    kwargs: dict[str, Any] = field(default_factory=dict)


ENVS: list[EnvInfo] = [
    EnvInfo("Math-v0", "rubricgym.envs.math:MathEnv",
            "math problems (built-in generator, GSM8K, MATH-500, AIME, DAPO); verified \\boxed{} answer, +1/-1; tools=['calculator'] for multi-turn"),
    EnvInfo("MathFunction-v0", "rubricgym.wrappers.function:make_math_function_env",
            "Math-v0 + a hand-written shaped reward (+0.2 for \\boxed{}, minus a length penalty) summed with the outcome"),
    EnvInfo("MathRuler-v0", "rubricgym.wrappers.ruler:make_ruler_env",
            "Math-v0 + RULER group judge (judge='local' by default); reward = outcome (+1/-1) + ruler score (0..1)",
            vector_entry_point="rubricgym.wrappers.ruler:make_ruler_vector_env", kwargs={"base_env": "Math-v0"}),
    EnvInfo("MathRubric-v0", "rubricgym.wrappers.rubrics:make_rubric_env",
            "Math-v0 + self-evolving rubrics (RLCER): the policy also writes rubrics (role 'rubricator'); reward = outcome + valid-rubric CoT score",
            vector_entry_point="rubricgym.wrappers.rubrics:make_rubric_vector_env", kwargs={"base_env": "Math-v0"}),
    EnvInfo("RagSupport-v0", "rubricgym.envs.rag:RagSupportEnv",
            "customer support from a knowledge base (built-in Lumen Books, covid_faq, xquad_en, mtrag_un); mode='context' or 'agentic' (search tool); token F1 + citation + refusal + grounding"),
    EnvInfo("RagSupportRuler-v0", "rubricgym.wrappers.ruler:make_ruler_env",
            "RagSupport-v0 + RULER group judge; reward = 0.5 * env components + 0.5 * ruler score",
            vector_entry_point="rubricgym.wrappers.ruler:make_ruler_vector_env",
            kwargs={"base_env": "RagSupport-v0", "combine": {"env": 0.5, "ruler": 0.5}}),
    EnvInfo("ToolUse-v0", "rubricgym.envs.tools:ToolUseEnv",
            "multi-turn customer service on a fresh SQLite database (9 tools with business rules, 70 tasks per split); reward = goal end state + progress"),
    EnvInfo("ToolUseRuler-v0", "rubricgym.wrappers.ruler:make_ruler_env",
            "ToolUse-v0 + RULER (the judge sees the tool schemas); reward = 0.75 * env + 0.25 * ruler score",
            vector_entry_point="rubricgym.wrappers.ruler:make_ruler_vector_env",
            kwargs={"base_env": "ToolUse-v0", "combine": {"env": 0.75, "ruler": 0.25}}),
    EnvInfo("FunctionCall-v0", "rubricgym.envs.tools:FunctionCallEnv",
            "single-turn function calling on BFCL-format rows (dataset=<category or .jsonl>); reward = BFCL AST check"),
]


class GroupVectorEntryPoint:
    """``gym.make_vec(id, num_envs=..., group_size=...)``: the group vector env of ``id``."""

    def __init__(self, env_id: str):
        self.env_id = env_id

    def __call__(self, num_envs: int = 1, group_size: int = 1, **kwargs: Any):
        from rubricgym.wrappers.group import make_group_vector_env  # lazy: the kernel imports no wrappers

        return make_group_vector_env(self.env_id, num_envs=num_envs, group_size=group_size, **kwargs)

    def __repr__(self) -> str:
        return f"GroupVectorEntryPoint({self.env_id!r})"


def register_envs() -> None:
    """Register every rubricgym id with Gymnasium (idempotent)."""
    for env in ENVS:
        if env.id in gym.registry:
            continue
        gym.register(id=env.id, entry_point=env.entry_point,
                     vector_entry_point=env.vector_entry_point or GroupVectorEntryPoint(env.id), kwargs=dict(env.kwargs))
