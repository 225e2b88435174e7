"""``FunctionCall-v0``: single-turn function calling on BFCL-format rows, scored by AST check."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from rubricgym.data import DatasetLoadError, load_records, shared_data_dir
from rubricgym.spaces import AssistantReplySpace, ChatSpace
from rubricgym.tools import parse_action

from .bfcl import check_calls, to_openai_schema

SYSTEM_PROMPT = (
    "You can call the functions below. To call one, write "
    '<tool_call>{"name": "<function name>", "arguments": {...}}</tool_call>; write one tag per call when several '
    "calls are needed. If none of the functions fits the request, answer in plain text without calling any.\n"
    "Functions:\n{schemas}"
)


@dataclass
class FunctionCallConfig:
    dataset: str = "simple_python"
    """A BFCL-format .jsonl path, or a category name read from ../shared/data/bfcl_v4."""
    correct_reward: float = 1.0
    incorrect_reward: float = 0.0


class FunctionCallEnv(gym.Env):
    """One BFCL row per episode: the tools are the row's functions, the action is the agent's
    tool calls, the reward is BFCL's AST check (``info["reward_components"]["ast"]``)."""

    metadata = {"render_modes": [], "render_fps": 4}

    def __init__(self, config: FunctionCallConfig | None = None, **kwargs: Any):
        self.config = cfg = config or FunctionCallConfig(**kwargs)
        path = cfg.dataset
        if not str(path).endswith(".jsonl"):
            folder = shared_data_dir()
            if folder is None:
                raise DatasetLoadError(f"BFCL category {path!r} is read from ../shared/data/bfcl_v4; pass a .jsonl path")
            path = folder / "bfcl_v4" / f"{cfg.dataset}.jsonl"
        self.rows = load_records(path)
        if not self.rows or "function" not in self.rows[0]:
            raise DatasetLoadError(f"{path}: not a BFCL-format file (rows need 'question' and 'function')")
        self.rows_by_id = {str(r["id"]): r for r in self.rows}
        self.observation_space = ChatSpace()
        self.action_space = AssistantReplySpace(max_length=200_000)
        self.row: dict[str, Any] | None = None
        self.messages: list[dict[str, Any]] = []
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        if options.get("task_id") is not None:
            if str(options["task_id"]) not in self.rows_by_id:
                raise ValueError(f"unknown task_id {options['task_id']!r}")
            self.row = self.rows_by_id[str(options["task_id"])]
        else:
            self.row = self.rows[int(self.np_random.integers(len(self.rows)))]
        self.tools = [to_openai_schema(f) for f in self.row["function"]]
        turn = self.row["question"][0]
        system = SYSTEM_PROMPT.replace("{schemas}", "\n".join(json.dumps(t, ensure_ascii=False) for t in self.tools))
        extra_system = [m["content"] for m in turn if m.get("role") == "system"]
        if extra_system:
            system = "\n\n".join(extra_system + [system])
        self.messages = [{"role": "system", "content": system}] + [m for m in turn if m.get("role") != "system"]
        self._done = False
        return list(self.messages), self._info()

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {"task_id": str(self.row["id"]), "tools": self.tools, "category": self.row.get("category"),
                "system_prompt": self.messages[0]["content"], **extra}

    def step(self, action: Any):
        if self._done:
            return list(self.messages), 0.0, True, False, self._info(error="the episode has ended; call reset()",
                                                                       reward_components={})
        self._done = True
        parsed = parse_action(action)
        if parsed.invalid:
            self.messages += [{"role": "assistant", "content": parsed.content}, {"role": "user", "content": f"Error: {parsed.invalid}"}]
            return list(self.messages), self.config.incorrect_reward, True, False, self._info(
                error=parsed.invalid, correct=False, reward_components={"ast": 0.0})
        self.messages.append(parsed.assistant_message())
        calls = [(c.name, c.arguments) for c in parsed.tool_calls]
        if parsed.errors:
            correct, reason = False, "; ".join(parsed.errors)
        else:
            correct, reason = check_calls(calls, self.row.get("ground_truth"), self.row["function"])
        reward = self.config.correct_reward if correct else self.config.incorrect_reward
        return list(self.messages), float(reward), True, False, self._info(
            correct=correct, reason=reason, reward_components={"ast": 1.0 if correct else 0.0})
