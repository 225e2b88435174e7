"""``ToolUse-v0``: a multi-turn customer-service sandbox on a real SQLite database."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from rubricgym.spaces import AssistantReplySpace, ChatSpace
from rubricgym.tools import execute_tool_calls, parse_action

from .shop import KINDS, REFUND_WINDOW_DAYS, Shop, ShopTask, create_database, make_task, populate, shop_tools, table_state

SYSTEM_PROMPT = f"""You are a customer-service agent of Trailhead Outfitters, an outdoor-gear shop. Use the tools to look \
up customers and orders and to change them. Shop rules: only pending orders can be cancelled or get a new shipping \
address; refunds are for delivered orders within {REFUND_WINDOW_DAYS} days of delivery and never above what was paid; \
exchanges are for delivered orders within the same window, for an in-stock product of the same category that costs no \
more. Never break a rule to please a customer; escalate to a human when the customer asks for one or when a request \
cannot be met and they asked to be passed on. To call a tool, write \
<tool_call>{{"name": "<tool>", "arguments": {{...}}}}</tool_call>. When you are done, reply to the customer without \
calling a tool; that ends the conversation.
Tools:
"""


@dataclass
class ToolUseConfig:
    """Every knob of :class:`ToolUseEnv`."""

    num_tasks: int = 70
    """Tasks per split (kinds cycle: cancel, refund, address, exchange, expired refund, escalation, two requests)."""
    split: str = "train"
    """``train`` or ``test``: disjoint database seeds."""
    max_turns: int = 10
    outcome_weight: float = 0.8
    """Reward = outcome_weight * (end state == goal) + progress_weight * progress."""
    progress_weight: float = 0.2


class ToolUseEnv(gym.Env):
    """One customer request per episode, on a fresh SQLite file seeded for the task.

    Reward components: ``outcome`` (1 when every table the task touches equals the goal state)
    and ``progress`` (share of the needed row changes made, minus wrong changes, floored at 0).
    An invalid call gets an error observation and costs a turn.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, config: ToolUseConfig | None = None, render_mode: str | None = None, **kwargs: Any):
        self.config = cfg = config or ToolUseConfig(**kwargs)
        self.render_mode = render_mode
        self.tasks = [make_task(i, cfg.split) for i in range(cfg.num_tasks)]
        self.tasks_by_id = {t.id: t for t in self.tasks}
        self.tools = shop_tools(lambda: self.shop)
        self.tool_schemas = [tool.schema for tool in self.tools.values()]
        self.system_prompt = SYSTEM_PROMPT + "\n".join(json.dumps(s) for s in self.tool_schemas)
        self.observation_space = ChatSpace()
        self.action_space = AssistantReplySpace(max_length=100_000)
        self._workdir = tempfile.mkdtemp(prefix="rubricgym-tooluse-")
        self.db: sqlite3.Connection | None = None
        self.shop: Shop | None = None
        self.task: ShopTask | None = None
        self.messages: list[dict[str, Any]] = []
        self._turn, self._done = 0, True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        if options.get("task_id") is not None:
            if options["task_id"] not in self.tasks_by_id:
                raise ValueError(f"unknown task_id {options['task_id']!r}")
            self.task = self.tasks_by_id[options["task_id"]]
        else:
            self.task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        self._close_db()
        path = os.path.join(self._workdir, "shop.sqlite")
        if os.path.exists(path):  # a fresh database every episode
            os.remove(path)
        create_database(path, self.task.seed)
        self.db = sqlite3.connect(path)
        self.shop = Shop(self.db)
        self._initial = {t: table_state(self.db, t) for t in self.task.tables}
        self._goal = self.goal_state(self.task)
        self.messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": self.task.instruction}]
        self._turn, self._done = 0, False
        return list(self.messages), self._info()

    @staticmethod
    def goal_state(task: ShopTask) -> dict[str, list[tuple]]:
        """The touched tables after the task's correct calls, applied to a copy of its database."""
        db = sqlite3.connect(":memory:")
        populate(db, task.seed)
        shop = Shop(db)
        for name, arguments in task.solution:
            getattr(shop, name)(**arguments)
        return {t: table_state(db, t) for t in task.tables}

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {"task_id": self.task.id, "system_prompt": self.system_prompt, "instruction": self.task.instruction,
                "kind": self.task.kind, "params": dict(self.task.params), "tools": self.tool_schemas, "turn": self._turn,
                **extra}

    def step(self, action: Any):
        if self._done:
            return list(self.messages), 0.0, True, False, self._info(error="the episode has ended; call reset()",
                                                                       reward_components={})
        self._turn += 1
        parsed = parse_action(action)
        errors: list[str] = []
        if parsed.invalid:
            self.messages += [{"role": "assistant", "content": parsed.content}, {"role": "user", "content": f"Error: {parsed.invalid}"}]
            errors.append(parsed.invalid)
        elif parsed.wants_tools:
            self.messages.append(parsed.assistant_message())
            results, errors = execute_tool_calls(parsed, self.tools, after_each=self.db.commit)
            self.messages += results
        else:
            self.messages.append(parsed.assistant_message())
            return self._finish(truncated=False)
        if self._turn >= self.config.max_turns:
            return self._finish(truncated=True, error="turn limit reached")
        return list(self.messages), 0.0, False, False, self._info(reward_components={}, **({"error": "; ".join(errors)} if errors else {}))

    def score(self) -> dict[str, float]:
        needed = wrong = achieved = 0
        for table in self.task.tables:
            initial, goal, final = set(self._initial[table]), set(self._goal[table]), set(table_state(self.db, table))
            need, made = initial ^ goal, initial ^ final
            needed += len(need)
            achieved += len(need & made)
            wrong += len(made - need)
        outcome = float(all(table_state(self.db, t) == self._goal[t] for t in self.task.tables))
        progress = 1.0 if outcome else max(0.0, achieved - wrong) / max(needed, 1)
        return {"outcome": outcome, "progress": progress}

    def _finish(self, truncated: bool, error: str | None = None):
        self._done = True
        components = self.score()
        reward = self.config.outcome_weight * components["outcome"] + self.config.progress_weight * components["progress"]
        extra: dict[str, Any] = {"reward_components": components, "correct": components["outcome"] == 1.0}
        if error:
            extra["error"] = error
        return list(self.messages), float(reward), not truncated, truncated, self._info(**extra)

    def _close_db(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def close(self) -> None:
        self._close_db()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{m['role']}] {m.get('content') or m.get('tool_calls')}" for m in self.messages)


__all__ = ["KINDS", "ToolUseConfig", "ToolUseEnv"]
