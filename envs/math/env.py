"""``Math-v0``: solve a problem, end with ``\\boxed{answer}``; optionally use tools first."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from rubricgym.chatenv import ChatEnv, Score, check_choice, ChatEnvConfig, TrainingDefaults, knob_range
from rubricgym.spaces import last_reply
from rubricgym.tools import ParsedAction, Tool, resolve_tools

from .grader import answer_verdict, extract_answer
from .tasks import MathTask, load_tasks, parse_task_id

DEFAULT_SYSTEM_PROMPT = (
    "You are a careful math solver. Reason step by step, then give the final answer "
    "on its own at the end as \\boxed{answer}."
)

TOOLS_PROMPT = (
    "\n\nYou may call tools before answering. To call one, write\n"
    '<tool_call>{{"name": "<tool name>", "arguments": {{...}}}}</tool_call>\n'
    "and wait for the result. You have at most {max_turns} turns in total, the final answer included. "
    "Available tools:\n{schemas}"
)


@dataclass
class MathEnvConfig(ChatEnvConfig):
    """Every knob of :class:`MathEnv`; pass them as ``gym.make("Math-v0", **knobs)``."""

    dataset: str | list = "generated"
    """``"generated"`` (built-in, offline), ``"gsm8k"``, ``"math500"``, ``"aime2024"``, a
    .jsonl/.json/.parquet path, a Hugging Face id (DAPO-Math-17k columns understood), or a list
    of ``{"problem", "answer"}`` dicts."""
    levels: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    """Generator levels used when ``dataset="generated"`` (see ``rubricgym.envs.math.tasks``)."""
    num_tasks: int = field(default=500, metadata=knob_range(1, 100_000))
    """Generated tasks per level."""
    split: str = "train"
    """Generator split: ``"train"`` or ``"test"`` (disjoint seeds)."""
    system_prompt: str | None = None
    """Overrides the default instructions (the tool description is appended when tools are on)."""
    tools: list[str | Tool] = field(default_factory=list)
    """Tools the agent may call before answering, by name (``["calculator"]``) or as Tool objects."""
    max_turns: int = field(default=4, metadata=knob_range(1, 1_000))
    """Turn limit with tools (the final answer counts as a turn); single-turn without tools."""
    correct_reward: float = 1.0
    """Outcome reward for an equivalent answer."""
    incorrect_reward: float = -1.0
    """Outcome reward for a wrong, missing or invalid answer (RLCER's -1; use 0.0 for 1/0)."""
    format_weight: float = 0.0
    """Weight of the format component (1 when the reply has a ``\\boxed{}`` answer, else 0)."""
    answer_fallback: str = "last_number"
    """Where no ``\\boxed{}`` is found: ``"last_number"`` takes the reply's last number, ``"none"`` fails."""
    verify_timeout_s: float = 3.0
    """Time limit on one equivalence check; one that runs out is tried once more with
    ``grader.UNDECIDED_RETRY_S`` (60 s), and one that runs out again is *undecided*, not wrong."""
    undecided_reward: float = 0.0
    """Outcome reward of an undecided check (neutral: halfway between the correct and incorrect
    rewards); ``info["grading"]`` says ``undecided`` and it never counts as solved or as wrong."""
    max_action_chars: int = field(default=200_000, metadata=knob_range(1, 10_000_000))
    """Longer replies are refused with an error (they are not graded)."""


class MathEnv(ChatEnv):
    """Math problems (built-in generator, GSM8K, MATH-500, AIME, DAPO): a verified \\boxed{} answer scores +1, else -1.

    One problem per episode; ``tools=["calculator"]`` makes it multi-turn.

    Observation: the chat so far (system prompt, problem, then the agent's turns and tool
    results). Action: the assistant's reply (string, or a message dict with ``tool_calls``).
    Reward components in ``info["reward_components"]``: ``outcome`` (and ``format`` when
    ``format_weight`` is not 0). A wrong-typed, over-long or unanswerable action gets an error
    message in the observation and ``info["error"]``, and scores ``incorrect_reward``.

    Examples:
        >>> import gymnasium as gym, rubricgym
        >>> env = gym.make("Math-v0", levels=(1,))
        >>> obs, info = env.reset(seed=0)
        >>> obs[-1]["content"]
        'What is 5 + 1?'
        >>> obs, reward, terminated, truncated, info = env.step("5 + 1 = 6, so \\\\boxed{6}")
        >>> reward, terminated, info["reward_components"]
        (1.0, True, {'outcome': 1.0})
    """

    # the single-digit sums the default model can learn on a CPU in minutes; a boxed sum needs about 15 tokens
    training = TrainingDefaults(env_kwargs={"levels": (1,)}, reward_name="rlvr", bench=True)

    @classmethod
    def held_out_kwargs(cls, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The generator's test split; a public dataset is its own held-out set."""
        if kwargs.get("dataset", "generated") != "generated":
            return dict(kwargs)
        return {**kwargs, "split": "test"}

    @classmethod
    def scripted_agents(cls) -> dict[str, Any]:
        """``expert`` (the calculator policy: exact) and ``partly_right`` (the estimate policy: one
        significant digit, right on small sums only)."""
        from .scripted import POLICIES

        return {"expert": lambda messages, env: POLICIES["calculator"](messages),
                "partly_right": lambda messages, env: POLICIES["estimate"](messages)}

    @classmethod
    def scripted_sft_rows(cls, policy: str, episodes: int, seed: int, env_kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        """SFT rows from a scripted agent's solved episodes (``TrainConfig.warm_start = "scripted:<agent>"``;
        :func:`rubricgym.envs.math.scripted.scripted_sft_rows`)."""
        from .scripted import scripted_sft_rows

        return scripted_sft_rows(policy, episodes=episodes, seed=seed, env_kwargs=env_kwargs)

    config_class = MathEnvConfig

    def __init__(self, config: MathEnvConfig | None = None, render_mode: str | None = None, **kwargs: Any):
        if "levels" in kwargs and isinstance(kwargs["levels"], int):  # levels=1 means (1,)
            kwargs["levels"] = (kwargs["levels"],)
        super().__init__(config, render_mode, **kwargs)

    def setup(self) -> list[MathTask]:
        cfg = self.config
        check_choice("answer_fallback", cfg.answer_fallback, ("last_number", "none"))
        check_choice("split", cfg.split, ("train", "test"))
        tasks = load_tasks(cfg.dataset, levels=cfg.levels, num_tasks=cfg.num_tasks, split=cfg.split)
        if not tasks:
            raise ValueError(f"dataset {cfg.dataset!r} has no tasks")
        self.tools = resolve_tools(cfg.tools)
        prompt = cfg.system_prompt or DEFAULT_SYSTEM_PROMPT
        if self.tools:
            schemas = "\n".join(json.dumps(tool.schema, ensure_ascii=False) for tool in self.tools.values())
            prompt += TOOLS_PROMPT.format(max_turns=self.turn_limit(), schemas=schemas)
        self.system_prompt = prompt
        return tasks

    def turn_limit(self) -> int:
        """``max_turns`` with tools; single-turn without."""
        return self.config.max_turns if self.tools else 1

    def find_task(self, task_id: str) -> MathTask:
        # generated ids outside the loaded range are still valid tasks
        task = self.tasks_by_id.get(str(task_id)) or parse_task_id(str(task_id))
        if task is None:
            raise ValueError(f"unknown task_id {task_id!r} for dataset {self.config.dataset!r}")
        return task

    task_by_id = find_task

    def first_messages(self, task: MathTask, options: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": task.problem}]

    def task_info(self) -> dict[str, Any]:
        # the reference stays out of info (an agent fed info would copy it); judges read episode.reference
        info: dict[str, Any] = {"problem": self.task.problem}
        if "level" in self.task.metadata:
            info["level"] = self.task.metadata["level"]
        return info

    def reference(self) -> str | None:
        return str(self.task.answer)

    def score(self, final: ParsedAction | None) -> Score:
        cfg = self.config
        extraction = extract_answer(final.content, cfg.answer_fallback) if final is not None else None
        verdict = False
        if extraction is not None and extraction.answer is not None:
            verdict = answer_verdict(self.task.answer, extraction.answer, cfg.verify_timeout_s)
        correct = verdict is True
        outcome = cfg.undecided_reward if verdict is None else cfg.correct_reward if correct else cfg.incorrect_reward
        components = {"outcome": outcome}
        if cfg.format_weight:
            components["format"] = 1.0 if extraction is not None and extraction.method == "boxed" else 0.0
        reward = components["outcome"] + cfg.format_weight * components.get("format", 0.0)
        return Score(reward=reward, components=components, correct=correct, info={
            "extracted_answer": None if extraction is None else extraction.answer,
            "extraction": "none" if extraction is None else extraction.method,
            "grading": "undecided" if verdict is None else "decided"})


def boxed_format(messages: list, info: dict[str, Any]) -> float:
    """The math family's format check (the ``format`` control, ``MathFormat-v0``): 1 when the final
    reply has a ``\\boxed{}`` answer, right or wrong."""
    return 1.0 if info.get("extraction") == "boxed" else 0.0


def shaped_reward(messages: list, info: dict[str, Any]) -> float:
    """A typical hand-written math reward (``MathFunction-v0``): +0.2 for a ``\\boxed{}`` answer,
    minus 0.002 per character of the final reply beyond 200 (at most -0.5); summed with the outcome."""
    reply = last_reply(messages)
    format_bonus = 0.2 if info.get("extraction") == "boxed" else 0.0
    length_penalty = min(0.5, 0.002 * max(0, len(reply) - 200))
    return format_bonus - length_penalty


def math_candidates(env: Any, messages: list, info: dict) -> list[str]:
    """Answers computed from the problem's first two numbers: a + b, a - b, a * b, a, b, 0."""
    numbers = [int(x) for x in re.findall(r"-?\d+", info.get("problem") or messages[-1]["content"])][:2] + [0, 0]
    a, b = numbers[0], numbers[1]
    return [f"\\boxed{{{value}}}" for value in (a + b, a - b, a * b, a, b, 0)]
