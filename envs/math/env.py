"""``Math-v0``: solve a problem, end with ``\\boxed{answer}``; optionally use tools first."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym

from rubricgym.spaces import AssistantReplySpace, ChatSpace
from rubricgym.tools import Tool, execute_tool_calls, parse_action, resolve_tools

from .grader import answers_match, extract_answer
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
class MathEnvConfig:
    """Every knob of :class:`MathEnv`; pass them as ``gym.make("Math-v0", **knobs)``."""

    dataset: str | list = "generated"
    """``"generated"`` (built-in, offline), ``"gsm8k"``, ``"math500"``, ``"aime2024"``, a
    .jsonl/.json/.parquet path, a Hugging Face id (DAPO-Math-17k columns understood), or a list
    of ``{"problem", "answer"}`` dicts."""
    levels: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    """Generator levels used when ``dataset="generated"`` (see ``rubricgym.envs.math.tasks``)."""
    num_tasks: int = 500
    """Generated tasks per level."""
    split: str = "train"
    """Generator split: ``"train"`` or ``"test"`` (disjoint seeds)."""
    system_prompt: str | None = None
    """Overrides the default instructions (the tool description is appended when tools are on)."""
    tools: list[str | Tool] = field(default_factory=list)
    """Tools the agent may call before answering, by name (``["calculator"]``) or as Tool objects."""
    max_turns: int = 4
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
    """Hard time limit on one equivalence check; a check that runs out counts as wrong."""
    max_action_chars: int = 200_000
    """Longer replies are refused with an error (they are not graded)."""


class MathEnv(gym.Env):
    """A math problem per episode; the reward is the verified outcome of the final answer.

    Observation: the chat so far (system prompt, problem, then the agent's turns and tool
    results). Action: the assistant's reply (string, or a message dict with ``tool_calls``).
    Reward components in ``info["reward_components"]``: ``outcome`` (and ``format`` when
    ``format_weight`` is not 0). A wrong-typed, over-long or unanswerable action gets an error
    message in the observation and ``info["error"]``, and scores ``incorrect_reward``.

    Example:
        >>> import gymnasium as gym, rubricgym
        >>> env = gym.make("Math-v0", levels=(1,))
        >>> obs, info = env.reset(seed=0)
        >>> obs[-1]["content"]
        'What is 6 + 6?'
        >>> obs, reward, terminated, truncated, info = env.step("6 + 6 = 12, so \\\\boxed{12}")
        >>> reward, terminated, info["reward_components"]
        (1.0, True, {'outcome': 1.0})
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, config: MathEnvConfig | None = None, render_mode: str | None = None, **kwargs: Any):
        if config is not None and kwargs:
            raise TypeError("pass either a MathEnvConfig or keyword arguments, not both")
        if "levels" in kwargs and isinstance(kwargs["levels"], int):
            kwargs["levels"] = (kwargs["levels"],)
        self.config = config or MathEnvConfig(**kwargs)
        cfg = self.config
        if cfg.answer_fallback not in ("last_number", "none"):
            raise ValueError(f"answer_fallback must be 'last_number' or 'none', got {cfg.answer_fallback!r}")
        self.render_mode = render_mode
        self.tasks: list[MathTask] = load_tasks(cfg.dataset, levels=cfg.levels, num_tasks=cfg.num_tasks, split=cfg.split)
        if not self.tasks:
            raise ValueError(f"dataset {cfg.dataset!r} has no tasks")
        self._tasks_by_id = {task.id: task for task in self.tasks}
        self.tools = resolve_tools(cfg.tools)
        self.tool_schemas = [tool.schema for tool in self.tools.values()]
        self.max_turns = cfg.max_turns if self.tools else 1
        prompt = cfg.system_prompt or DEFAULT_SYSTEM_PROMPT
        if self.tools:
            schemas = "\n".join(json.dumps(schema, ensure_ascii=False) for schema in self.tool_schemas)
            prompt += TOOLS_PROMPT.format(max_turns=self.max_turns, schemas=schemas)
        self.system_prompt = prompt
        self.observation_space = ChatSpace()
        self.action_space = AssistantReplySpace(max_length=cfg.max_action_chars)
        self.task: MathTask | None = None
        self.messages: list[dict[str, Any]] = []
        self._turn = 0
        self._done = True

    # -- episode -------------------------------------------------------------------------------

    def task_by_id(self, task_id: str) -> MathTask:
        task = self._tasks_by_id.get(str(task_id)) or parse_task_id(str(task_id))
        if task is None:
            raise ValueError(f"unknown task_id {task_id!r} for dataset {self.config.dataset!r}")
        return task

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """``options``: ``task_id`` picks the problem; ``hint`` (text) is appended to it."""
        super().reset(seed=seed)
        options = options or {}
        if options.get("task_id") is not None:
            self.task = self.task_by_id(options["task_id"])
        else:
            self.task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        problem = self.task.problem
        if options.get("hint"):  # extra guidance for this episode (e.g. a task's learned rubrics)
            problem = f"{problem}\n\n{options['hint']}"
        self.messages = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": problem},
        ]
        self._turn, self._done = 0, False
        return list(self.messages), self._info()

    def _info(self, **extra: Any) -> dict[str, Any]:
        task = self.task
        info: dict[str, Any] = {
            "task_id": task.id,
            "system_prompt": self.system_prompt,
            "problem": task.problem,
            "answer": task.answer,
            "turn": self._turn,
        }
        if "level" in task.metadata:
            info["level"] = task.metadata["level"]
        if self.tools:
            info["tools"] = self.tool_schemas
        info.update(extra)
        return info

    def step(self, action: Any):
        if self._done:
            error = "the episode has ended; call reset() before step()"
            return list(self.messages), 0.0, True, False, self._info(error=error, reward_components={})
        self._turn += 1
        parsed = parse_action(action, max_chars=self.config.max_action_chars)
        if parsed.invalid:
            self.messages.append({"role": "assistant", "content": parsed.content})
            self.messages.append({"role": "user", "content": f"Error: {parsed.invalid}"})
            if self._turn < self.max_turns:  # multi-turn: the error costs a turn
                return list(self.messages), 0.0, False, False, self._info(error=parsed.invalid, reward_components={})
            return self._finish(answer_text=None, error=parsed.invalid, truncated=False)
        self.messages.append(parsed.assistant_message())
        if self.tools and parsed.wants_tools:
            results, errors = execute_tool_calls(parsed, self.tools)
            self.messages += results
            if self._turn >= self.max_turns:
                return self._finish(answer_text=None, error="turn limit reached without a final answer", truncated=True)
            extra = {"error": "; ".join(errors)} if errors else {}
            return list(self.messages), 0.0, False, False, self._info(reward_components={}, **extra)
        return self._finish(answer_text=parsed.content, error=None, truncated=False)

    def _finish(self, answer_text: str | None, error: str | None, truncated: bool):
        cfg = self.config
        self._done = True
        extraction = extract_answer(answer_text, cfg.answer_fallback) if answer_text is not None else None
        correct = bool(
            extraction is not None
            and extraction.answer is not None
            and answers_match(self.task.answer, extraction.answer, cfg.verify_timeout_s)
        )
        components = {"outcome": cfg.correct_reward if correct else cfg.incorrect_reward}
        if cfg.format_weight:
            components["format"] = 1.0 if extraction is not None and extraction.method == "boxed" else 0.0
        reward = components["outcome"] + cfg.format_weight * components.get("format", 0.0)
        extra: dict[str, Any] = {
            "correct": correct,
            "extracted_answer": None if extraction is None else extraction.answer,
            "extraction": "none" if extraction is None else extraction.method,
            "reward_components": components,
        }
        if error:
            extra["error"] = error
        return list(self.messages), float(reward), not truncated, truncated, self._info(**extra)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{m['role']}] {m.get('content') or m.get('tool_calls')}" for m in self.messages)

    def describe(self) -> dict[str, Any]:
        """The configuration as plain data (for logs and benchmark tables)."""
        data = asdict(self.config)
        data["tools"] = list(self.tools)
        if not isinstance(self.config.dataset, str):
            data["dataset"] = f"<{len(self.tasks)} records>"
        return data
