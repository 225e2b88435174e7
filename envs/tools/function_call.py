"""``FunctionCall-v0``: single-turn function calling on BFCL-format rows, scored by AST check."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rubricgym.chatenv import ChatEnv, Score, ChatEnvConfig, scripted_sft_rows, split_tasks, TrainingDefaults, knob_range
from rubricgym.data import DatasetLoadError, load_records
from rubricgym.tools import ParsedAction, format_tool_call

from .bfcl import check_calls, to_openai_schema, truth_calls

SYSTEM_PROMPT = (
    "You can call the functions below. To call one, write "
    '<tool_call>{"name": "<function name>", "arguments": {...}}</tool_call>; write one tag per call when several '
    "calls are needed. If none of the functions fits the request, answer in plain text without calling any.\n"
    "Functions:\n{schemas}"
)


@dataclass
class FunctionCallConfig(ChatEnvConfig):
    """Every knob of :class:`FunctionCallEnv`."""

    dataset: str = "simple_python"
    """A BFCL-format .jsonl path, or a category name (``bfcl_v4/<category>.jsonl`` in a data folder; ``rubricgym data fetch bfcl_<category>``)."""
    correct_reward: float = 1.0
    incorrect_reward: float = 0.0
    max_action_chars: int = field(default=200_000, metadata=knob_range(1, 10_000_000))
    """Longer replies are refused with an error."""
    split: str = "all"
    """``all``, or ``train`` / ``test``: every fifth row is held out for ``test``."""


class FunctionCallEnv(ChatEnv):
    """Single-turn function calling on BFCL-format rows (dataset=<category or .jsonl>): the reward is BFCL's AST check.

    One row per episode: the tools are the row's functions, the action is the agent's tool
    calls (they are the answer and are not executed); ``info["reward_components"]["ast"]``.
    """

    execute_tools = False
    training = TrainingDefaults(env_kwargs={"split": "train"}, held_out={"split": "test"}, max_new_tokens=128)

    config_class = FunctionCallConfig

    def setup(self) -> list[dict[str, Any]]:
        cfg = self.config
        path = cfg.dataset
        # a category is the registered dataset bfcl_<category> (any data folder, or `rubricgym data fetch`)
        rows = load_records(path if str(path).endswith(".jsonl") else f"bfcl_{path}")
        if not rows or "function" not in rows[0]:
            raise DatasetLoadError(f"{path}: not a BFCL-format file (rows need 'question' and 'function')")
        return split_tasks(rows, cfg.split)

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.tasks

    @property
    def row(self) -> dict[str, Any] | None:
        return self.task

    def task_id(self, task: dict[str, Any]) -> str:
        return str(task["id"])

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The OpenAI schemas of the current row's functions (shown to the agent, never executed)."""
        return [to_openai_schema(f) for f in self.task["function"]] if self.task is not None else []

    def first_messages(self, task: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
        turn = task["question"][0]
        schemas = [to_openai_schema(f) for f in task["function"]]
        system = SYSTEM_PROMPT.replace("{schemas}", "\n".join(json.dumps(t, ensure_ascii=False) for t in schemas))
        extra_system = [m["content"] for m in turn if m.get("role") == "system"]
        if extra_system:
            system = "\n\n".join(extra_system + [system])
        return [{"role": "system", "content": system}] + [m for m in turn if m.get("role") != "system"]

    def task_info(self) -> dict[str, Any]:
        return {"category": self.task.get("category")}

    @classmethod
    def scripted_sft_rows(cls, policy: str = "reference", episodes: int = 64, seed: int = 0,
                          env_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """SFT rows ``{"messages": observation, "completion": reply}`` for a warm start
        (``--warm-start scripted:reference``): the ``reference`` agent writes each *train-split*
        row's labelled calls (the first acceptable value of each argument), and a row is kept only
        when the env's AST check accepts it. Held-out rows are never shown.

        Examples:
            >>> rows = FunctionCallEnv.scripted_sft_rows(episodes=2, env_kwargs={"dataset": "simple_python"})  # doctest: +SKIP
            >>> rows[0]["completion"][:30]                                                                     # doctest: +SKIP
            '<tool_call>{"name": "calculate'
        """
        if policy != "reference":
            raise ValueError(f"unknown scripted policy {policy!r} for FunctionCall-v0; choose from reference")
        def reference(messages: list, env: "FunctionCallEnv") -> str:
            return "".join(format_tool_call(name, args) for name, args in truth_calls(env.task.get("ground_truth") or []))

        return scripted_sft_rows(cls(**{**(env_kwargs or {}), "split": "train"}), reference, episodes, seed, every_task=True)

    def score(self, final: ParsedAction | None) -> Score:
        cfg = self.config
        if final is None:
            correct, reason = False, "no valid reply"
        elif final.errors:
            correct, reason = False, "; ".join(final.errors)
        else:
            calls = [(c.name, c.arguments) for c in final.tool_calls]
            correct, reason = check_calls(calls, self.task.get("ground_truth"), self.task["function"], self.task.get("category"))
        reward = cfg.correct_reward if correct else cfg.incorrect_reward
        return Score(reward=reward, components={"ast": 1.0 if correct else 0.0}, correct=correct, info={"reason": reason})
